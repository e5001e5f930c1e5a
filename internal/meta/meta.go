package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/runner"
)

// Config configures a Meta.
type Config struct {
	// Store holds the namespace. Meta does not close it.
	Store kv.Store
	// LINBatch is how many LINs one allocation takes from the shared
	// counter. Zero means 1024.
	LINBatch uint64
	// Now returns the current time: inode times, and the clock of
	// directory delegations (RecallTimeout, DelegationIdle,
	// DelegationCooldown; see delegation.go). Nil means time.Now.
	Now func() time.Time
	// Session is this client's session (its etcd lease): it names the
	// client in directory delegations. Zero: the client never holds one.
	Session SessionID
	// WriteBack lets this client acknowledge creates and unlinks in
	// directories it holds the delegation of before they are committed
	// (see delegation.go). It needs a Session and a caching Store
	// (kvcache); otherwise it is ignored.
	WriteBack bool
	// SessionAlive reports whether a session still exists, so that the
	// delegation of a crashed client is taken back at once rather than
	// after RecallTimeout. Nil: sessions are presumed alive.
	SessionAlive func(ctx context.Context, s SessionID) (bool, error)
	// Log receives write-back warnings. Nil means slog.Default().
	Log *slog.Logger
	// Runner runs the write-back's worker ("delegations"); nil: a runner
	// of the Meta's own, stopped by Close. Without write-back the Meta
	// runs no worker.
	Runner *runner.Runner
	// Locks holds the file locks (SetLock; see locks.go); nil: a MemLocks
	// of the Meta's own, coherent among the users of this Meta only.
	Locks LockStore
}

// Meta is the namespace of one weft cluster, as seen by one client. It is
// safe for concurrent use; each method is one or more kv transactions and
// is atomic unless its comment says otherwise.
//
// Locking: linMu guards the local batch of free LINs; everything else is in
// the store.
type Meta struct {
	store  kv.Store
	now    func() time.Time
	batch  uint64
	budget int // writes (and read-set entries) per chunk of unbounded work

	linMu     sync.Mutex
	nextLIN   LIN
	limitLIN  LIN
	shardBase int
	shardSeq  atomic.Uint64
	cached    bool // the store is a cache: read keys, not ranges, where either does

	session      SessionID
	alive        func(ctx context.Context, s SessionID) (bool, error)
	log          *slog.Logger
	wb           *writeBack   // nil without write-back
	barriers     dataBarriers // see data_barrier.go
	coveredOpens atomic.Int64 // OpenAttr answered by the cache alone
	syncedOpens  atomic.Int64 // OpenAttr after a Sync
	locks        LockStore
	lockViews    lockViews
	lockCounters lockCounters

	lostMu sync.Mutex
	lost   []error // write-back errors not yet reported by Flush
}

// FormatOptions describe a new namespace.
type FormatOptions struct {
	// Pool is the root directory's pool, inherited by everything created
	// below it unless set otherwise. Empty means "default".
	Pool string
	// Protection is the root's requested protection (zero: pool default).
	Protection Protection
	// Mode, UID and GID of the root directory; Mode 0 means 0755.
	Mode     uint32
	UID, GID uint32
	// Now is the creation time; zero means time.Now().
	Now time.Time
}

