package kvcache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/runner"
)

// Defaults of Config.
const (
	DefaultMaxKeys  = 1 << 18
	DefaultMaxStale = time.Second
)

// Config configures a Store.
type Config struct {
	// Inner is the store cached. The Store does not close it.
	Inner kv.Follower
	// Preload ranges are read whole at every start of the cache and kept
	// complete: a key of them that the cache does not hold is absent. Keep
	// them small (counters, usage shards).
	Preload []kv.Range
	// Presume ranges hold keys that are usually absent when a transaction
	// reads them (names about to be created). An optimistic transaction
	// takes a key of them that the cache does not know for absent; the
	// commit checks it.
	Presume []kv.Range
	// MaxKeys bounds the keys held (present or known absent); past it the
	// cache starts over empty. Zero means DefaultMaxKeys.
	MaxKeys int
	// MaxStale is how long the cache serves after the last word from the
	// follow stream (a change or a progress report, asked for every
	// MaxStale/4). Past it, and while the stream is down, every read goes
	// to the inner store. Zero means DefaultMaxStale.
	MaxStale time.Duration
	// Options tune the retry loop (limits come from Inner).
	Options kv.Options
	Log     *slog.Logger
	// Runner runs the Store's workers: "cache-follow" (follows the
	// store), "cache-progress" (asks the stream for progress every
	// MaxStale/4) and "cache-flush" (commits deferred transactions).
	// Names are unique in a runner, so one Store per runner. Nil: a
	// runner of the Store's own, stopped by Close. Close the Store before
	// stopping the runner: Close commits through "cache-flush".
	Runner *runner.Runner
}

// Store is a kv.Store over Config.Inner with a local, coherent cache.
//
// Coherence: the cache holds each key's value as of a revision (asOf) and
// applies every change the follow stream delivers after it, so a cached
// value lags the store by the stream's delay only: a change committed by
// another client is served here once its change has been delivered
// (normally within a millisecond or two of the commit). This Store's own
// commits are applied at once (read-your-writes). A read of a key the
// cache does not hold goes to the inner store (a View's snapshot reads, so
// session reads where configured) and fills the cache.
//
// Views read cached keys without a round trip; they are not a snapshot of
// one revision: two keys may be read at revisions a stream delay apart.
//
// Updates are serializable as on the inner store: the first attempt of an
// Update reads from the cache (keys in Config.Presume it does not know are
// taken for absent) and the commit validates every key read by its
// revision, and every range scanned against the revision it was read at.
// An attempt that read from the cache and then fails, writes nothing or
// conflicts is decided again at once on the inner store (see
// kv.OptimisticSnapshot), so an Update's failures are decided on current
// data, as without the cache.
//
// Locking: mu guards everything below it; inner calls are made without
// it. A memkv inner calls apply under its own lock, so nothing here calls
// the inner store while holding mu.
type Store struct {
	cfg   Config
	inner kv.Follower

	mu       sync.Mutex
	entries  *btree.BTreeG[*entry]
	complete []kv.Range
	pendings map[*pending]struct{}
	w        int64     // every change up to w is applied
	heard    time.Time // last delivery of the stream
	running  bool
	epoch    uint64
	changed  chan struct{} // closed at every delivery and every start of the stream
	restart  context.CancelFunc

	// Write-back (writeback.go): deferred transactions in order, the
	// overlay of their writes, and how far commits have got.
	overlay  *btree.BTreeG[*ovEntry]
	queue    []*deferred
	inFlight int
	seq      uint64 // last deferred transaction
	settled  uint64 // every transaction up to it is committed or dropped
	// flushTarget is the latest seq a Flush waits for.
	flushTarget uint64
	settledCh   chan struct{}
	dropped     []error
	lastCommit  int64 // revision of this Store's newest commit
	wbClosed    bool

	deferMu                         sync.Mutex    // one local run at a time
	wbUrgent                        chan struct{} // ends the flusher's GroupDelay
	deferredN, committedN, droppedN atomic.Int64

	hits, misses atomic.Int64

	followW, progressW, flushW *runner.Handle
	own                        *runner.Runner // the Store's own runner, when none was given
}

