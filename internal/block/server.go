package block

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/rpc/pb"
)

// server implements pb.BlockServiceServer over a Service. Every handler
// returns its error through toStatus.
type server struct {
	pb.UnimplementedBlockServiceServer
	s *Service
}

var _ pb.BlockServiceServer = (*server)(nil)

// blockOf resolves the drive and block id of a request.
func (g *server) blockOf(driveID uint32, blockID string) (*drive.Drive, drive.BlockID, error) {
	d, err := g.s.Drive(drive.ID(driveID))
	if err != nil {
		return nil, drive.BlockID{}, err
	}
	id, err := drive.ParseBlockID(blockID)
	if err != nil {
		return nil, id, err
	}
	return d, id, nil
}

func (g *server) Put(stream pb.BlockService_PutServer) error {
	// The messages are decoded by wireCodec into putFrames (ServerOptions
	// installs it): data stays in gRPC's buffers until Read copies it.
	r := &putReader{stream: stream}
	defer r.cur.release()
	if err := stream.RecvMsg(&r.cur); err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: put stream closed before its start message", drive.ErrInvalid)
		}
		return toStatus(err)
	}
	start := r.cur.start
	if start == nil || start.GetHeader() == nil {
		return toStatus(fmt.Errorf("%w: the first put message must carry PutStart with a header", drive.ErrInvalid))
	}
	r.cur.release()
	d, err := g.s.Drive(drive.ID(start.GetDriveId()))
	if err != nil {
		return toStatus(err)
	}
	hdr, err := headerFromPB(start.GetHeader())
	if err != nil {
		return toStatus(err)
	}
	done, err := g.s.admit(stream.Context(), d.ID(), qos.Write, start.GetLength())
	if err != nil {
		return toStatus(err)
	}
	err = d.Put(stream.Context(), hdr, r, start.GetLength())
	done(true) // a put writes a whole block
	if err != nil {
		return toStatus(err)
	}
	return toStatus(stream.SendAndClose(&pb.PutResponse{}))
}

// putReader reads the data messages of a Put stream as one byte stream; it
// returns io.EOF when the client closes its side. Each byte is copied once,
// from gRPC's receive buffers into p.
type putReader struct {
	stream pb.BlockService_PutServer
	cur    putFrame // the message being read
}

func (r *putReader) Read(p []byte) (int, error) {
	for r.cur.data == nil || r.cur.data.Remaining() == 0 {
		if err := r.stream.RecvMsg(&r.cur); err != nil {
			return 0, err
		}
		if r.cur.start != nil {
			return 0, fmt.Errorf("%w: a second PutStart in one put stream", drive.ErrInvalid)
		}
	}
	return r.cur.data.Read(p)
}

func (g *server) Get(req *pb.GetRequest, stream pb.BlockService_GetServer) error {
	d, id, err := g.blockOf(req.GetDriveId(), req.GetBlockId())
	if err != nil {
		return toStatus(err)
	}
	// The range is read and verified whole before sending, so a corrupt
	// block never streams partial data; blocks are unit-sized (1 MiB by
	// default), which bounds the memory.
	n := req.GetLength()
	if n < 0 { // to the end: the block's length, for the bytes limit
		if h, _, _, err := d.Stat(id); err == nil {
			n = max(h.Length-req.GetOffset(), 0)
		}
	}
	done, err := g.s.admit(stream.Context(), d.ID(), qos.Read, n)
	if err != nil {
		return toStatus(err)
	}
	data, hdr, err := d.Get(stream.Context(), id, req.GetOffset(), req.GetLength())
	done(err == nil && req.GetOffset() == 0 && int64(len(data)) == hdr.Length)
	if err != nil {
		return toStatus(err)
	}
	first := &pb.GetChunk{Header: headerToPB(hdr), RangeLength: int64(len(data))}
	for {
		n := min(len(data), ChunkSize)
		msg := &pb.GetChunk{Data: data[:n]}
		if first != nil {
			first.Data, msg, first = data[:n], first, nil
		}
		if err := stream.Send(msg); err != nil {
			return toStatus(err)
		}
		data = data[n:]
		if len(data) == 0 {
			return nil
		}
	}
}

