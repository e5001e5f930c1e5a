package fuse

import (
	"context"
	"syscall"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/weftfs/weft/internal/vfs"
)

// File locks. The mount negotiates POSIX and flock locks (EnableLocks),
// so the kernel keeps none itself and sends every fcntl F_GETLK, F_SETLK
// and F_SETLKW (OFD locks too) and flock(2) here (flock with
// FUSE_LK_FLOCK, owner: the open file description), where vfs takes
// them in the cluster's lock table. The kernel's lock owner identifies
// the holder: a process's file table for POSIX locks (its closes send
// FLUSH with it: Flush drops its locks), the file description for flock
// and OFD locks (RELEASE drops them).

// lockFromFUSE converts the kernel's request.
func lockFromFUSE(in *gofuse.LkIn) (vfs.Lock, gofuse.Status) {
	l := vfs.Lock{Flock: in.LkFlags&gofuse.FUSE_LK_FLOCK != 0, Start: in.Lk.Start, End: in.Lk.End, PID: in.Lk.Pid}
	switch in.Lk.Typ {
	case syscall.F_RDLCK:
		l.Type = vfs.LockRead
	case syscall.F_WRLCK:
		l.Type = vfs.LockWrite
	case syscall.F_UNLCK:
		l.Type = vfs.LockUnlock
	default:
		return l, gofuse.EINVAL
	}
	if l.End > vfs.MaxLockOffset {
		l.End = vfs.MaxLockOffset
	}
	if l.Start > l.End {
		return l, gofuse.EINVAL
	}
	return l, gofuse.OK
}

func (r *rawFS) GetLk(cancel <-chan struct{}, in *gofuse.LkIn, out *gofuse.LkOut) gofuse.Status {
	h, err := r.fs.Handle(in.Fh)
	if err != nil {
		return r.status(err)
	}
	l, st := lockFromFUSE(in)
	if st != gofuse.OK {
		return st
	}
	c, found, err := h.TestLock(callerCtx(&in.InHeader), in.Owner, l)
	if err != nil {
		return r.status(err)
	}
	if !found {
		out.Lk = gofuse.FileLock{Typ: syscall.F_UNLCK}
		return gofuse.OK
	}
	out.Lk = gofuse.FileLock{Start: c.Start, End: c.End, Typ: syscall.F_RDLCK, Pid: c.PID}
	if c.Type == vfs.LockWrite {
		out.Lk.Typ = syscall.F_WRLCK
	}
	return gofuse.OK
}

func (r *rawFS) SetLk(cancel <-chan struct{}, in *gofuse.LkIn) gofuse.Status {
	return r.setLk(cancel, in, false)
}

// SetLkw waits for the lock; the kernel's interrupt (a signal to the
// waiting process) ends the wait with EINTR.
func (r *rawFS) SetLkw(cancel <-chan struct{}, in *gofuse.LkIn) gofuse.Status {
	return r.setLk(cancel, in, true)
}

func (r *rawFS) setLk(cancel <-chan struct{}, in *gofuse.LkIn, wait bool) gofuse.Status {
	h, err := r.fs.Handle(in.Fh)
	if err != nil {
		return r.status(err)
	}
	l, st := lockFromFUSE(in)
	if st != gofuse.OK {
		return st
	}
	ctx := callerCtx(&in.InHeader)
	if wait {
		// Unlike other requests (see callerCtx), a lock wait honours the
		// interrupt: it may last forever, and a signal must end it.
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		go func() { // lives as long as the request
			select {
			case <-cancel:
				stop()
			case <-ctx.Done():
			}
		}()
	}
	return r.status(h.SetLock(ctx, in.Owner, l, wait))
}