// entry is one key as of revision asOf: present with val and modRev, or
// absent.
type entry struct {
	key     []byte
	val     []byte
	present bool
	modRev  int64
	asOf    int64
}

func lessEntry(a, b *entry) bool { return bytes.Compare(a.key, b.key) < 0 }

// pending is a read of the inner store in flight: changes to r delivered
// meanwhile are noted, so that the read does not fill the cache with a
// value older than one the cache has seen go by.
type pending struct {
	r       kv.Range
	w0      int64 // s.w when the read started
	changed int64 // newest change seen in r since
}

var _ kv.Store = (*Store)(nil)

// New returns a Store over cfg.Inner and starts following it in the
// background (its workers, see Config.Runner); until the first start
// completes, it serves from the inner store. Close stops it.
func New(cfg Config) (*Store, error) {
	if cfg.Inner == nil {
		return nil, errors.New("kvcache: no inner store in Config")
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.MaxStale <= 0 {
		cfg.MaxStale = DefaultMaxStale
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cfg.Options.Limits = cfg.Inner.Limits()
	s := &Store{cfg: cfg, inner: cfg.Inner, entries: btree.NewG(16, lessEntry), pendings: map[*pending]struct{}{},
		changed:   make(chan struct{}),
		overlay:   btree.NewG(16, func(a, b *ovEntry) bool { return bytes.Compare(a.w.Key, b.w.Key) < 0 }),
		settledCh: make(chan struct{}), wbUrgent: make(chan struct{}, 1)}
	run := cfg.Runner
	if run == nil {
		s.own = runner.New(runner.Config{Log: cfg.Log})
		run = s.own
	}
	var err error
	// A broken stream is followed again after 50 ms, then up to 2 s.
	if s.followW, err = run.Go("cache-follow", (*followWorker)(s), runner.Options{MinBackoff: 50 * time.Millisecond, MaxBackoff: 2 * time.Second}); err == nil {
		if s.progressW, err = run.Go("cache-progress", (*progressWorker)(s), runner.Options{Idle: cfg.MaxStale / 4, Delay: cfg.MaxStale / 4}); err == nil {
			s.flushW, err = run.Go("cache-flush", (*flushWorker)(s), runner.Options{})
		}
	}
	if err != nil {
		s.stopWorkers()
		return nil, fmt.Errorf("kvcache: %w", err)
	}
	return s, nil
}

// stopWorkers stops the Store's workers (those started) and its own runner.
func (s *Store) stopWorkers() {
	for _, h := range []*runner.Handle{s.flushW, s.progressW, s.followW} {
		if h != nil {
			_ = h.Stop(context.Background())
		}
	}
	if s.own != nil {
		_ = s.own.Stop(context.Background())
	}
}

// Update implements kv.Store.
func (s *Store) Update(ctx context.Context, fn func(kv.Tx) error) error {
	return kv.Run(ctx, backend{s: s}, s.cfg.Options, false, fn)
}

// View implements kv.Store.
func (s *Store) View(ctx context.Context, fn func(kv.Tx) error) error {
	return kv.Run(ctx, backend{s: s, view: true}, s.cfg.Options, true, fn)
}

// Limits implements kv.Store.
func (s *Store) Limits() kv.Limits { return s.inner.Limits() }

// Close commits what is deferred (waiting at most CloseTimeout), then
// stops the Store's workers; the inner store stays open. Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	s.wbClosed = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), CloseTimeout)
	err := s.Flush(ctx)
	cancel()
	s.stopWorkers()
	if err != nil {
		return fmt.Errorf("kvcache: close: %w", err)
	}
	return nil
}

// CloseTimeout bounds how long Close waits for deferred transactions.
const CloseTimeout = 30 * time.Second

// Stats are the cache's counters.
type Stats struct {
	// Hits and Misses count keys and ranges read from the cache and from
	// the inner store.
	Hits, Misses int64
	// Keys is the number of keys held; Rev the revision applied.
	Keys int
	Rev  int64
	// Serving reports whether reads are served from the cache now.
	Serving bool
	// Deferred, Committed and Dropped count transactions of the
	// write-back (Defer) since the start; Waiting is how many wait for
	// their commit now.
	Deferred, Committed, Dropped int64
	Waiting                      int
}

// Stats returns the counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Hits: s.hits.Load(), Misses: s.misses.Load(), Keys: s.entries.Len(), Rev: s.w, Serving: s.servingLocked(),
		Deferred: s.deferredN.Load(), Committed: s.committedN.Load(), Dropped: s.droppedN.Load(), Waiting: len(s.queue) + s.inFlight}
}

