package kvcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/btree"
	"github.com/weftfs/weft/internal/failpoint"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/runner"
)

// Write-back: Defer decides a transaction on what the cache knows, makes
// its writes visible to this Store's Views at once (the overlay), and
// commits it later, in order, many transactions to one commit (group
// commit). It is for callers that know the keys their decision rests on
// cannot be changed by anyone else meanwhile (meta's directory
// delegations); the commit still validates every read, and a transaction
// that no longer holds is dropped and reported by Flush.

// Defaults of the write-back.
const (
	// MaxDeferred bounds the transactions deferred and not yet committed;
	// Defer waits while it is reached.
	MaxDeferred = 4096
	// maxBatch bounds the transactions replayed in one commit, and so does
	// a quarter of the store's MaxOps; a batch still too large is split.
	maxBatch = 128
)

// errNotLocal aborts a local run that needs a key the cache does not know.
var errNotLocal = errors.New("kvcache: not known locally")

// deferred is one transaction waiting for its commit.
type deferred struct {
	seq uint64
	fn  func(kv.Tx) error
}

// ovEntry is the newest deferred write of a key and the transaction that
// wrote it.
type ovEntry struct {
	w   kv.Write
	seq uint64
}

// Defer runs fn once on what the cache knows (keys it holds, complete
// ranges, and earlier deferred writes) without any round trip, and if fn
// succeeds with writes, queues it for commit and reports true: fn's
// writes are then visible to this Store's Views (not to other clients)
// until the commit replaces them. fn runs again at the commit, in one
// Update with the transactions deferred around it, on current data; it
// must make the same decisions there, which the caller guarantees by
// holding what they rest on (nothing here enforces it). If a replay fails
// or no longer commits, that transaction alone is dropped: its writes
// vanish, and the next Flush returns its error.
//
// Defer reports false, and does nothing, when fn needs a key the cache
// does not know, fails, writes nothing, or the cache is not serving: the
// caller then runs the transaction with Update. fn must have no side
// effects beyond tx.
func (s *Store) Defer(ctx context.Context, fn func(kv.Tx) error) (bool, error) {
	s.deferMu.Lock()
	defer s.deferMu.Unlock()
	for {
		s.mu.Lock()
		n, ch, serving, closed := len(s.queue), s.settledCh, s.servingLocked(), s.wbClosed
		s.mu.Unlock()
		if closed || !serving {
			return false, nil
		}
		if n < MaxDeferred {
			break
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-ch:
		}
	}
	t := kv.NewTxn(ctx, &localSnapshot{s: s}, false)
	if err := fn(t); err != nil || !t.HasWrites() {
		return false, nil
	}
	writes := t.Writes()
	s.mu.Lock()
	if !s.servingLocked() {
		// The stream broke during the run: what it read may be gone.
		s.mu.Unlock()
		return false, nil
	}
	s.seq++
	seq := s.seq
	for _, w := range writes {
		s.overlay.ReplaceOrInsert(&ovEntry{w: w, seq: seq})
	}
	s.queue = append(s.queue, &deferred{seq: seq, fn: fn})
	full := len(s.queue) >= s.batchLimit()
	s.deferredN.Add(1)
	s.mu.Unlock()
	s.flushW.Wake()
	if full {
		s.hurry()
	}
	return true, nil
}

