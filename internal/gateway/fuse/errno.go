package fuse

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/weftfs/weft/internal/vfs"
)

// errnoTable maps vfs's error classes to errno, checked in order. A vfs
// error has one class; context.Canceled (the standard library's) may be in
// its chain too. Canceled comes after every class but the retryable one,
// so a classified error keeps its code even if it was cut short, and a
// retryable one that was cut short is EINTR, as before that class existed.
var errnoTable = []struct {
	err   error
	errno syscall.Errno
}{
	{vfs.ErrNotFound, syscall.ENOENT},
	{vfs.ErrExists, syscall.EEXIST},
	{vfs.ErrNotDir, syscall.ENOTDIR},
	{vfs.ErrIsDir, syscall.EISDIR},
	{vfs.ErrNotEmpty, syscall.ENOTEMPTY},
	{vfs.ErrNameTooLong, syscall.ENAMETOOLONG},
	{vfs.ErrPerm, syscall.EPERM},
	{vfs.ErrTooManyLinks, syscall.EMLINK},
	{vfs.ErrNoXattr, syscall.ENODATA},
	{vfs.ErrXattrTooLarge, syscall.E2BIG},
	{vfs.ErrBusy, syscall.EBUSY},
	{vfs.ErrLocked, syscall.EAGAIN},
	{vfs.ErrNoLocks, syscall.ENOLCK},
	{vfs.ErrInvalid, syscall.EINVAL},
	{vfs.ErrAccess, syscall.EACCES},
	{vfs.ErrBadHandle, syscall.EBADF},
	{vfs.ErrNoSpace, syscall.ENOSPC},
	{vfs.ErrFileTooLarge, syscall.EFBIG},
	{vfs.ErrNotSupported, syscall.EOPNOTSUPP},
	{vfs.ErrNoData, syscall.ENXIO},
	{context.Canceled, syscall.EINTR},
	{vfs.ErrUnavailable, syscall.EIO},
}

// status turns an error of vfs into a FUSE status: the one place where
// weft errors become errno. Anything of no class — an unreachable node, a
// corrupt record, a timeout — is EIO.
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

// status is status of err, and an EIO also logged (vfs.FaultLog): the
// application sees only the errno, so the cause must reach the mount's
// log. The operation is the rawFS method that answers.
func (r *rawFS) status(err error) gofuse.Status {
	st := status(err)
	if st == gofuse.EIO {
		op := "?"
		if pc, _, _, ok := runtime.Caller(1); ok {
			if f := runtime.FuncForPC(pc); f != nil {
				op = f.Name()[strings.LastIndexByte(f.Name(), '.')+1:]
			}
		}
		r.faults.Note(op, err)
	}
	return st
}