func (s *Store) servingLocked() bool {
	return s.running && time.Since(s.heard) < s.cfg.MaxStale
}

// Epoch identifies one continuous run of the follow stream; 0 means the
// cache is not serving. See KnownEmpty.
func (s *Store) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.servingLocked() {
		return 0
	}
	return s.epoch
}

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
		s.addCompleteLocked(r)
	}
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

// Complete reads range r whole from the inner store and from then on
// answers for all of it, as for KnownEmpty: for a caller that knows the
// range will not change behind its back for a while (a delegated
// directory), so that it can decide there on the cache alone. It reports
// false, and changes nothing, if r holds more than max keys, a change in r
// went by during the read, or the stream restarted.
func (s *Store) Complete(ctx context.Context, r kv.Range, max int) (bool, error) {
	s.mu.Lock()
	covered := s.servingLocked() && s.coveredLocked(r.Start, r.End)
	s.mu.Unlock()
	if covered {
		return true, nil
	}
	epoch := s.Epoch()
	if epoch == 0 {
		return false, nil
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
		return false, err
	}
	var all []kv.Versioned
	for start := r.Start; ; {
		kvs, more, _, err := snap.Scan(ctx, start, r.End, 1000)
		if err != nil {
			release()
			return false, err
		}
		all = append(all, kvs...)
		if len(all) > max {
			release()
			return false, nil
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
	if rev == 0 || epoch != s.epoch || !usableLocked(p, rev, s.running) {
		return false, nil
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
	return true, nil
}

// Sync waits until the cache has applied every change committed (by
// anyone) before Sync was called, or until ctx ends. It is for tests and
// for callers that must see another client's acknowledged change (close-
// to-open across clients); it costs a read of the inner store plus the
// stream's delay. A Store that is not serving returns at once: its reads
// go to the inner store.
func (s *Store) Sync(ctx context.Context) error {
	snap, err := s.inner.Backend(false).Begin(ctx, 0)
	if err != nil {
		return err
	}
	if _, err := snap.Get(ctx, [][]byte{{0}}); err != nil {
		return err
	}
	target := snap.Revision()
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
	s.complete = nil
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

// setLocked records key's state as of asOf, unless the cache knows a
// newer one. A key of a complete range that is absent is simply not held.
func (s *Store) setLocked(key, val []byte, present bool, modRev, asOf int64) {
	if e, ok := s.entries.Get(&entry{key: key}); ok {
		if e.asOf >= asOf {
			return
		}
		if !present && s.inCompleteLocked(key) {
			s.entries.Delete(e)
			return
		}
		e.val, e.present, e.modRev, e.asOf = bytes.Clone(val), present, modRev, asOf
		return
	}
	if !present && s.inCompleteLocked(key) {
		return
	}
	s.entries.ReplaceOrInsert(&entry{key: bytes.Clone(key), val: bytes.Clone(val), present: present, modRev: modRev, asOf: asOf})
}

func (s *Store) inCompleteLocked(key []byte) bool {
	for _, r := range s.complete {
		if r.Contains(key) {
			return true
		}
	}
	return false
}

func (s *Store) coveredLocked(start, end []byte) bool {
	for _, r := range s.complete {
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

// knownLocked returns what the cache knows of key.
func (s *Store) knownLocked(key []byte) (kv.Versioned, bool) {
	if e, ok := s.entries.Get(&entry{key: key}); ok {
		v := kv.Versioned{Key: key}
		if e.present {
			v.Value, v.ModRev = bytes.Clone(e.val), e.modRev
			if v.Value == nil {
				v.Value = []byte{}
			}
		}
		return v, true
	}
	if s.inCompleteLocked(key) {
		return kv.Versioned{Key: key}, true
	}
	return kv.Versioned{}, false
}

// committed applies this Store's own commit at rev.
func (s *Store) committed(t *kv.Txn) {
	rev := t.CommitRev()
	if rev == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastCommit = max(s.lastCommit, rev)
	if !s.running {
		return
	}
	for _, w := range t.Writes() {
		s.noteLocked(w.Key, rev)
		s.setLocked(w.Key, w.Value, !w.Delete, rev, rev)
	}
}

// backend implements kv.Backend over the cache and the inner store.
type backend struct {
	s    *Store
	view bool
}

func (b backend) Begin(ctx context.Context, attempt int) (kv.Snapshot, error) {
	s := b.s
	s.mu.Lock()
	serving := s.servingLocked()
	s.mu.Unlock()
	cached := serving && (b.view || attempt == 0)
	// An optimistic attempt may read the inner store like a View (session
	// reads): its commit validates what it read, and a failure is decided
	// again on a strict snapshot.
	inner, err := s.inner.Backend(cached).Begin(ctx, attempt)
	if err != nil {
		return nil, err
	}
	return &snapshot{s: s, inner: inner, cached: cached, fill: serving, optimistic: cached && !b.view, overlay: b.view}, nil
}

func (b backend) Commit(ctx context.Context, t *kv.Txn) error {
	if err := b.s.inner.Backend(false).Commit(ctx, t); err != nil {
		return err
	}
	b.s.committed(t)
	return nil
}

// snapshot reads from the cache (cached) and from the inner snapshot.
type snapshot struct {
	s          *Store
	inner      kv.Snapshot
	cached     bool // answer from the cache what it knows
	fill       bool // fill the cache with what the inner store answers
	optimistic bool // an Update's first attempt: presume absent keys
	overlay    bool // a View: deferred writes are seen (writeback.go)
}

var _ kv.OptimisticSnapshot = (*snapshot)(nil)

func (sn *snapshot) Optimistic() bool { return sn.optimistic }

func (sn *snapshot) Revision() int64 { return sn.inner.Revision() }

func (sn *snapshot) Get(ctx context.Context, keys [][]byte) ([]kv.Versioned, error) {
	s := sn.s
	out := make([]kv.Versioned, len(keys))
	var fetch [][]byte
	var at []int
	if sn.cached || sn.overlay {
		s.mu.Lock()
		serving := s.servingLocked() && sn.cached
		for i, k := range keys {
			if sn.overlay && s.overlay.Len() > 0 {
				if e, ok := s.overlay.Get(&ovEntry{w: kv.Write{Key: k}}); ok {
					out[i] = overlaid(e.w)
					continue
				}
			}
			if serving {
				if v, ok := s.knownLocked(k); ok {
					out[i] = v
					s.hits.Add(1)
					continue
				}
				if sn.optimistic && presumed(s.cfg.Presume, k) {
					out[i] = kv.Versioned{Key: k}
					s.hits.Add(1)
					continue
				}
			}
			fetch = append(fetch, k)
			at = append(at, i)
		}
		s.mu.Unlock()
	} else {
		fetch = keys
		for i := range keys {
			at = append(at, i)
		}
	}
	if len(fetch) == 0 {
		return out, nil
	}
	s.misses.Add(int64(len(fetch)))
	var ps []*pending
	if sn.fill {
		rs := make([]kv.Range, len(fetch))
		for i, k := range fetch {
			rs[i] = kv.Range{Start: k, End: kv.After(k)}
		}
		ps = s.register(rs)
	}
	vs, err := sn.inner.Get(ctx, fetch)
	if sn.fill {
		s.fillGets(ps, vs, sn.inner.Revision(), err)
	}
	if err != nil {
		return nil, err
	}
	for j, v := range vs {
		v.Key = fetch[j]
		out[at[j]] = v
	}
	return out, nil
}

func (sn *snapshot) Scan(ctx context.Context, start, end []byte, limit int) ([]kv.Versioned, bool, int64, error) {
	if sn.overlay {
		s := sn.s
		s.mu.Lock()
		ov := s.overlayLocked(start, end)
		s.mu.Unlock()
		if len(ov) > 0 {
			fetch := limit
			for _, w := range ov {
				if w.Delete && limit > 0 {
					fetch++
				}
			}
			page, more, rev, err := sn.scan(ctx, start, end, fetch)
			if err != nil {
				return nil, false, 0, err
			}
			page, more = mergeOverlay(page, more, ov, limit)
			return page, more, rev, nil
		}
	}
	return sn.scan(ctx, start, end, limit)
}

func (sn *snapshot) scan(ctx context.Context, start, end []byte, limit int) ([]kv.Versioned, bool, int64, error) {
	s := sn.s
	if sn.cached {
		if kvs, more, rev, ok := s.scanCached(start, end, limit, sn.optimistic); ok {
			s.hits.Add(1)
			return kvs, more, rev, nil
		}
	}
	s.misses.Add(1)
	var ps []*pending
	if sn.fill {
		ps = s.register([]kv.Range{{Start: start, End: end}})
	}
	kvs, more, rev, err := sn.inner.Scan(ctx, start, end, limit)
	if sn.fill {
		s.fillScan(ps[0], kvs, rev, err)
	}
	return kvs, more, rev, err
}

// scanCached answers a scan inside a complete range. For a transaction
// that will commit (strict), every key of the range must be known as of
// the applied revision w, which the commit compares the range against.
func (s *Store) scanCached(start, end []byte, limit int, strict bool) ([]kv.Versioned, bool, int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.servingLocked() || !s.coveredLocked(start, end) {
		return nil, false, 0, false
	}
	var out []kv.Versioned
	more, ok := false, true
	visit := func(e *entry) bool {
		if strict && e.asOf > s.w {
			ok = false
			return false
		}
		if !e.present {
			return true
		}
		if limit > 0 && len(out) == limit {
			more = true
			return false
		}
		v := bytes.Clone(e.val)
		if v == nil {
			v = []byte{}
		}
		out = append(out, kv.Versioned{Key: bytes.Clone(e.key), Value: v, ModRev: e.modRev})
		return true
	}
	if end == nil {
		s.entries.AscendGreaterOrEqual(&entry{key: start}, visit)
	} else {
		s.entries.AscendRange(&entry{key: start}, &entry{key: end}, visit)
	}
	return out, more, s.w, ok
}

// register notes reads about to be made of the inner store.
func (s *Store) register(ranges []kv.Range) []*pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ps []*pending
	for _, r := range ranges {
		p := &pending{r: r, w0: s.w}
		if !s.running {
			p.w0 = -1 // never fill from a read begun while not following
		}
		s.pendings[p] = struct{}{}
		ps = append(ps, p)
	}
	return ps
}

// usableLocked reports whether a read at rev registered as p may fill the
// cache: it is not older than what the stream had applied when it began
// (else a change in between may have gone by unseen), and no change after
// rev went by meanwhile.
func usableLocked(p *pending, rev int64, running bool) bool {
	return running && p.w0 >= 0 && rev >= p.w0 && p.changed <= rev
}

func (s *Store) fillGets(ps []*pending, vs []kv.Versioned, rev int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range ps {
		delete(s.pendings, p)
		if err != nil || rev == 0 || !usableLocked(p, rev, s.running) {
			continue
		}
		v := vs[i]
		s.setLocked(p.r.Start, v.Value, v.ModRev != 0, v.ModRev, rev)
	}
}

func (s *Store) fillScan(p *pending, kvs []kv.Versioned, rev int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pendings, p)
	if err != nil || rev == 0 || !usableLocked(p, rev, s.running) {
		return
	}
	for _, v := range kvs {
		s.setLocked(v.Key, v.Value, true, v.ModRev, rev)
	}
}

// String describes the cache for logs.
func (s *Store) String() string {
	st := s.Stats()
	return fmt.Sprintf("kvcache: %d keys at revision %d, %d hits, %d misses, serving %v", st.Keys, st.Rev, st.Hits, st.Misses, st.Serving)
}