// Flush waits until every transaction deferred before the call is
// committed or dropped, and returns the errors of the transactions
// dropped since the previous Flush (each reported once).
func (s *Store) Flush(ctx context.Context) error {
	s.mu.Lock()
	target := s.seq
	s.flushTarget = max(s.flushTarget, target)
	s.mu.Unlock()
	s.hurry()
	for {
		s.mu.Lock()
		done, ch := s.settled >= target, s.settledCh
		var err error
		if done {
			err = errors.Join(s.dropped...)
			s.dropped = nil
		}
		s.mu.Unlock()
		if done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Settle waits until at most n deferred transactions wait for their
// commit (queued or in flight), hurrying the flusher while more do. It
// bounds how much a caller that does not wait for its own commit (Flush)
// may have acknowledged and not committed; it reports no dropped
// transaction (Flush does).
func (s *Store) Settle(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		waiting, ch := len(s.queue)+s.inFlight, s.settledCh
		s.mu.Unlock()
		if waiting <= n {
			return nil
		}
		s.hurry()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Deferred returns how many deferred transactions wait for their commit.
func (s *Store) Deferred() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) + s.inFlight
}

// Changed returns a channel closed at the next delivery of the follow
// stream (a change or a progress report), for callers that watch keys in
// the cache.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// CatchUp waits until the follow stream has applied this Store's newest
// commit, so that every change committed by others before it is in the
// cache too.
func (s *Store) CatchUp(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok, ch := s.w >= s.lastCommit || !s.servingLocked(), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		case <-t.C:
			if err := s.inner.Progress(ctx); err != nil {
				return err
			}
		}
	}
}

// GroupDelay is how long the flusher lets deferred transactions gather
// before it commits them, unless someone waits for the commit (Flush) or
// a batch is full: fewer, larger commits leave more of the machine to the
// operations themselves.
const GroupDelay = 5 * time.Millisecond

// flushWorker is the Store's "cache-flush" worker: one step commits the
// oldest batch of deferred transactions. Each batch waits GroupDelay from
// when the step turns to it (within the step), so that under a steady
// stream of operations every commit carries GroupDelay's worth of them
// (not just those that arrived during the previous commit); a Flush
// waiting, or a full batch, skips the wait. With nothing queued it rests
// until Defer or Flush wakes it.
type flushWorker Store

func (f *flushWorker) Step(ctx context.Context) (runner.State, error) {
	s := (*Store)(f)
	queued, hurried := s.flushState()
	if queued == 0 {
		select { // a hurry with nothing to commit is spent
		case <-s.wbUrgent:
		default:
		}
		return runner.Idle, nil
	}
	if !hurried {
		t := time.NewTimer(GroupDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return runner.Idle, ctx.Err()
		case <-s.wbUrgent:
		case <-t.C:
		}
		t.Stop()
	}
	s.commitNext(ctx)
	return runner.Busy, nil
}

// flushState returns how many deferred transactions are queued, and
// whether the next batch must go at once: a Flush waits for one of them,
// or a whole batch is queued.
func (s *Store) flushState() (queued int, hurried bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	queued = len(s.queue)
	return queued, queued >= s.batchLimit() || (queued > 0 && s.flushTarget >= s.queue[0].seq)
}

// batchLimit is the most deferred transactions committed together.
func (s *Store) batchLimit() int {
	limit := maxBatch
	if ops := s.cfg.Options.Limits.MaxOps; ops > 0 {
		limit = max(1, min(limit, ops/4)) // a create writes and compares a few keys
	}
	return limit
}

// hurry makes the flusher commit now.
func (s *Store) hurry() {
	select {
	case s.wbUrgent <- struct{}{}:
	default:
	}
	s.flushW.Wake()
}

// commitNext commits the oldest batch of deferred transactions; it
// reports false when there was none.
func (s *Store) commitNext(ctx context.Context) bool {
	s.mu.Lock()
	n := min(len(s.queue), s.batchLimit())
	batch := append([]*deferred(nil), s.queue[:n]...)
	s.queue = s.queue[n:]
	s.inFlight = n
	s.mu.Unlock()
	if n == 0 {
		return false
	}
	s.commitBatch(ctx, batch)
	// Failpoint kvcache/after-commit: the batch is committed (or its
	// failed transactions dropped) but still in flight here: a crash
	// leaves it in etcd, acknowledged to nobody that waits in Flush.
	// Only its crash and panic actions mean something; an error is
	// ignored.
	_ = failpoint.Eval("kvcache/after-commit")
	last := batch[n-1].seq
	s.mu.Lock()
	s.inFlight = 0
	s.settled = last
	var done []*ovEntry
	s.overlay.Ascend(func(e *ovEntry) bool {
		if e.seq <= last {
			done = append(done, e)
		}
		return true
	})
	for _, e := range done {
		s.overlay.Delete(e)
	}
	close(s.settledCh)
	s.settledCh = make(chan struct{})
	s.mu.Unlock()
	return true
}

