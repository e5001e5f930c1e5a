package vfs

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/weftfs/weft/internal/meta"
)

// File locks, coherent across every client of the cluster (meta's lock
// table, see meta/locks.go): flock(2) locks and POSIX byte-range locks,
// OFD locks among them.
//
// An owner is the gateway's id of who holds a lock within this client
// (FUSE: the kernel's lock owner — the process's file table for POSIX
// locks, the open file description for flock and OFD locks). Locks go
// when their owner closes the file: a gateway calls Handle.UnlockOwner
// for a process's close (POSIX locks: FUSE FLUSH), and Release drops the
// rest of what was locked through the handle (flock and OFD locks, whose
// owner is the description: FUSE RELEASE). They also go with the client:
// its records live under its session's lease, and at Close.
//
// PIDs: TestLock reports a holder's PID when the holder is a process of
// this client, and 0 when it is on another client (its PID would name an
// unrelated process here; the Linux kernel would also turn a PID it does
// not know into 0).

// LockType is the type of a lock or request.
type LockType uint8

// Lock types: LockUnlock in a request releases.
const (
	LockUnlock LockType = iota
	LockRead
	LockWrite
)

// MaxLockOffset is the end of a lock "to the end of the file".
const MaxLockOffset = meta.MaxLockOffset

// Lock is a lock or a request for one: Start and End are inclusive byte
// offsets (flock locks cover the whole file).
type Lock struct {
	Flock      bool
	Type       LockType
	Start, End uint64
	PID        uint32
}

// lockKey is one owner's locks of one kind on one file.
type lockKey struct {
	lin   meta.LIN
	owner uint64
	flock bool
}

// lockers remembers which owners of this client may hold locks on which
// file, so that closing a file that was never locked (nearly every
// close) costs no round trip to the lock table.
//
// Locking: mu guards keys.
type lockers struct {
	mu   sync.Mutex
	keys map[lockKey]struct{}
}

func (ls *lockers) add(k lockKey) {
	ls.mu.Lock()
	if ls.keys == nil {
		ls.keys = map[lockKey]struct{}{}
	}
	ls.keys[k] = struct{}{}
	ls.mu.Unlock()
}

// drop forgets k, and reports whether it was there.
func (ls *lockers) drop(k lockKey) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	_, ok := ls.keys[k]
	delete(ls.keys, k)
	return ok
}

func (fs *FS) metaLock(owner uint64, l Lock) meta.Lock {
	return meta.Lock{Owner: meta.LockOwner{Session: fs.cfg.Session, Owner: owner}, Flock: l.Flock,
		Type: meta.LockType(l.Type), Start: l.Start, End: l.End, PID: l.PID}
}

// SetLock applies request l of owner to the handle's file: takes a lock
// (LockRead, LockWrite), converts or splits the owner's (a POSIX request
// replaces what the owner holds in its range), or releases (LockUnlock).
// With wait it waits while another owner, on any client, holds a
// conflicting lock; cancelling ctx ends the wait (the gateway's
// interrupt). Errors: ErrLocked (a conflict, without wait), ErrInvalid
// (bad type or range), ErrNoLocks (the client's session ended),
// ErrBadHandle (a read lock on a handle not open for
// reading, a write lock on one not open for writing, for POSIX locks as
// fcntl requires), context.Canceled, ErrUnavailable.
func (h *Handle) SetLock(ctx context.Context, owner uint64, l Lock, wait bool) error {
	if l.Type > LockWrite {
		return fmt.Errorf("%w: lock type %d", ErrInvalid, l.Type)
	}
	if !l.Flock {
		switch acc := h.Flags & OAccMode; {
		case l.Type == LockRead && acc == os.O_WRONLY:
			return fmt.Errorf("%w: a read lock needs a handle open for reading", ErrBadHandle)
		case l.Type == LockWrite && acc == os.O_RDONLY:
			return fmt.Errorf("%w: a write lock needs a handle open for writing", ErrBadHandle)
		}
	}
	k := lockKey{lin: meta.LIN(h.LIN), owner: owner, flock: l.Flock}
	if l.Type != LockUnlock {
		h.fs.lockers.add(k)
		h.lockMu.Lock()
		if h.lockKeys == nil {
			h.lockKeys = map[lockKey]bool{}
		}
		h.lockKeys[k] = true
		h.lockMu.Unlock()
	}
	return classify(h.fs.m.SetLock(ctx, meta.LIN(h.LIN), h.fs.metaLock(owner, l), wait))
}

// TestLock returns a lock of another owner, on any client, that conflicts
// with request l of owner (F_GETLK), and false if l could be taken now.
// The PID of a holder on another client is 0 (see above). Errors:
// ErrInvalid, ErrUnavailable.
func (h *Handle) TestLock(ctx context.Context, owner uint64, l Lock) (Lock, bool, error) {
	c, found, err := h.fs.m.TestLock(ctx, meta.LIN(h.LIN), h.fs.metaLock(owner, l))
	if err != nil || !found {
		return Lock{}, false, classify(err)
	}
	out := Lock{Flock: c.Flock, Type: LockType(c.Type), Start: c.Start, End: c.End, PID: c.PID}
	if c.Owner.Session != h.fs.cfg.Session {
		out.PID = 0
	}
	return out, true, nil
}

// UnlockOwner releases every POSIX lock owner holds on the handle's file,
// taken through any handle: a process closed one of its descriptors of
// the file (POSIX drops all its locks on the file then). Without such
// locks it costs nothing. Errors: ErrUnavailable.
func (h *Handle) UnlockOwner(ctx context.Context, owner uint64) error {
	k := lockKey{lin: meta.LIN(h.LIN), owner: owner}
	h.lockMu.Lock()
	delete(h.lockKeys, k) // what release drops is the rest (OFD owners)
	h.lockMu.Unlock()
	if !h.fs.lockers.drop(k) {
		return nil
	}
	return classify(h.fs.m.UnlockOwner(context.WithoutCancel(ctx), k.lin, owner, false))
}

// releaseLocks drops the locks of the owners that locked through h and
// have not been unlocked by UnlockOwner: flock and OFD locks, whose owner
// is the open file description that h is.
func (fs *FS) releaseLocks(ctx context.Context, h *Handle) error {
	h.lockMu.Lock()
	keys := h.lockKeys
	h.lockKeys = nil
	h.lockMu.Unlock()
	var first error
	for k := range keys {
		fs.lockers.drop(k)
		if err := fs.m.UnlockOwner(context.WithoutCancel(ctx), k.lin, k.owner, k.flock); err != nil && first == nil {
			first = err
		}
	}
	return first
}
