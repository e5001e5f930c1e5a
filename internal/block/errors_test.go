package block

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/drive"
)

func TestStatusRoundTrip(t *testing.T) {
	id := drive.NewBlockID()
	corrupt := &drive.CorruptError{Drive: 3, Block: id, Segment: 5, Reason: "crc mismatch"}
	tests := []struct {
		name string
		err  error
		code codes.Code
		is   error
	}{
		{"not found", fmt.Errorf("%w: drive d1 block x", drive.ErrNotFound), codes.NotFound, drive.ErrNotFound},
		{"unknown drive", fmt.Errorf("%w: d9", ErrUnknownDrive), codes.NotFound, ErrUnknownDrive},
		{"corrupt", fmt.Errorf("reading: %w", corrupt), codes.DataLoss, drive.ErrCorrupt},
		{"no space", fmt.Errorf("%w: d1", drive.ErrNoSpace), codes.ResourceExhausted, drive.ErrNoSpace},
		{"exists", fmt.Errorf("%w: d1", drive.ErrExists), codes.AlreadyExists, drive.ErrExists},
		{"invalid", fmt.Errorf("%w: bad id", drive.ErrInvalid), codes.InvalidArgument, drive.ErrInvalid},
		{"newer", fmt.Errorf("%w: v2", drive.ErrNewerFormat), codes.FailedPrecondition, drive.ErrNewerFormat},
		{"closed", fmt.Errorf("%w: d1", drive.ErrClosed), codes.Unavailable, drive.ErrClosed},
		{"canceled", fmt.Errorf("put: %w", context.Canceled), codes.Canceled, context.Canceled},
		{"deadline", fmt.Errorf("put: %w", context.DeadlineExceeded), codes.DeadlineExceeded, context.DeadlineExceeded},
		{"stream broken", fmt.Errorf("reading data: %w", status.Error(codes.Unavailable, "gone")), codes.Unavailable, nil},
		{"other", errors.New("disk on fire"), codes.Internal, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := toStatus(tt.err)
			if got := status.Code(st); got != tt.code {
				t.Fatalf("code = %v, want %v", got, tt.code)
			}
			back := fromStatus(st)
			if tt.is == nil { // unmapped: the status error, code kept
				if status.Code(back) != tt.code {
					t.Fatalf("unmapped error lost its code: %v", back)
				}
				return
			}
			if back.Error() != tt.err.Error() && tt.is != drive.ErrCorrupt {
				t.Fatalf("message %q, want %q", back.Error(), tt.err.Error())
			}
			if !errors.Is(back, tt.is) || status.Code(back) != tt.code && tt.is != drive.ErrCorrupt {
				t.Fatalf("fromStatus(%v) = %v, not %v", st, back, tt.is)
			}
		})
	}
	var ce *drive.CorruptError
	if back := fromStatus(toStatus(corrupt)); !errors.As(back, &ce) || *ce != *corrupt || back.Error() != corrupt.Error() {
		t.Fatalf("corrupt round trip = %v", back)
	}
	if toStatus(nil) != nil || fromStatus(nil) != nil {
		t.Fatal("nil does not map to nil")
	}
}
