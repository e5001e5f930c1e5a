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
	empty    []kv.Range // known empty when taken (KnownEmpty), kept apart from complete
	pendings map[*pending]struct{}
	w        int64     // every change up to w is applied
	heard    time.Time // last delivery of the stream
	running  bool
	epoch    uint64
	changed  chan struct{} // closed at every delivery and every start of the stream
	restart  context.CancelFunc
	touch    touched // keys of the watched prefix the stream changed (touched.go)

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
	// beforeCommit runs before each batch's commit (SetBeforeCommit).
	beforeCommit func(context.Context) error

	deferMu                         sync.Mutex    // one local run at a time
	wbUrgent                        chan struct{} // ends the flusher's GroupDelay
	deferredN, committedN, droppedN atomic.Int64

	hits, misses atomic.Int64

	syncs syncRounds // Sync's reads of the store's revision

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

// String describes the cache for logs.
func (s *Store) String() string {
	st := s.Stats()
	return fmt.Sprintf("kvcache: %d keys at revision %d, %d hits, %d misses, serving %v", st.Keys, st.Rev, st.Hits, st.Misses, st.Serving)
}