// SetBeforeCommit sets fn to run before each commit of deferred
// transactions, once the batch is chosen: what the transactions rest on
// outside the store (data their writes name) must be durable when fn
// returns, for everything done before the batch's transactions were
// deferred. If fn fails, the batch is not committed: its transactions are
// dropped with fn's error, which the next Flush returns. nil removes it.
func (s *Store) SetBeforeCommit(fn func(context.Context) error) {
	s.mu.Lock()
	s.beforeCommit = fn
	s.mu.Unlock()
}

// commitBatch commits batch in one transaction, dropping the transactions
// that fail on replay and splitting it when the store's limits demand.
func (s *Store) commitBatch(ctx context.Context, batch []*deferred) {
	s.mu.Lock()
	before := s.beforeCommit
	s.mu.Unlock()
	if before != nil {
		if err := before(ctx); err != nil {
			for range batch {
				s.drop(fmt.Errorf("kvcache: a deferred transaction was not committed: what it names could not be made durable: %w", err))
			}
			return
		}
	}
	backoff := 50 * time.Millisecond
	for len(batch) > 0 {
		failed := -1
		// Failpoint kvcache/before-commit: the batch is out of the queue
		// and not committed; a crash loses it whole (creates and unlinks
		// acknowledged, not yet made durable by an fsync). Its error is a
		// commit that failed without committing: retried, as unavailable.
		err := failpoint.Eval("kvcache/before-commit")
		if err == nil {
			err = kv.Run(ctx, backend{s: s}, s.cfg.Options, false, func(tx kv.Tx) error {
				failed = -1
				for i, d := range batch {
					if err := d.fn(tx); err != nil {
						failed = i
						return err
					}
				}
				return nil
			})
		}
		switch {
		case err == nil:
			s.committedN.Add(int64(len(batch)))
			return
		case errors.Is(err, kv.ErrTooLarge) && len(batch) > 1:
			s.commitBatch(ctx, batch[:len(batch)/2])
			s.commitBatch(ctx, batch[len(batch)/2:])
			return
		case (failed >= 0 && !kv.Retryable(err)) || errors.Is(err, kv.ErrTooLarge):
			if failed < 0 {
				failed = 0
			}
			s.drop(fmt.Errorf("kvcache: a deferred transaction failed at its commit and was dropped: %w", err))
			batch = append(batch[:failed:failed], batch[failed+1:]...)
		case ctx.Err() != nil:
			for range batch {
				s.drop(fmt.Errorf("kvcache: a deferred transaction was not committed before the store closed: %w", ctx.Err()))
			}
			return
		default:
			// Unavailable or endless conflicts: keep trying, in order.
			// (An unavailable commit may have been applied; its replay
			// then fails and is dropped, with its error reported.)
			s.cfg.Log.Warn("kvcache: committing deferred transactions; retrying", "transactions", len(batch), "err", err, "retry", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
		}
	}
}

func (s *Store) drop(err error) {
	s.cfg.Log.Error("kvcache: deferred write lost", "err", err)
	s.mu.Lock()
	s.dropped = append(s.dropped, err)
	s.mu.Unlock()
	s.droppedN.Add(1)
}

// overlayLocked returns the deferred writes of keys in [start, end).
func (s *Store) overlayLocked(start, end []byte) []kv.Write {
	return overlayIn(s.overlay, start, end)
}

// overlayIn returns the writes of ov to keys in [start, end).
func overlayIn(ov *btree.BTreeG[*ovEntry], start, end []byte) []kv.Write {
	if ov == nil || ov.Len() == 0 {
		return nil
	}
	var out []kv.Write
	visit := func(e *ovEntry) bool { out = append(out, e.w); return true }
	if end == nil {
		ov.AscendGreaterOrEqual(&ovEntry{w: kv.Write{Key: start}}, visit)
	} else {
		ov.AscendRange(&ovEntry{w: kv.Write{Key: start}}, &ovEntry{w: kv.Write{Key: end}}, visit)
	}
	return out
}

// overlaid is the Versioned a deferred write shows: present writes carry
// a revision above any real one, so that nobody mistakes them for absent.
func overlaid(w kv.Write) kv.Versioned {
	if w.Delete {
		return kv.Versioned{Key: w.Key}
	}
	v := bytes.Clone(w.Value)
	if v == nil {
		v = []byte{}
	}
	return kv.Versioned{Key: w.Key, Value: v, ModRev: overlayRev}
}

const overlayRev = 1 << 62

// mergeOverlay merges deferred writes ov (sorted, inside the scanned
// range) into a scanned page: page holds the range's keys up to its last
// one when more is set, all of them otherwise; the result is cut to limit.
func mergeOverlay(page []kv.Versioned, more bool, ov []kv.Write, limit int) ([]kv.Versioned, bool) {
	var bound []byte // writes at or past bound belong to a later page
	if more && len(page) > 0 {
		bound = kv.After(page[len(page)-1].Key)
	}
	out := make([]kv.Versioned, 0, len(page)+len(ov))
	i, j := 0, 0
	for i < len(page) || j < len(ov) {
		if j < len(ov) && bound != nil && bytes.Compare(ov[j].Key, bound) >= 0 {
			ov = ov[:j]
			continue
		}
		switch {
		case j >= len(ov) || (i < len(page) && bytes.Compare(page[i].Key, ov[j].Key) < 0):
			out = append(out, page[i])
			i++
		case i >= len(page) || bytes.Compare(ov[j].Key, page[i].Key) < 0:
			if !ov[j].Delete {
				out = append(out, overlaid(ov[j]))
			}
			j++
		default: // the deferred write wins
			if !ov[j].Delete {
				out = append(out, overlaid(ov[j]))
			}
			i++
			j++
		}
	}
	if limit > 0 && len(out) > limit {
		return out[:limit], true
	}
	return out, more
}

// localSnapshot answers from the overlay and the cache only: a key the
// cache does not know fails the read with errNotLocal.
type localSnapshot struct{ s *Store }

func (l *localSnapshot) Revision() int64 {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.w
}

func (l *localSnapshot) Get(_ context.Context, keys [][]byte) ([]kv.Versioned, error) {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]kv.Versioned, len(keys))
	for i, k := range keys {
		if e, ok := s.overlay.Get(&ovEntry{w: kv.Write{Key: k}}); ok {
			out[i] = overlaid(e.w)
			continue
		}
		v, ok := s.knownLocked(k)
		if !ok {
			return nil, errNotLocal
		}
		out[i] = v
	}
	return out, nil
}

func (l *localSnapshot) Scan(_ context.Context, start, end []byte, limit int) ([]kv.Versioned, bool, int64, error) {
	s := l.s
	s.mu.Lock()
	ov := s.overlayLocked(start, end)
	s.mu.Unlock()
	dels := 0
	for _, w := range ov {
		if w.Delete {
			dels++
		}
	}
	fetch := limit
	if limit > 0 {
		fetch += dels
	}
	page, more, rev, ok := s.scanCached(start, end, fetch, false)
	if !ok {
		return nil, false, 0, errNotLocal
	}
	page, more = mergeOverlay(page, more, ov, limit)
	return page, more, rev, nil
}
