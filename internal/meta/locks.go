package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weftfs/weft/internal/failpoint"
)

// File locks: flock(2) and POSIX byte-range locks (fcntl F_SETLK,
// F_SETLKW, F_GETLK, and OFD locks), shared by every client of the
// cluster.
//
// Records. A client keeps its locks on a file in one record per (LIN,
// session), in a LockStore (etcd under "/weft/locks/v1/", see package
// namespace), written under the session's lease: a client that dies
// loses its records when its lease expires, and with them its locks.
// Keeping a session's locks on a LIN in one record makes every change
// one write (a POSIX unlock of the middle of a range splits one lock in
// two), and keeps the other sessions' records out of the write.
//
// Grants. A change reads every record of the LIN at one revision, checks
// the request against the other owners' locks there, and writes the
// session's new record in one transaction that commits only if no record
// of the LIN was created or changed after that revision and the
// session's own record is the one read (LockStore.Commit). Two clients
// that both read a free range therefore cannot both take it: the second
// commit fails and its caller reads again. A record deleted meanwhile (an
// unlock, a lease that expired) only frees ranges, so it need not fail
// the commit. A blocking request (wait) that conflicts waits for any
// change of the LIN's records after the revision it read
// (LockStore.Wait: an etcd watch), then tries again: no polling.
//
// Owners. A lock belongs to a LockOwner: the session and the gateway's
// owner id (for FUSE the kernel's lock owner: the process's file table
// for POSIX locks, the open file description for flock and OFD locks).
// flock and POSIX locks are separate, as on Linux: they never conflict
// with each other. The PID of a lock is the process that took it, on its
// client's machine; F_GETLK reports it as it is, whichever client holds
// the lock (see vfs).
//
// Deadlocks between waiters are not detected (EDEADLK is never
// returned): a waiter waits until the lock is free or it is interrupted.

// MaxLockOffset is the largest byte offset a lock covers: a lock "to end
// of file" ends here.
const MaxLockOffset = 1<<63 - 1

// LockType is what a lock allows others: a read lock is shared, a write
// lock exclusive; LockUnlock in a request releases.
type LockType uint8

// Lock types.
const (
	LockUnlock LockType = iota
	LockRead
	LockWrite
)

func (t LockType) String() string {
	switch t {
	case LockUnlock:
		return "unlock"
	case LockRead:
		return "read"
	case LockWrite:
		return "write"
	}
	return fmt.Sprintf("locktype(%d)", uint8(t))
}

// LockOwner identifies the holder of a lock cluster-wide: the client's
// session and the gateway's owner id within it.
type LockOwner struct {
	Session SessionID
	Owner   uint64
}

// Lock is one lock, or a request for one. Start and End are inclusive
// byte offsets (End MaxLockOffset: to the end of the file, however it
// grows); a flock lock covers the whole file.
type Lock struct {
	Owner LockOwner
	// Flock marks a flock(2) lock (whole file, per open file
	// description); otherwise a POSIX record lock.
	Flock      bool
	Type       LockType
	Start, End uint64
	// PID is the process that took the lock, on its client's machine.
	PID uint32
}

func (l Lock) String() string {
	kind := "posix"
	if l.Flock {
		kind = "flock"
	}
	return fmt.Sprintf("%s %s [%d, %d] owner %x/%x pid %d", kind, l.Type, l.Start, l.End, uint64(l.Owner.Session), l.Owner.Owner, l.PID)
}

// conflicts reports whether a and b cannot both be held: different owners
// of the same kind, overlapping ranges, and one of them a write lock.
func (a Lock) conflicts(b Lock) bool {
	return a.Flock == b.Flock && a.Owner != b.Owner && a.Start <= b.End && b.Start <= a.End &&
		(a.Type == LockWrite || b.Type == LockWrite)
}

// LockRecord is one session's record of its locks on a LIN, as a
// LockStore holds it.
type LockRecord struct {
	Session SessionID
	Value   []byte // encodeLocks
	// ModRev is the store revision of the record's last change.
	ModRev int64
}

