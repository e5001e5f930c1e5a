package meta

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// MemLocks is a LockStore in memory: the lock table of clients sharing
// one process (a Meta without Config.Locks, unit tests). Expire plays
// the part of a lease that runs out.
//
// Locking: mu guards everything; changed is closed and replaced at every
// change, waking the waiters.
type MemLocks struct {
	mu      sync.Mutex
	rev     int64
	recs    map[LIN]map[SessionID]memLockRec
	expired map[SessionID]bool
	changed chan struct{}
}

type memLockRec struct {
	value  []byte
	modRev int64
}

var _ LockStore = (*MemLocks)(nil)

// NewMemLocks returns an empty MemLocks.
func NewMemLocks() *MemLocks {
	return &MemLocks{rev: 1, recs: map[LIN]map[SessionID]memLockRec{}, expired: map[SessionID]bool{}, changed: make(chan struct{})}
}

// Load implements LockStore.
func (s *MemLocks) Load(ctx context.Context, lin LIN) ([]LockRecord, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LockRecord
	for ses, r := range s.recs[lin] {
		out = append(out, LockRecord{Session: ses, Value: r.value, ModRev: r.modRev})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Session < out[j].Session })
	return out, s.rev, ctx.Err()
}

// Commit implements LockStore.
func (s *MemLocks) Commit(ctx context.Context, lin LIN, session SessionID, modRev, rev int64, value []byte) (bool, int64, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expired[session] {
		return false, 0, fmt.Errorf("%w: session %x has expired", ErrLocksLost, uint64(session))
	}
	recs := s.recs[lin]
	for _, r := range recs {
		if r.modRev > rev {
			return false, 0, nil
		}
	}
	if recs[session].modRev != modRev {
		return false, 0, nil
	}
	s.rev++
	if value == nil {
		delete(recs, session)
		if len(recs) == 0 {
			delete(s.recs, lin)
		}
	} else {
		if recs == nil {
			recs = map[SessionID]memLockRec{}
			s.recs[lin] = recs
		}
		recs[session] = memLockRec{value: append([]byte(nil), value...), modRev: s.rev}
	}
	s.changedLocked()
	return true, s.rev, nil
}

// changedLocked wakes the waiters; the caller holds mu.
func (s *MemLocks) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Wait implements LockStore. It wakes at any change of any LIN (spurious
// wake-ups are allowed).
func (s *MemLocks) Wait(ctx context.Context, lin LIN, rev int64) error {
	s.mu.Lock()
	if s.rev > rev {
		s.mu.Unlock()
		return nil
	}
	ch := s.changed
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Expire drops every record of session and refuses its later commits, as
// etcd does when a session's lease expires.
func (s *MemLocks) Expire(session SessionID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expired[session] = true
	for lin, recs := range s.recs {
		if _, ok := recs[session]; ok {
			delete(recs, session)
			if len(recs) == 0 {
				delete(s.recs, lin)
			}
		}
	}
	s.rev++
	s.changedLocked()
}

// Len returns the number of records held (for tests that check that
// released locks leave nothing behind).
func (s *MemLocks) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, recs := range s.recs {
		n += len(recs)
	}
	return n
}
