package fuse

import (
	"context"
	"errors"
	"fmt"
	"io"
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