// LockStore holds the lock records: what the lock table needs of etcd.
// Implementations: package namespace (etcd, records under the sessions'
// leases) and MemLocks.
type LockStore interface {
	// Load returns the records of lin, and the store revision they were
	// read at.
	Load(ctx context.Context, lin LIN) (recs []LockRecord, rev int64, err error)
	// Commit sets session's record of lin to value (nil: deletes it),
	// under session's lease, if no record of lin was created or changed
	// after revision rev and session's record still has revision modRev
	// (0: absent). It reports whether it did, and the revision of the
	// commit; false means something changed: load again. Errors: the
	// store's (ErrUnavailable: the outcome is unknown), and an error
	// wrapping ErrLocksLost when the session's lease is gone.
	Commit(ctx context.Context, lin LIN, session SessionID, modRev, rev int64, value []byte) (ok bool, commitRev int64, err error)
	// Wait returns once a record of lin has changed after revision rev
	// (at once if one has), or when ctx is done (ctx.Err()). A nil
	// return may be spurious (the store could not tell): the caller
	// loads again either way.
	Wait(ctx context.Context, lin LIN, rev int64) error
}

// Errors of the lock table.
var (
	// ErrLocked: another owner holds a conflicting lock (EAGAIN).
	ErrLocked = errors.New("meta: file is locked")
	// ErrLocksLost: the client's session (its lease) has ended, and its
	// locks with it: the client was cut off from the store for longer
	// than its session's TTL. It takes no lock again (ENOLCK).
	ErrLocksLost = errors.New("meta: the client's session has ended, and its locks with it")
)

// FailpointLockGrant is the failpoint at the durability step of a lock
// change: just before its record is committed. An error action fails
// the change (nothing is written), crash kills the client with the
// change not made.
const FailpointLockGrant = "meta/before-lock-commit"