// Format writes an empty namespace — the format record, the LIN counter and
// the root directory — into store. It fails with ErrExists if store is
// already formatted, and with ErrInvalid for bad options.
func Format(ctx context.Context, store kv.Store, o FormatOptions) error {
	if o.Pool == "" {
		o.Pool = "default"
	}
	if err := ValidPoolName(o.Pool); err != nil {
		return err
	}
	if err := o.Protection.Validate(); err != nil {
		return err
	}
	if o.Mode == 0 {
		o.Mode = 0o755
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	now := o.Now.UnixNano()
	return storeErr(store.Update(ctx, func(tx kv.Tx) error {
		old, err := tx.Get(keyFormat())
		if err != nil {
			return err
		}
		if old != nil {
			f, err := decodeFormat(old)
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: the store is already formatted (format version %d, created %s)",
				ErrExists, f.version, time.Unix(0, f.created).UTC().Format(time.RFC3339))
		}
		tx.Put(keyFormat(), encodeFormat(formatRecord{version: FormatVersion, created: now}))
		tx.Put(keyNextLIN(), encodeNextLIN(FirstLIN))
		root := &inode{lin: RootLIN, typ: TypeDir, mode: o.Mode & 0o7777, uid: o.UID, gid: o.GID,
			nlink: 2, atime: now, mtime: now, ctime: now, btime: now, gen: 1, pool: o.Pool, prot: o.Protection}
		tx.Put(keyInode(RootLIN), encodeInode(root))
		tx.Put(keyUsage(0), encodeUsage(usageShard{o.Pool: {Inodes: 1}}))
		return nil
	}))
}

