package fuse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/weftfs/weft/internal/vfs"
)

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want syscall.Errno
	}{
		{vfs.ErrNotFound, syscall.ENOENT},
		{vfs.ErrExists, syscall.EEXIST},
		{vfs.ErrNotDir, syscall.ENOTDIR},
		{vfs.ErrIsDir, syscall.EISDIR},
		{vfs.ErrNotEmpty, syscall.ENOTEMPTY},
		{vfs.ErrNameTooLong, syscall.ENAMETOOLONG},
		{vfs.ErrPerm, syscall.EPERM},
		{vfs.ErrAccess, syscall.EACCES},
		{vfs.ErrTooManyLinks, syscall.EMLINK},
		{vfs.ErrInvalid, syscall.EINVAL},
		{vfs.ErrNoXattr, syscall.ENODATA},
		{vfs.ErrXattrTooLarge, syscall.E2BIG},
		{vfs.ErrBusy, syscall.EBUSY},
		{vfs.ErrLocked, syscall.EAGAIN},
		{vfs.ErrNoLocks, syscall.ENOLCK},
		{vfs.ErrBadHandle, syscall.EBADF},
		{vfs.ErrNoSpace, syscall.ENOSPC},
		{vfs.ErrFileTooLarge, syscall.EFBIG},
		{vfs.ErrNotSupported, syscall.EOPNOTSUPP},
		{vfs.ErrNoData, syscall.ENXIO},
		{vfs.ErrUnavailable, syscall.EIO},
		{context.Canceled, syscall.EINTR},
		{fmt.Errorf("%w: %w", vfs.ErrNotFound, context.Canceled), syscall.ENOENT},
		{fmt.Errorf("%w: %w", vfs.ErrUnavailable, context.Canceled), syscall.EINTR},
		{errors.New("node n3 unreachable"), syscall.EIO},
		{io.ErrUnexpectedEOF, syscall.EIO},
	} {
		if got := status(fmt.Errorf("op LIN 5: %w", tc.err)); got != gofuse.Status(tc.want) {
			t.Errorf("status(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if got := status(nil); got != gofuse.OK {
		t.Errorf("status(nil) = %v", got)
	}
}

// TestEIOLogged: an EIO reply is logged with the operation that answers
// and its cause (vfs.FaultLog limits how often); another errno is not.
func TestEIOLogged(t *testing.T) {
	var buf bytes.Buffer
	r := newRawFS(nil, slog.New(slog.NewTextHandler(&buf, nil)))
	if st := r.status(fmt.Errorf("x: %w", vfs.ErrNotFound)); st != gofuse.ENOENT || buf.Len() != 0 {
		t.Fatalf("ENOENT: status %v, logged %q", st, buf.String())
	}
	if st := r.status(errors.New("etcd commit: rpc error: code = Unavailable")); st != gofuse.EIO {
		t.Fatalf("status %v, want EIO", st)
	}
	if out := buf.String(); !strings.Contains(out, "op=TestEIOLogged") || !strings.Contains(out, "Unavailable") {
		t.Fatalf("EIO logged as %q, want the operation and the cause", out)
	}
}
