package kvcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/runner"
)

// The follower: how the cache keeps up with the inner store (one watch
// stream from a loaded snapshot, applied in order), and Sync.

// Sync waits until the cache has applied every change committed (by
// anyone) before Sync was called, or until ctx ends. It is for tests and
// for callers that must see another client's acknowledged change (close-
// to-open across clients); it costs a read of the inner store plus the
// stream's delay, the read shared by concurrent Syncs (syncRounds). A
// Store that is not serving returns at once: its reads go to the inner
// store.
func (s *Store) Sync(ctx context.Context) error {
	target, err := s.syncs.revision(ctx, s.storeRevision)
	if err != nil {
		return err
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok, ch := s.w >= target || !s.servingLocked(), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		if err := s.inner.Progress(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-t.C: // ask for progress again
		}
	}
}

// storeRevision reads the inner store's revision with a linearizable read
// (one round trip: every change committed before it began is at or below
// it).
func (s *Store) storeRevision(ctx context.Context) (int64, error) {
	snap, err := s.inner.Backend(false).Begin(ctx, 0)
	if err != nil {
		return 0, err
	}
	if _, err := snap.Get(ctx, [][]byte{{0}}); err != nil {
		return 0, err
	}
	return snap.Revision(), nil
}

// syncRounds shares the reads of the store's revision among concurrent
// Syncs (many files opened at once, an NFS gateway's clients): a Sync may
// use any read that began after it was called, so those that arrive while
// a read is in flight wait for it and then share the next one, which the
// first of them makes. A burst of N Syncs costs two round trips of the
// store rather than N reads at once.
type syncRounds struct {
	mu       sync.Mutex
	flying   *syncRound // the read in flight
	boarding *syncRound // the next read, not begun: Syncs join it
}

// syncRound is one read of the store's revision and those waiting on it.
type syncRound struct {
	done chan struct{}
	rev  int64
	err  error
}

// revision returns a revision of the store read after the call began,
// reading it with read (on ctx) or sharing a concurrent caller's read.
func (r *syncRounds) revision(ctx context.Context, read func(context.Context) (int64, error)) (int64, error) {
	for {
		r.mu.Lock()
		rd := r.boarding
		first := rd == nil
		var ahead *syncRound
		if first {
			rd = &syncRound{done: make(chan struct{})}
			r.boarding, ahead = rd, r.flying
		}
		r.mu.Unlock()
		if first {
			if ahead != nil {
				<-ahead.done // never long: a read is bounded by the store's timeouts
			}
			r.mu.Lock()
			r.boarding, r.flying = nil, rd
			r.mu.Unlock()
			rd.rev, rd.err = read(ctx)
			r.mu.Lock()
			r.flying = nil
			r.mu.Unlock()
			close(rd.done)
			return rd.rev, rd.err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-rd.done:
		}
		if rd.err != nil && (errors.Is(rd.err, context.Canceled) || errors.Is(rd.err, context.DeadlineExceeded)) && ctx.Err() == nil {
			continue // the reader's context ended, not ours: read again
		}
		return rd.rev, rd.err
	}
}

// followWorker is the Store's "cache-follow" worker: one step follows the
// inner store from a fresh start until the stream breaks (a blocking
// step), then empties the cache; the runner backs off before the next
// start, except after a restart the Store asked for (overflow).
type followWorker Store

var (
	_ runner.Worker = (*followWorker)(nil)
	_ runner.Worker = (*progressWorker)(nil)
	_ runner.Worker = (*flushWorker)(nil)
)

func (f *followWorker) Step(ctx context.Context) (runner.State, error) {
	s := (*Store)(f)
	err := s.follow(ctx)
	s.mu.Lock()
	s.running = false
	s.entries.Clear(false)
	s.complete, s.empty = nil, nil
	s.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		return runner.Done, nil
	case errors.Is(err, context.Canceled): // a restart asked for (overflow) is quiet
		return runner.Busy, nil
	case err == nil:
		err = errors.New("the stream ended")
	}
	return runner.Busy, fmt.Errorf("kvcache: following the store; reads go to the store until it restarts: %w", err)
}

// progressWorker is the Store's "cache-progress" worker: while the cache
// follows, each step asks the stream for a progress report, so that a
// quiet store still tells the cache it is current (MaxStale).
type progressWorker Store

func (p *progressWorker) Step(ctx context.Context) (runner.State, error) {
	s := (*Store)(p)
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	if running {
		_ = s.inner.Progress(ctx) // a broken stream is the follower's to report
	}
	return runner.Idle, nil
}

// follow preloads, then applies the stream until it breaks.
func (s *Store) follow(ctx context.Context) error {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	snap, err := s.inner.Backend(false).Begin(fctx, 0)
	if err != nil {
		return err
	}
	var loaded []kv.Versioned
	var rev int64
	for _, r := range s.cfg.Preload {
		start := r.Start
		for {
			kvs, more, _, err := snap.Scan(fctx, start, r.End, 1000)
			if err != nil {
				return err
			}
			loaded = append(loaded, kvs...)
			if !more || len(kvs) == 0 {
				break
			}
			start = kv.After(kvs[len(kvs)-1].Key)
		}
	}
	if rev = snap.Revision(); rev == 0 {
		if _, err := snap.Get(fctx, [][]byte{{0}}); err != nil {
			return err
		}
		rev = snap.Revision()
	}
	s.mu.Lock()
	s.entries.Clear(false)
	for _, v := range loaded {
		s.entries.ReplaceOrInsert(&entry{key: bytes.Clone(v.Key), val: bytes.Clone(v.Value), present: true, modRev: v.ModRev, asOf: rev})
	}
	s.complete = append([]kv.Range(nil), s.cfg.Preload...)
	s.empty = nil
	s.w, s.heard, s.running = rev, time.Now(), true
	s.epoch++
	s.restart = cancel
	close(s.changed) // the cache serves now: wakes Ready
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return s.inner.Follow(fctx, rev, s.apply)
}

// apply applies one delivery of the stream.
func (s *Store) apply(c kv.Changes) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return
	}
	for _, ch := range c.Changes {
		s.noteLocked(ch.Key, ch.Rev)
		s.noteTouchedLocked(ch.Key)
		s.setLocked(ch.Key, ch.Value, !ch.Delete, ch.Rev, ch.Rev)
	}
	s.w = max(s.w, c.Rev)
	s.heard = time.Now()
	close(s.changed)
	s.changed = make(chan struct{})
	if s.entries.Len() > s.cfg.MaxKeys && s.restart != nil {
		s.restart() // start over empty
		s.restart = nil
	}
}

// noteLocked records a change of key at rev in the pending reads covering it.
func (s *Store) noteLocked(key []byte, rev int64) {
	for p := range s.pendings {
		if p.r.Contains(key) {
			p.changed = max(p.changed, rev)
		}
	}
}
