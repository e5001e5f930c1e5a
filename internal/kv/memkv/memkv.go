package memkv

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/google/btree"

	"github.com/weftfs/weft/internal/kv"
)

// Store is an in-memory kv.Store: a copy-on-write B-tree of versioned keys.
// Every transaction reads a lazy clone of the tree taken at its start, and
// commits under one mutex after validating its read set like etcd would.
// Locking: mu guards tree, rev, closed and followers; snapshots are
// immutable clones read without a lock. Followers are called under mu, in
// commit order.
type Store struct {
	opts kv.Options

	mu        sync.Mutex
	tree      *btree.BTreeG[item]
	rev       int64
	closed    bool
	followers map[int]func(kv.Changes)
	nextID    int
}

var _ kv.Store = (*Store)(nil)

type item struct {
	key []byte
	val []byte
	rev int64
}

func less(a, b item) bool { return bytes.Compare(a.key, b.key) < 0 }

// New returns an empty store. o.Limits are enforced like etcd's when set
// (zero: unlimited), so tests can run meta under etcd's defaults.
func New(o kv.Options) *Store {
	return &Store{opts: o, tree: btree.NewG(32, less)}
}

// Update implements kv.Store.
func (s *Store) Update(ctx context.Context, fn func(kv.Tx) error) error {
	return kv.Run(ctx, backend{s}, s.opts, false, fn)
}

// View implements kv.Store.
func (s *Store) View(ctx context.Context, fn func(kv.Tx) error) error {
	return kv.Run(ctx, backend{s}, s.opts, true, fn)
}

// Limits implements kv.Store.
func (s *Store) Limits() kv.Limits { return s.opts.Limits }

// Close implements kv.Store; the data is dropped.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.tree = btree.NewG(32, less)
	return nil
}

// Len returns the number of keys, for tests.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tree.Len()
}

// backend adapts Store to kv.Backend without exporting Begin and Commit.
type backend struct{ s *Store }

var (
	_ kv.Backend  = backend{}
	_ kv.Snapshot = (*snapshot)(nil)
)

func (b backend) Begin(ctx context.Context, attempt int) (kv.Snapshot, error) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, kv.ErrClosed
	}
	return &snapshot{tree: s.tree.Clone(), rev: s.rev}, nil
}

func (b backend) Commit(ctx context.Context, t *kv.Txn) error {
	s := b.s
	if err := t.CheckLimits(s.opts.Limits, 0); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	writes := t.Writes()
	reads, ranges := t.ReadSet()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return kv.ErrClosed
	}
	for k, rev := range reads {
		cur, ok := s.tree.Get(item{key: []byte(k)})
		if !ok {
			cur.rev = 0
		}
		if cur.rev != rev {
			return fmt.Errorf("%w: key %q changed", kv.ErrConflict, k)
		}
	}
	for _, r := range ranges {
		changed := false
		visit := func(it item) bool {
			changed = it.rev > r.Rev
			return !changed
		}
		if r.End == nil {
			s.tree.AscendGreaterOrEqual(item{key: r.Start}, visit)
		} else {
			s.tree.AscendRange(item{key: r.Start}, item{key: r.End}, visit)
		}
		if changed {
			return fmt.Errorf("%w: range [%q, %q) changed", kv.ErrConflict, r.Start, r.End)
		}
	}
	s.rev++
	changes := kv.Changes{Rev: s.rev}
	for _, w := range writes {
		if w.Delete {
			if _, ok := s.tree.Delete(item{key: w.Key}); !ok {
				continue // etcd reports no change for an absent key
			}
			changes.Changes = append(changes.Changes, kv.Change{Key: w.Key, Delete: true, Rev: s.rev})
		} else {
			s.tree.ReplaceOrInsert(item{key: w.Key, val: w.Value, rev: s.rev})
			changes.Changes = append(changes.Changes, kv.Change{Key: w.Key, Value: bytes.Clone(w.Value), Rev: s.rev})
		}
	}
	t.SetCommitRev(s.rev)
	for _, fn := range s.followers {
		fn(changes)
	}
	return nil
}

type snapshot struct {
	tree *btree.BTreeG[item]
	rev  int64
}

func (sn *snapshot) Revision() int64 { return sn.rev }

func (sn *snapshot) Get(ctx context.Context, keys [][]byte) ([]kv.Versioned, error) {
	out := make([]kv.Versioned, len(keys))
	for i, k := range keys {
		out[i].Key = k
		if it, ok := sn.tree.Get(item{key: k}); ok {
			out[i].Value = bytes.Clone(it.val)
			if out[i].Value == nil {
				out[i].Value = []byte{}
			}
			out[i].ModRev = it.rev
		}
	}
	return out, ctx.Err()
}

func (sn *snapshot) Scan(ctx context.Context, start, end []byte, limit int) ([]kv.Versioned, bool, int64, error) {
	var out []kv.Versioned
	more := false
	visit := func(it item) bool {
		if limit > 0 && len(out) == limit {
			more = true
			return false
		}
		v := bytes.Clone(it.val)
		if v == nil {
			v = []byte{}
		}
		out = append(out, kv.Versioned{Key: bytes.Clone(it.key), Value: v, ModRev: it.rev})
		return true
	}
	if end == nil {
		sn.tree.AscendGreaterOrEqual(item{key: start}, visit)
	} else {
		sn.tree.AscendRange(item{key: start}, item{key: end}, visit)
	}
	return out, more, sn.rev, ctx.Err()
}

var _ kv.Follower = (*Store)(nil)

// Backend implements kv.Follower.
func (s *Store) Backend(readOnly bool) kv.Backend { return backend{s} }

// Follow implements kv.Follower: fn is called inside each commit, under
// the store's lock. memkv keeps no history: after must be the current
// revision (kv.ErrCompacted otherwise).
func (s *Store) Follow(ctx context.Context, after int64, fn func(kv.Changes)) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return kv.ErrClosed
	}
	if after != s.rev {
		rev := s.rev
		s.mu.Unlock()
		return fmt.Errorf("%w: memkv keeps no history: asked for changes after revision %d, the store is at %d", kv.ErrCompacted, after, rev)
	}
	if s.followers == nil {
		s.followers = map[int]func(kv.Changes){}
	}
	id := s.nextID
	s.nextID++
	s.followers[id] = fn
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	delete(s.followers, id)
	s.mu.Unlock()
	return ctx.Err()
}

// Progress implements kv.Follower: every follower gets the current
// revision before it returns.
func (s *Store) Progress(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fn := range s.followers {
		fn(kv.Changes{Rev: s.rev})
	}
	return nil
}