// SetLock applies request l to lin: takes or changes the lock of l.Owner
// (Type LockRead or LockWrite) or releases its range (LockUnlock). A
// POSIX request replaces what the owner held in its range, splitting and
// merging its locks as fcntl does (an upgrade, a downgrade, a partial
// unlock); a flock request replaces the owner's flock lock (conversion).
// A conflicting lock of another owner fails the request with ErrLocked,
// or with wait makes it wait until the conflict is gone; an unlock never
// waits. l.Owner.Session must be this client's session (Config.Session).
// Errors: ErrLocked, ErrInvalid (a bad type or range, another session),
// ErrLocksLost, ctx.Err() (a wait cut short), FailpointLockGrant's, the
// store's.
func (m *Meta) SetLock(ctx context.Context, lin LIN, l Lock, wait bool) error {
	if err := m.checkLock(l); err != nil {
		return err
	}
	if l.Flock {
		l.Start, l.End = 0, MaxLockOffset
	}
	// The first attempt may start from the records as this client last
	// committed them (lockViews): a commit from them is safe, as it
	// fails if anything but a delete happened since; a conflict or a
	// no-op seen there is decided again on records just read.
	view, cached := m.lockViews.get(lin)
	waited := false
	defer func() {
		if waited {
			m.lockCounters.waiting.Add(-1)
		}
	}()
	for {
		if !cached {
			recs, rev, err := m.locks.Load(ctx, lin)
			if err != nil {
				return storeErr(err)
			}
			view = lockView{recs: recs, rev: rev}
		}
		mine, modRev, err := sessionLocks(view.recs, m.session)
		if err != nil {
			return err
		}
		if l.Type != LockUnlock {
			if c, found, err := findConflict(view.recs, l); err != nil {
				return err
			} else if found {
				switch {
				case cached:
					cached = false
					continue
				case !wait:
					m.lockCounters.refused.Add(1)
					return fmt.Errorf("%w: LIN %d: %s conflicts with %s", ErrLocked, lin, l, c)
				}
				if !waited {
					waited = true
					m.lockCounters.waited.Add(1)
					m.lockCounters.waiting.Add(1)
				}
				if err := m.locks.Wait(ctx, lin, view.rev); err != nil {
					if ctx.Err() != nil {
						m.lockCounters.cut.Add(1)
					}
					return err
				}
				continue
			}
		}
		next := applyLock(mine, l)
		if slices.Equal(next, mine) {
			if cached {
				cached = false
				continue
			}
			if l.Type != LockUnlock {
				m.lockCounters.granted.Add(1) // held already
			}
			return nil
		}
		var value []byte
		if len(next) > 0 {
			value = encodeLocks(next)
		}
		if err := failpoint.Eval(FailpointLockGrant); err != nil {
			return fmt.Errorf("meta: lock on LIN %d: %w", lin, err)
		}
		ok, rev, err := m.locks.Commit(ctx, lin, m.session, modRev, view.rev, value)
		if err != nil {
			m.lockViews.drop(lin)
			return storeErr(err)
		}
		if ok {
			m.lockViews.put(lin, view.after(m.session, value, rev))
			if l.Type == LockUnlock {
				m.lockCounters.unlocks.Add(1)
			} else {
				m.lockCounters.granted.Add(1)
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			if waited {
				m.lockCounters.cut.Add(1)
			}
			return err
		}
		cached = false
	}
}

// TestLock returns the first lock that conflicts with request l on lin
// (F_GETLK), and false if none does (l could be taken now). Errors:
// ErrInvalid, the store's.
func (m *Meta) TestLock(ctx context.Context, lin LIN, l Lock) (Lock, bool, error) {
	if err := m.checkLock(l); err != nil {
		return Lock{}, false, err
	}
	if l.Type == LockUnlock {
		return Lock{}, false, fmt.Errorf("%w: testing an unlock", ErrInvalid)
	}
	if l.Flock {
		l.Start, l.End = 0, MaxLockOffset
	}
	recs, _, err := m.locks.Load(ctx, lin)
	if err != nil {
		return Lock{}, false, storeErr(err)
	}
	return findConflict(recs, l)
}

// Locks returns every lock held on lin, by any client, in record order.
// Errors: ErrCorrupt, the store's.
func (m *Meta) Locks(ctx context.Context, lin LIN) ([]Lock, error) {
	recs, _, err := m.locks.Load(ctx, lin)
	if err != nil {
		return nil, storeErr(err)
	}
	var out []Lock
	for _, r := range recs {
		ls, err := decodeLocks(r.Session, r.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, ls...)
	}
	return out, nil
}

// UnlockOwner releases every lock of this session's owner on lin of one
// kind (flock, or POSIX): what closing a file does (FUSE's FLUSH for the
// POSIX locks of a process, RELEASE for a description's flock). Releasing
// nothing is a no-op that writes nothing. Errors: those of SetLock but
// ErrLocked.
func (m *Meta) UnlockOwner(ctx context.Context, lin LIN, owner uint64, flock bool) error {
	return m.SetLock(ctx, lin, Lock{Owner: LockOwner{Session: m.session, Owner: owner}, Flock: flock,
		Type: LockUnlock, Start: 0, End: MaxLockOffset}, false)
}

func (m *Meta) checkLock(l Lock) error {
	switch {
	case l.Type > LockWrite:
		return fmt.Errorf("%w: lock type %d", ErrInvalid, l.Type)
	case l.Start > l.End || l.End > MaxLockOffset:
		return fmt.Errorf("%w: lock range [%d, %d]: the start must not pass the end, nor the end %d", ErrInvalid, l.Start, l.End, uint64(MaxLockOffset))
	case l.Owner.Session != m.session:
		return fmt.Errorf("%w: a lock of session %x requested through session %x", ErrInvalid, uint64(l.Owner.Session), uint64(m.session))
	}
	return nil
}

// sessionLocks returns session's locks in recs and its record's revision
// (0: none).
func sessionLocks(recs []LockRecord, session SessionID) ([]Lock, int64, error) {
	for _, r := range recs {
		if r.Session == session {
			ls, err := decodeLocks(session, r.Value)
			return ls, r.ModRev, err
		}
	}
	return nil, 0, nil
}

// findConflict returns the first lock in recs that conflicts with l.
func findConflict(recs []LockRecord, l Lock) (Lock, bool, error) {
	for _, r := range recs {
		ls, err := decodeLocks(r.Session, r.Value)
		if err != nil {
			return Lock{}, false, err
		}
		for _, h := range ls {
			if h.conflicts(l) {
				return h, true, nil
			}
		}
	}
	return Lock{}, false, nil
}

// applyLock returns one session's locks (held, in canonical order) after
// request l: l's owner's locks of l's kind lose l's range (a lock across
// its edge is cut, one around it split), then l is added (unless it is
// an unlock) and merged with the owner's locks of the same type that
// touch or overlap it. The result is in canonical order: by owner, kind,
// start.
func applyLock(held []Lock, l Lock) []Lock {
	out := make([]Lock, 0, len(held)+2)
	for _, h := range held {
		if h.Owner != l.Owner || h.Flock != l.Flock || h.End < l.Start || h.Start > l.End {
			out = append(out, h)
			continue
		}
		if h.Start < l.Start {
			left := h
			left.End = l.Start - 1
			out = append(out, left)
		}
		if h.End > l.End {
			right := h
			right.Start = l.End + 1
			out = append(out, right)
		}
	}
	if l.Type != LockUnlock {
		merged := l
		keep := out[:0]
		for _, h := range out {
			if h.Owner == l.Owner && h.Flock == l.Flock && h.Type == l.Type &&
				(h.End == MaxLockOffset || h.End+1 >= merged.Start) && (merged.End == MaxLockOffset || merged.End+1 >= h.Start) {
				merged.Start = min(merged.Start, h.Start)
				merged.End = max(merged.End, h.End)
				continue
			}
			keep = append(keep, h)
		}
		out = append(keep, merged)
	}
	slices.SortFunc(out, func(a, b Lock) int {
		switch {
		case a.Owner.Owner != b.Owner.Owner:
			return cmpU64(a.Owner.Owner, b.Owner.Owner)
		case a.Flock != b.Flock:
			if a.Flock {
				return 1
			}
			return -1
		}
		return cmpU64(a.Start, b.Start)
	})
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// LockStats counts a client's lock requests (SetLock), for its metrics.
type LockStats struct {
	// Granted, Refused and Cut are requests for a lock that got it, were
	// refused (ErrLocked), and ended waiting (ctx done: an interrupt).
	Granted, Refused, Cut int64
	// Unlocks are unlock requests that released something.
	Unlocks int64
	// Waited are requests that waited; Waiting those waiting now.
	Waited, Waiting int64
}

// lockCounters are LockStats' counters.
type lockCounters struct {
	granted, refused, cut, unlocks, waited, waiting atomic.Int64
}

// LockStats returns the counts of the client's lock requests so far.
func (m *Meta) LockStats() LockStats {
	c := &m.lockCounters
	return LockStats{Granted: c.granted.Load(), Refused: c.refused.Load(), Cut: c.cut.Load(),
		Unlocks: c.unlocks.Load(), Waited: c.waited.Load(), Waiting: c.waiting.Load()}
}

// lockView is a LIN's lock records as of a revision.
type lockView struct {
	recs []LockRecord
	rev  int64
}

// after returns the view after session's record became value (nil:
// deleted) at revision rev, by a commit that found nothing else changed.
func (v lockView) after(session SessionID, value []byte, rev int64) lockView {
	out := lockView{rev: rev, recs: make([]LockRecord, 0, len(v.recs)+1)}
	for _, r := range v.recs {
		if r.Session != session {
			out.recs = append(out.recs, r)
		}
	}
	if value != nil {
		out.recs = append(out.recs, LockRecord{Session: session, Value: value, ModRev: rev})
	}
	return out
}

// maxLockViews bounds the LINs whose records a client remembers.
const maxLockViews = 1024

// lockViews are the lock records of the LINs this client last changed
// locks on, as its commits left them: the next change of the same LIN
// commits from them without reading first (one round trip instead of
// two), which is safe because the commit compares the LIN's records
// against their revision.
//
// Locking: mu guards views.
type lockViews struct {
	mu    sync.Mutex
	views map[LIN]lockView
}

func (lv *lockViews) get(lin LIN) (lockView, bool) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	v, ok := lv.views[lin]
	return v, ok
}

// put keeps v unless a newer view of lin is there (commits of concurrent
// calls may return out of order).
func (lv *lockViews) put(lin LIN, v lockView) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if lv.views == nil {
		lv.views = map[LIN]lockView{}
	}
	if old, ok := lv.views[lin]; ok && old.rev >= v.rev {
		return
	}
	if len(lv.views) >= maxLockViews {
		for k := range lv.views { // drop one, any
			delete(lv.views, k)
			break
		}
	}
	lv.views[lin] = v
}

func (lv *lockViews) drop(lin LIN) {
	lv.mu.Lock()
	delete(lv.views, lin)
	lv.mu.Unlock()
}
