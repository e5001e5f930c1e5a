package fuse

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

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

// status is status of err, and an EIO also logged (see eioLog): the
// application sees only the errno, so the cause must reach the mount's log.
func (r *rawFS) status(err error) gofuse.Status {
	st := status(err)
	if st == gofuse.EIO {
		op := "?"
		if pc, _, _, ok := runtime.Caller(1); ok {
			if f := runtime.FuncForPC(pc); f != nil {
				op = f.Name()[strings.LastIndexByte(f.Name(), '.')+1:]
			}
		}
		r.eio.note(r.log, op, err)
	}
	return st
}

// eioEvery is how often an EIO reply is logged at most.
const eioEvery = time.Second

// eioLog rate-limits the warnings of EIO replies: the first at once, then
// at most one every eioEvery, each with the number of others since the
// last one logged (a node or etcd that cannot be reached fails every
// request for a while; one line a second says so with its cause).
type eioLog struct {
	mu     sync.Mutex
	last   time.Time
	missed int
	now    func() time.Time // tests set it; nil is time.Now
}

func (l *eioLog) note(log interface{ Warn(string, ...any) }, op string, err error) {
	l.mu.Lock()
	now := time.Now()
	if l.now != nil {
		now = l.now()
	}
	if !l.last.IsZero() && now.Sub(l.last) < eioEvery {
		l.missed++
		l.mu.Unlock()
		return
	}
	missed := l.missed
	l.last, l.missed = now, 0
	l.mu.Unlock()
	log.Warn("I/O error returned to an application", "op", op, "err", err, "not_logged_since_last", missed)
}
