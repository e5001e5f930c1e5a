package vfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/meta"
)

// Open flags (the os package's, which are Linux's).
const (
	OAccMode = os.O_RDONLY | os.O_WRONLY | os.O_RDWR
	OTrunc   = os.O_TRUNC
	OAppend  = os.O_APPEND
	OExcl    = os.O_EXCL
)

// Handle is an open file. Its methods are safe for concurrent use (the
// kernel issues parallel reads and writes on one handle).
type Handle struct {
	ID    uint64
	LIN   LIN
	Flags int

	fs   *FS
	file *client.File
	attr meta.Attr // at open: owner and mode for setuid clearing, times for relatime

	// Once-per-handle work; the kernel sends parallel requests on one
	// handle, so these are atomic.
	privCleared atomic.Bool
	atimeDone   atomic.Bool

	// lockKeys are the owners that took locks through the handle and
	// were not unlocked since (see locks.go); lockMu guards them.
	lockMu   sync.Mutex
	lockKeys map[lockKey]bool
}

// Open opens lin with Linux open flags. O_TRUNC truncates; the caller
// needs read and/or write permission as the flags ask.
//
// Close-to-open consistency, as NFS clients give it: an open sees every
// change committed before it began, from any client. A mount's metadata
// cache follows the cluster through a watch that may lag by a few
// milliseconds (more under load), so Open first waits for it to catch up
// (one round trip), then reads the attributes it opens with — unless the
// file is in a directory whose delegation this mount holds, where nobody
// else can have changed it (meta.Meta.OpenAttr). The gateway tells the
// kernel to drop what it cached before (fuse: Open).
//
// Errors: ErrNotFound, ErrIsDir (a directory for writing), ErrInvalid (not
// a regular file), ErrAccess, ErrNoSpace (O_TRUNC).
func (fs *FS) Open(ctx context.Context, lin LIN, flags int) (*Handle, error) {
	a, err := fs.m.OpenAttr(ctx, meta.LIN(lin))
	if err != nil {
		return nil, classify(err)
	}
	if a.Type == meta.TypeDir && flags&OAccMode != os.O_RDONLY {
		return nil, fmt.Errorf("%w: open a directory for writing", ErrIsDir)
	}
	h, err := fs.open(ctx, a, flags, true)
	return h, classify(err)
}

func (fs *FS) open(ctx context.Context, a meta.Attr, flags int, check bool) (*Handle, error) {
	if check && fs.cfg.CheckPermissions {
		var want uint32
		switch flags & OAccMode {
		case os.O_RDONLY:
			want = MayRead
		case os.O_WRONLY:
			want = MayWrite
		default:
			want = MayRead | MayWrite
		}
		if flags&OTrunc != 0 {
			want |= MayWrite
		}
		if !Allowed(CallerFrom(ctx), attrFromMeta(a), want) {
			return nil, fmt.Errorf("%w: open LIN %d", ErrAccess, a.LIN)
		}
	}
	writable := flags&OAccMode != os.O_RDONLY || flags&OTrunc != 0
	if a.Type != meta.TypeFile {
		return nil, fmt.Errorf("%w: LIN %d is a %s, not a regular file", ErrInvalid, a.LIN, a.Type)
	}
	fs.opens.open(a.LIN)
	f, err := fs.c.OpenAttr(ctx, a, writable)
	if err != nil {
		_ = fs.opens.release(ctx, a.LIN)
		return nil, err
	}
	h := &Handle{LIN: LIN(a.LIN), Flags: flags, fs: fs, file: f, attr: a}
	if flags&OTrunc != 0 {
		if a.Size > 0 {
			if err := f.Truncate(ctx, 0); err != nil {
				_ = fs.release(ctx, h)
				return nil, err
			}
		}
		h.privCleared.Store(true)
		if _, err := fs.killPrivileges(ctx, a.LIN, CallerFrom(ctx).UID != 0); err != nil {
			_ = fs.release(ctx, h)
			return nil, err
		}
	}
	fs.mu.Lock()
	h.ID = fs.nextFH
	fs.nextFH++
	fs.handles[h.ID] = h
	fs.mu.Unlock()
	return h, nil
}