// Open returns a Meta over a formatted store. It fails with ErrNotFormatted
// on an empty store, ErrNewerFormat if a newer weft wrote it, ErrCorrupt if
// the format record is unreadable, or an error of the store (classed as
// ErrUnavailable, ErrConflict or ErrTooLarge where it is one of those).
func Open(ctx context.Context, cfg Config) (*Meta, error) {
	if cfg.Store == nil {
		return nil, errors.New("meta: Config.Store is nil")
	}
	var f formatRecord
	err := cfg.Store.View(ctx, func(tx kv.Tx) error {
		b, err := tx.Get(keyFormat())
		if err != nil {
			return err
		}
		if b == nil {
			return fmt.Errorf("%w: no weft namespace in this store: format it first (weft format)", ErrNotFormatted)
		}
		f, err = decodeFormat(b)
		return err
	})
	if err != nil {
		return nil, storeErr(err)
	}
	switch {
	case f.version > FormatVersion:
		return nil, fmt.Errorf("%w: the namespace has format version %d, this weft reads up to %d: upgrade weft on this node",
			ErrNewerFormat, f.version, FormatVersion)
	case f.version < 1:
		return nil, fmt.Errorf("%w: format version %d", ErrCorrupt, f.version)
	case f.version < FormatVersion:
		now := time.Now
		if cfg.Now != nil {
			now = cfg.Now
		}
		if err := migrate(ctx, cfg.Store, now); err != nil {
			return nil, err
		}
	}
	_, cached := cfg.Store.(cache)
	m := &Meta{store: cfg.Store, now: cfg.Now, batch: cfg.LINBatch, shardBase: rand.IntN(UsageShards), cached: cached,
		session: cfg.Session, alive: cfg.SessionAlive, log: cfg.Log, locks: cfg.Locks}
	if m.locks == nil {
		m.locks = NewMemLocks()
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if d, ok := cfg.Store.(deferrer); ok && cfg.WriteBack && cfg.Session != 0 {
		if m.wb, err = newWriteBack(m, d, cfg.Runner); err != nil {
			return nil, err
		}
		d.SetBeforeCommit(m.dataBarrier)
	}
	if m.batch == 0 {
		m.batch = 1024
	}
	l := cfg.Store.Limits()
	m.budget = 512
	if l.MaxOps > 0 && l.MaxOps/2 < m.budget {
		m.budget = l.MaxOps / 2
	}
	return m, nil
}

// migrate takes store from its format version to FormatVersion, one step
// (one transaction, migrations in schema.go) at a time. Each step re-reads
// the format record, so that clients opening an old store together
// migrate it once. Errors: ErrCorrupt for a format record that does not
// decode or a version with no migration; the store's.
func migrate(ctx context.Context, store kv.Store, now func() time.Time) error {
	for {
		done := false
		err := store.Update(ctx, func(tx kv.Tx) error {
			b, err := tx.Get(keyFormat())
			if err != nil {
				return err
			}
			f, err := decodeFormat(b)
			if err != nil {
				return err
			}
			if done = f.version >= FormatVersion; done {
				return nil
			}
			step, ok := migrations[f.version]
			if !ok {
				return fmt.Errorf("%w: no migration from namespace format %d to %d", ErrCorrupt, f.version, f.version+1)
			}
			if err := step(tx, now().UnixNano()); err != nil {
				return err
			}
			f.version++
			tx.Put(keyFormat(), encodeFormat(f))
			return nil
		})
		if err != nil {
			return storeErr(fmt.Errorf("meta: migrating the namespace format: %w", err))
		}
		if done {
			return nil
		}
	}
}

// allocLIN returns a fresh LIN, taking a new batch from the shared counter
// when the local one is used up. LINs of failed operations are not reused.
func (m *Meta) allocLIN(ctx context.Context) (LIN, error) {
	m.linMu.Lock()
	defer m.linMu.Unlock()
	if m.nextLIN < m.limitLIN {
		m.nextLIN++
		return m.nextLIN - 1, nil
	}
	first, err := m.reserveLINs(ctx, m.batch)
	if err != nil {
		return 0, err
	}
	m.nextLIN, m.limitLIN = first+1, first+LIN(m.batch)
	return first, nil
}

// reserveLINs takes n LINs from the shared counter in one transaction and
// returns the first: [first, first+n) are this caller's, and no other
// client will ever hand them out. On a caching store the new LINs' keys
// are declared absent (see KnownEmpty), so that creating them reads
// nothing.
func (m *Meta) reserveLINs(ctx context.Context, n uint64) (LIN, error) {
	var first LIN
	c, cached := m.store.(cache)
	var epoch uint64
	if cached {
		epoch = c.Epoch() // before the batch is taken: see KnownEmpty
	}
	err := m.store.Update(ctx, func(tx kv.Tx) error {
		b, err := tx.Get(keyNextLIN())
		if err != nil {
			return err
		}
		if b == nil {
			return fmt.Errorf("%w: LIN counter missing", ErrCorrupt)
		}
		if first, err = decodeNextLIN(b); err != nil {
			return err
		}
		tx.Put(keyNextLIN(), encodeNextLIN(first+LIN(n)))
		return nil
	})
	if err != nil {
		return 0, storeErr(err)
	}
	if cached {
		c.KnownEmpty(epoch, freshRanges(first, first+LIN(n))...)
	}
	return first, nil
}

// shard returns the usage shard for one transaction attempt: round robin from
// a random start, so that concurrent transactions of one client never share
// a shard and those of different clients rarely do.
func (m *Meta) shard() int {
	return (m.shardBase + int(m.shardSeq.Add(1))) % UsageShards
}

// Flush waits until every create and unlink this client acknowledged
// before the call is committed (write-back), and returns the errors of
// those that could not be (each reported once). Without write-back it
// returns nil at once. fsync of a file or a directory calls it.
func (m *Meta) Flush(ctx context.Context) error {
	if m.wb == nil {
		return nil
	}
	err := m.wb.d.Flush(ctx)
	m.lostMu.Lock()
	lost := m.lost
	m.lost = nil
	m.lostMu.Unlock()
	return storeErr(errors.Join(append(lost, err)...))
}

func (m *Meta) noteLost(err error) {
	m.lostMu.Lock()
	m.lost = append(m.lost, err)
	m.lostMu.Unlock()
}

// Close stops the write-back's worker, commits what this client deferred
// and gives back its directory delegations. The Meta must not be used
// after it. The store stays open.
func (m *Meta) Close(ctx context.Context) error {
	if m.wb == nil {
		return nil
	}
	m.wb.close(ctx)
	return m.Flush(ctx)
}

// Store returns the store the Meta runs on (for its statistics).
func (m *Meta) Store() kv.Store { return m.store }
