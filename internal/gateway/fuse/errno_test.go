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
	"time"

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

// TestEIOLogged: an EIO reply is logged with the operation and its cause,
// at most once a second, the next line counting those not logged; other
// errnos are not logged.
func TestEIOLogged(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(1_700_000_000, 0)
	r := newRawFS(nil, slog.New(slog.NewTextHandler(&buf, nil)))
	r.eio.now = func() time.Time { return clock }
	cause := errors.New("etcd commit: rpc error: code = Unavailable")
	if st := r.status(cause); st != gofuse.EIO {
		t.Fatalf("status %v, want EIO", st)
	}
	r.status(cause)
	r.status(fmt.Errorf("x: %w", vfs.ErrNotFound))
	clock = clock.Add(eioEvery / 2)
	r.status(cause)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "op=TestEIOLogged") || !strings.Contains(lines[0], "Unavailable") || !strings.Contains(lines[0], "not_logged_since_last=0") {
		t.Fatalf("logged within a second of the first EIO:\n%s", buf.String())
	}
	clock = clock.Add(eioEvery)
	r.status(cause)
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "not_logged_since_last=2") {
		t.Fatalf("logged a second later (two EIOs not logged in between):\n%s", buf.String())
	}
}
