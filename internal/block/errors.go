package block

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/rpc/pb"
)

// This file is the one place where errors cross the wire: toStatus on the
// server, fromStatus on the client. Each status carries a pb.ErrorDetail so
// the client rebuilds the exact sentinel (and *drive.CorruptError) even
// where two sentinels share a gRPC code.

// errorKinds maps sentinels to their wire kind and gRPC code, first match
// wins.
func errorKinds() []struct {
	err  error
	kind pb.ErrorDetail_Kind
	code codes.Code
} {
	return []struct {
		err  error
		kind pb.ErrorDetail_Kind
		code codes.Code
	}{
		{ErrUnknownDrive, pb.ErrorDetail_UNKNOWN_DRIVE, codes.NotFound},
		{drive.ErrNotFound, pb.ErrorDetail_NOT_FOUND, codes.NotFound},
		{drive.ErrCorrupt, pb.ErrorDetail_CORRUPT, codes.DataLoss},
		{drive.ErrNoSpace, pb.ErrorDetail_NO_SPACE, codes.ResourceExhausted},
		{drive.ErrExists, pb.ErrorDetail_EXISTS, codes.AlreadyExists},
		{drive.ErrInvalid, pb.ErrorDetail_INVALID, codes.InvalidArgument},
		{drive.ErrNewerFormat, pb.ErrorDetail_NEWER_FORMAT, codes.FailedPrecondition},
		{drive.ErrClosed, pb.ErrorDetail_CLOSED, codes.Unavailable},
	}
}

// toStatus turns an error of the drive or block package into a gRPC status
// error with an ErrorDetail. Context errors become Canceled or
// DeadlineExceeded, a gRPC status met on the way (a broken client stream)
// keeps its code, anything else is Internal.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range errorKinds() {
		if errors.Is(err, k.err) {
			d := &pb.ErrorDetail{Kind: k.kind}
			var ce *drive.CorruptError
			if errors.As(err, &ce) {
				d.DriveId, d.BlockId, d.Segment, d.Reason = uint32(ce.Drive), ce.Block.String(), int32(ce.Segment), ce.Reason
			}
			st := status.New(k.code, err.Error())
			if withDetail, derr := st.WithDetails(d); derr == nil {
				st = withDetail
			}
			return st.Err()
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return status.Error(se.GRPCStatus().Code(), err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// remoteError is an error received from a block service: its text is the
// server's, errors.Is matches the sentinel it stands for, and status.Code
// still sees the gRPC code.
type remoteError struct {
	st       *status.Status
	sentinel error
}

func (e *remoteError) Error() string              { return e.st.Message() }
func (e *remoteError) Unwrap() error              { return e.sentinel }
func (e *remoteError) GRPCStatus() *status.Status { return e.st }

// fromStatus turns an error returned by a BlockService stub back into the
// drive or block package error it stands for: a *drive.CorruptError for a
// corrupt block, else an error that errors.Is the sentinel (context.Canceled
// and DeadlineExceeded included). Errors without a known mapping (e.g.
// Unavailable while the node is down) are returned unchanged.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, det := range st.Details() {
		d, ok := det.(*pb.ErrorDetail)
		if !ok {
			continue
		}
		if d.GetKind() == pb.ErrorDetail_CORRUPT && d.GetBlockId() != "" {
			if id, perr := drive.ParseBlockID(d.GetBlockId()); perr == nil {
				return &drive.CorruptError{Drive: drive.ID(d.GetDriveId()), Block: id, Segment: int(d.GetSegment()), Reason: d.GetReason()}
			}
		}
		for _, k := range errorKinds() {
			if k.kind == d.GetKind() {
				return &remoteError{st: st, sentinel: k.err}
			}
		}
	}
	// No detail: a status made by gRPC itself or by an older server.
	// ResourceExhausted is left alone: gRPC uses it for oversized messages.
	switch st.Code() {
	case codes.Canceled:
		return &remoteError{st: st, sentinel: context.Canceled}
	case codes.DeadlineExceeded:
		return &remoteError{st: st, sentinel: context.DeadlineExceeded}
	case codes.NotFound:
		return &remoteError{st: st, sentinel: drive.ErrNotFound}
	case codes.DataLoss:
		return &remoteError{st: st, sentinel: drive.ErrCorrupt}
	case codes.AlreadyExists:
		return &remoteError{st: st, sentinel: drive.ErrExists}
	case codes.InvalidArgument:
		return &remoteError{st: st, sentinel: drive.ErrInvalid}
	}
	return err
}