// Handle returns the open handle with id fh (ErrBadHandle if none).
func (fs *FS) Handle(fh uint64) (*Handle, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	h := fs.handles[fh]
	if h == nil {
		return nil, fmt.Errorf("%w: %d", ErrBadHandle, fh)
	}
	return h, nil
}

// Read reads at off, like io.ReaderAt (io.EOF at the end of the file).
// The first read of a handle updates atime (relatime; committed within
// AtimeDelay, see atimes). Errors: ErrBadHandle
// (not open for reading), ErrUnavailable.
func (h *Handle) Read(ctx context.Context, p []byte, off int64) (int, error) {
	b, err := h.read(ctx, p, off, false)
	return len(b), err
}

// ReadView is Read, except that the bytes it returns may be, instead of
// p filled, a view of the mount's cache holding them: the caller must
// not write to it, and may keep it (it never changes). A gateway that
// sends the bytes on saves a copy of every byte a sequential reader
// reads.
func (h *Handle) ReadView(ctx context.Context, p []byte, off int64) ([]byte, error) {
	return h.read(ctx, p, off, true)
}

// read is Read, or ReadView when view.
func (h *Handle) read(ctx context.Context, p []byte, off int64, view bool) ([]byte, error) {
	if h.Flags&OAccMode == os.O_WRONLY {
		return nil, fmt.Errorf("%w: handle not open for reading", ErrBadHandle)
	}
	var b []byte
	var err error
	if view {
		b, err = h.file.ReadAtView(ctx, p, off)
	} else {
		var n int
		n, err = h.file.ReadAt(ctx, p, off)
		b = p[:n]
	}
	if h.atimeDone.CompareAndSwap(false, true) {
		if cur, gerr := h.fs.m.GetAttr(ctx, meta.LIN(h.LIN)); gerr == nil {
			h.fs.atimes.read(cur, time.Now())
		}
	}
	return b, classify(err)
}

// Write writes p at off (at the end of the file with O_APPEND). The
// handle's first write removes the file's privileges (killPrivileges:
// capabilities, and setuid and setgid when the caller is not root), so
// that a gateway need not ask before every write. Errors:
// ErrBadHandle (not open for writing), ErrNoSpace, ErrFileTooLarge,
// ErrUnavailable.
func (h *Handle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	if h.Flags&OAccMode == os.O_RDONLY {
		return 0, fmt.Errorf("%w: handle not open for writing", ErrBadHandle)
	}
	if h.Flags&OAppend != 0 {
		off = h.file.Size()
	}
	if _, err := h.KillPrivileges(ctx, false); err != nil {
		return 0, err
	}
	n, err := h.file.WriteAt(ctx, p, off)
	return n, classify(err)
}

// KillPrivileges kills the file's privileges (FS.KillPrivileges) before
// a change of its data through h: at the handle's first change (a
// failure leaves it to the next), with setuid and setgid when the caller
// is not root, and again whenever suidgid asks (FUSE's
// WRITE_KILL_SUIDGID). Write and Allocate call it; a gateway whose client
// caches attributes calls it first to learn whether they changed.
// Errors: ErrNotFound.
func (h *Handle) KillPrivileges(ctx context.Context, suidgid bool) (changed bool, err error) {
	first := h.privCleared.CompareAndSwap(false, true)
	if !first && !suidgid {
		return false, nil
	}
	changed, err = h.fs.killPrivileges(ctx, meta.LIN(h.LIN), suidgid || CallerFrom(ctx).UID != 0)
	if err != nil && first {
		h.privCleared.Store(false)
	}
	return changed, classify(err)
}

// CapabilityXattr is the extended attribute holding a file's
// capabilities (setcap), removed when the file's data changes.
const CapabilityXattr = "security.capability"

