package fuse

import (
	"context"
	"errors"
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/vfs"
)

// errnoTable maps sentinel errors to errno, checked in order.
var errnoTable = []struct {
	err   error
	errno syscall.Errno
}{
	{meta.ErrNotFound, syscall.ENOENT},
	{meta.ErrExists, syscall.EEXIST},
	{meta.ErrNotDir, syscall.ENOTDIR},
	{meta.ErrIsDir, syscall.EISDIR},
	{meta.ErrNotEmpty, syscall.ENOTEMPTY},
	{meta.ErrNameTooLong, syscall.ENAMETOOLONG},
	{meta.ErrNotPermitted, syscall.EPERM},
	{meta.ErrTooManyLinks, syscall.EMLINK},
	{meta.ErrRenameLoop, syscall.EINVAL},
	{meta.ErrNoXattr, syscall.ENODATA},
	{meta.ErrXattrTooLarge, syscall.E2BIG},
	{meta.ErrBusy, syscall.EBUSY},
	{meta.ErrInvalid, syscall.EINVAL},
	{vfs.ErrAccess, syscall.EACCES},
	{vfs.ErrPerm, syscall.EPERM},
	{vfs.ErrBadHandle, syscall.EBADF},
	{client.ErrNoSpace, syscall.ENOSPC},
	{kv.ErrTooLarge, syscall.EFBIG},
	{context.Canceled, syscall.EINTR},
}

// status turns an error of the layers below into a FUSE status: the one
// place where weft errors become errno. Anything unknown — an unreachable
// node, a corrupt record, a timeout — is EIO.
func status(err error) gofuse.Status {
	if err == nil {
		return gofuse.OK
	}
	for _, e := range errnoTable {
		if errors.Is(err, e.err) {
			return gofuse.Status(e.errno)
		}
	}
	return gofuse.EIO
}