func (g *server) Adopt(ctx context.Context, req *pb.AdoptRequest) (*pb.AdoptResponse, error) {
	if _, ok := IdentityOf(ctx); g.s.secure && !ok {
		return nil, status.Error(codes.PermissionDenied, "block: adopt: the caller has no authorized node or client identity")
	}
	d, err := g.s.Drive(drive.ID(req.GetDriveId()))
	if err != nil {
		return nil, toStatus(err)
	}
	hdr, err := headerFromPB(req.GetHeader())
	if err != nil {
		return nil, toStatus(err)
	}
	done, err := g.s.admit(ctx, d.ID(), qos.Write, req.GetLength())
	if err != nil {
		return nil, toStatus(err)
	}
	if req.GetUnsynced() {
		err = d.AdoptUnsynced(ctx, hdr, req.GetStagedName(), req.GetLength())
	} else {
		err = d.Adopt(ctx, hdr, req.GetStagedName(), req.GetLength())
	}
	done(true) // an adoption writes a whole block
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.AdoptResponse{}, nil
}

func (g *server) Delete(ctx context.Context, req *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	d, id, err := g.blockOf(req.GetDriveId(), req.GetBlockId())
	if err != nil {
		return nil, toStatus(err)
	}
	if err := d.Delete(id); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteResponse{}, nil
}

func (g *server) Stat(ctx context.Context, req *pb.StatRequest) (*pb.StatResponse, error) {
	d, id, err := g.blockOf(req.GetDriveId(), req.GetBlockId())
	if err != nil {
		return nil, toStatus(err)
	}
	hdr, size, mtime, err := d.Stat(id)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.StatResponse{Header: headerToPB(hdr), Size: size, MtimeUnixNanos: mtime.UnixNano()}, nil
}

func (g *server) List(ctx context.Context, req *pb.ListRequest) (*pb.ListResponse, error) {
	d, err := g.s.Drive(drive.ID(req.GetDriveId()))
	if err != nil {
		return nil, toStatus(err)
	}
	infos, next, err := d.List(req.GetAfter(), int(req.GetLimit()))
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.ListResponse{Next: next, Blocks: make([]*pb.BlockInfo, len(infos))}
	for i, b := range infos {
		resp.Blocks[i] = &pb.BlockInfo{Id: b.ID.String(), Size: b.Size, MtimeUnixNanos: b.ModTime.UnixNano()}
	}
	return resp, nil
}

func (g *server) Verify(ctx context.Context, req *pb.VerifyRequest) (*pb.VerifyResponse, error) {
	d, id, err := g.blockOf(req.GetDriveId(), req.GetBlockId())
	if err != nil {
		return nil, toStatus(err)
	}
	var n int64
	if h, _, _, err := d.Stat(id); err == nil {
		n = h.Length
	}
	done, err := g.s.admit(ctx, d.ID(), qos.Read, n)
	if err != nil {
		return nil, toStatus(err)
	}
	err = d.Verify(ctx, id)
	done(true) // a verify reads the whole block
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.VerifyResponse{}, nil
}

func (g *server) DriveUsage(ctx context.Context, req *pb.DriveUsageRequest) (*pb.DriveUsageResponse, error) {
	resp := &pb.DriveUsageResponse{}
	for _, d := range g.s.Drives() {
		id := d.Identity()
		u := &pb.DriveUsage{DriveId: uint32(id.DriveID), Node: id.Node, Class: string(id.Class), Path: d.Path()}
		if usage, err := d.Usage(); err != nil {
			u.Error = err.Error()
		} else {
			u.TotalBytes, u.FreeBytes, u.UsedBytes, u.Blocks = usage.TotalBytes, usage.FreeBytes, usage.UsedBytes, usage.Blocks
		}
		resp.Drives = append(resp.Drives, u)
	}
	return resp, nil
}

func (g *server) DriveCounters(ctx context.Context, req *pb.DriveCountersRequest) (*pb.DriveCountersResponse, error) {
	resp := &pb.DriveCountersResponse{}
	for _, b := range drive.LatencyBuckets() {
		resp.LatencyBucketBoundsNanos = append(resp.LatencyBucketBoundsNanos, int64(b/time.Nanosecond))
	}
	for _, d := range g.s.Drives() {
		resp.Drives = append(resp.Drives, countersToPB(d.Counters()))
	}
	return resp, nil
}