// KillPrivileges removes what Linux removes from a regular file whose
// data changes: its capabilities (CapabilityXattr), and, with suidgid, its
// setuid bit and its setgid bit if group-exec is set (setgid without it
// marks mandatory locking and stays). vfs does it itself at a handle's
// first write, an O_TRUNC open and a truncate (suidgid when the caller is
// not root); a gateway calls it when its protocol says a change must kill
// them (a truncate with FUSE's FATTR_KILL_SUIDGID). Nothing is written when
// there is nothing to remove; changed says whether anything was. Errors:
// ErrNotFound.
func (fs *FS) KillPrivileges(ctx context.Context, lin LIN, suidgid bool) (changed bool, err error) {
	changed, err = fs.killPrivileges(ctx, meta.LIN(lin), suidgid)
	return changed, classify(err)
}

func (fs *FS) killPrivileges(ctx context.Context, lin meta.LIN, suidgid bool) (changed bool, err error) {
	if _, err := fs.m.GetXattr(ctx, lin, CapabilityXattr); err == nil {
		if err := fs.m.RemoveXattr(ctx, lin, CapabilityXattr); err != nil && !errors.Is(err, meta.ErrNoXattr) {
			return false, err
		}
		changed = true
	} else if !errors.Is(err, meta.ErrNoXattr) {
		return false, err
	}
	if !suidgid {
		return changed, nil
	}
	cur, err := fs.m.GetAttr(ctx, lin)
	if err != nil {
		return changed, err
	}
	mode := cur.Mode &^ modeSetuid
	if cur.Mode&0o010 != 0 {
		mode &^= modeSetgid
	}
	if mode == cur.Mode || cur.Type != meta.TypeFile {
		return changed, nil
	}
	cur.Mode = mode
	_, err = fs.m.SetAttr(ctx, lin, meta.SetMode, cur)
	return true, err
}

// Size is the file's size including this mount's buffered writes.
func (h *Handle) Size() int64 { return h.file.Size() }

// Flush writes buffered data out and commits it (close(2) calls it).
// Errors: those of Write.
func (h *Handle) Flush(ctx context.Context) error { return classify(h.file.Flush(ctx)) }

// Fsync makes the file's data and metadata durable, and the namespace
// changes this mount acknowledged before it (its create among them); it
// reports namespace changes that could not be committed (see
// meta.Meta.Flush).
func (h *Handle) Fsync(ctx context.Context) error {
	if err := h.file.Sync(ctx); err != nil {
		return classify(err)
	}
	return classify(h.fs.m.Flush(ctx))
}

// FsyncDir makes the namespace changes this mount acknowledged durable:
// fsync(2) of a directory.
func (fs *FS) FsyncDir(ctx context.Context) error { return classify(fs.m.Flush(ctx)) }

// Release closes the handle: buffered data is written out, the locks
// taken through it and not unlocked yet are released (flock and OFD
// locks; see locks.go), and the file is deleted if it was unlinked and
// this was its last opener.
func (fs *FS) Release(ctx context.Context, fh uint64) error {
	fs.mu.Lock()
	h := fs.handles[fh]
	delete(fs.handles, fh)
	fs.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: %d", ErrBadHandle, fh)
	}
	return classify(fs.release(ctx, h))
}

func (fs *FS) release(ctx context.Context, h *Handle) error {
	err := h.file.Close(ctx)
	if lerr := fs.releaseLocks(ctx, h); err == nil {
		err = lerr
	}
	if rerr := fs.opens.release(ctx, meta.LIN(h.LIN)); err == nil {
		err = rerr
	}
	return err
}

// Close releases every open handle (at unmount).
func (fs *FS) Close(ctx context.Context) error {
	fs.mu.Lock()
	hs := fs.handles
	fs.handles = map[uint64]*Handle{}
	fs.mu.Unlock()
	var first error
	for _, h := range hs {
		if err := fs.release(ctx, h); err != nil && first == nil {
			first = err
		}
	}
	fs.opens.close()
	fs.atimes.close(ctx)
	return classify(first)
}
