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
// Locking: mu guards tree, rev and closed; snapshots are immutable clones
// read without a lock.
type Store struct {
	opts kv.Options

	mu     sync.Mutex
	tree   *btree.BTreeG[item]
	rev    int64
	closed bool
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
	snapRev := t.Revision()
	for _, r := range ranges {
		changed := false
		visit := func(it item) bool {
			changed = it.rev > snapRev
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
	for _, w := range writes {
		if w.Delete {
			s.tree.Delete(item{key: w.Key})
		} else {
			s.tree.ReplaceOrInsert(item{key: w.Key, val: w.Value, rev: s.rev})
		}
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

func (sn *snapshot) Scan(ctx context.Context, start, end []byte, limit int) ([]kv.Versioned, bool, error) {
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
	return out, more, ctx.Err()
}
