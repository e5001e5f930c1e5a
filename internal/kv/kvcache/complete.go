package kvcache

import (
	"bytes"
	"context"

	"github.com/weftfs/weft/internal/kv"
)

// Completeness: ranges the cache knows whole (preloaded, loaded on
// demand, or known empty), so that an absent key there is known absent.

// KnownEmpty tells the cache that no key in ranges existed before epoch
// began (the caller read epoch with Epoch before it took the ranges for
// itself, e.g. by allocating fresh inode numbers): every key of them
// written since was delivered by the stream, so the cache may answer for
// the whole ranges. It is ignored if the stream restarted since epoch.
func (s *Store) KnownEmpty(epoch uint64, ranges ...kv.Range) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch == 0 || epoch != s.epoch || !s.running {
		return
	}
	for _, r := range ranges {
		s.addEmptyLocked(r)
	}
}

// maxEmptyRanges bounds the ranges KnownEmpty keeps. They are kept apart
// from the complete ranges of Complete, which a client with many
// delegated directories adds one by one (an untar: one per directory)
// and which would otherwise push out, within a few hundred directories,
// the ranges of the LINs it has just reserved — and with them the
// knowledge that lets its creates and their first stripe commits be
// decided on the cache. A range that continues one already kept (the next
// batch of LINs, of each record type) extends it.
const maxEmptyRanges = 64

func (s *Store) addEmptyLocked(r kv.Range) {
	for i, e := range s.empty {
		if bytes.Equal(e.End, r.Start) {
			s.empty[i].End = bytes.Clone(r.End)
			return
		}
	}
	if len(s.empty) >= maxEmptyRanges {
		s.empty = s.empty[1:]
	}
	s.empty = append(s.empty, kv.Range{Start: bytes.Clone(r.Start), End: bytes.Clone(r.End)})
}

// addCompleteLocked adds r to the complete ranges, forgetting the oldest
// one (not preloaded) past a bound on their linear scans: forgetting is
// safe.
func (s *Store) addCompleteLocked(r kv.Range) {
	const maxRanges = 256
	if len(s.complete) >= maxRanges {
		n := len(s.cfg.Preload)
		s.complete = append(s.complete[:n], s.complete[n+1:]...)
	}
	s.complete = append(s.complete, kv.Range{Start: bytes.Clone(r.Start), End: bytes.Clone(r.End)})
}

// completeAttempts bounds the reads of one Complete that changes in the
// range going by make unusable.
const completeAttempts = 4

// Complete reads range r whole from the inner store and from then on
// answers for all of it, as for KnownEmpty: for a caller that knows the
// range will not change behind its back for a while (a delegated
// directory), so that it can decide there on the cache alone. A change in
// r that goes by during the read (the caller's own, made before its
// delegation let it defer them) makes the read unusable: it reads again,
// up to completeAttempts reads in all. It reports false, and changes
// nothing, if r holds more than max keys, changes kept going by, or the
// stream restarted.
func (s *Store) Complete(ctx context.Context, r kv.Range, max int) (bool, error) {
	for range completeAttempts {
		s.mu.Lock()
		covered := s.servingLocked() && s.coveredLocked(r.Start, r.End)
		s.mu.Unlock()
		if covered {
			return true, nil
		}
		done, raced, err := s.readWhole(ctx, r, max)
		if done || !raced || err != nil {
			return done, err
		}
	}
	return false, nil
}

// readWhole is one read of Complete; raced reports that it was not used
// because a change in r went by meanwhile.
func (s *Store) readWhole(ctx context.Context, r kv.Range, max int) (done, raced bool, err error) {
	epoch := s.Epoch()
	if epoch == 0 {
		return false, false, nil
	}
	p := s.register([]kv.Range{r})[0]
	release := func() {
		s.mu.Lock()
		delete(s.pendings, p)
		s.mu.Unlock()
	}
	snap, err := s.inner.Backend(false).Begin(ctx, 0)
	if err != nil {
		release()
		return false, false, err
	}
	var all []kv.Versioned
	for start := r.Start; ; {
		kvs, more, _, err := snap.Scan(ctx, start, r.End, 1000)
		if err != nil {
			release()
			return false, false, err
		}
		all = append(all, kvs...)
		if len(all) > max {
			release()
			return false, false, nil
		}
		if !more || len(kvs) == 0 {
			break
		}
		start = kv.After(kvs[len(kvs)-1].Key)
	}
	rev := snap.Revision()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pendings, p)
	if rev == 0 || epoch != s.epoch {
		return false, false, nil
	}
	if !usableLocked(p, rev, s.running) {
		return false, s.running, nil
	}
	for _, v := range all {
		s.setLocked(v.Key, v.Value, true, v.ModRev, rev)
	}
	// Keys of r the cache holds as absent, or present at an older
	// revision than rev and gone at rev, are absent.
	var gone []*entry
	s.entries.AscendRange(&entry{key: r.Start}, &entry{key: r.End}, func(e *entry) bool {
		if e.asOf < rev {
			gone = append(gone, e)
		}
		return true
	})
	for _, e := range gone {
		s.entries.Delete(e)
	}
	s.addCompleteLocked(r)
	return true, false, nil
}

func (s *Store) inCompleteLocked(key []byte) bool {
	return presumed(s.complete, key) || presumed(s.empty, key)
}

func (s *Store) coveredLocked(start, end []byte) bool {
	return covered(s.complete, start, end) || covered(s.empty, start, end)
}

// covered reports whether one of rs covers [start, end).
func covered(rs []kv.Range, start, end []byte) bool {
	for _, r := range rs {
		if r.Covers(start, end) {
			return true
		}
	}
	return false
}

func presumed(rs []kv.Range, key []byte) bool {
	for _, r := range rs {
		if r.Contains(key) {
			return true
		}
	}
	return false
}
