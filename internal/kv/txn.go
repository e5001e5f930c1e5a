package kv

import (
	"bytes"
	"context"
	"fmt"
	"sort"
)

// Versioned is a key as a backend snapshot holds it.
type Versioned struct {
	Key   []byte
	Value []byte
	// ModRev is the store revision of the key's last change; 0 means absent.
	ModRev int64
}

// Snapshot is the read half of a backend: consistent reads at one store
// revision. Txn calls it from one goroutine at a time.
type Snapshot interface {
	// Get returns one Versioned per key, in order; an absent key has ModRev 0
	// and a nil Value.
	Get(ctx context.Context, keys [][]byte) ([]Versioned, error)
	// Scan returns at most limit present keys with start <= key < end (end
	// nil: no upper bound; limit <= 0: no limit) in ascending order, and
	// whether more keys exist in the range after the last one returned,
	// and the revision rev the range was read at: no key in it changed
	// after rev as far as the answer knows (a commit compares the range
	// against rev).
	Scan(ctx context.Context, start, end []byte, limit int) (kvs []Versioned, more bool, rev int64, err error)
	// Revision is the snapshot's revision: 0 until the first read, when
	// backends that pin lazily (etcd) learn it.
	Revision() int64
}

// Backend is what a store implements to reuse Run: a way to take a snapshot
// and a way to commit a Txn atomically if its read set is unchanged.
type Backend interface {
	// Begin returns a fresh snapshot for attempt (0-based) of a transaction.
	Begin(ctx context.Context, attempt int) (Snapshot, error)
	// Commit applies t.Writes() atomically if, for every key in t.ReadSet(),
	// the key's current ModRev equals the recorded one (deletion included)
	// and no key in a read range changed after the range's Rev. It returns
	// an error wrapping ErrConflict otherwise, ErrTooLarge (checked before
	// sending, see CheckLimits) for an oversized commit. On success it
	// records the commit's revision with t.SetCommitRev.
	Commit(ctx context.Context, t *Txn) error
}

// Range is a half-open key range [Start, End); a nil End has no upper bound.
// In a read set, Rev is the revision the range was read at.
type Range struct {
	Start, End []byte
	Rev        int64
}

// Contains reports whether key is in r.
func (r Range) Contains(key []byte) bool {
	return bytes.Compare(key, r.Start) >= 0 && (r.End == nil || bytes.Compare(key, r.End) < 0)
}

// Covers reports whether [start, end) lies inside r (end nil: unbounded).
func (r Range) Covers(start, end []byte) bool {
	if bytes.Compare(start, r.Start) < 0 {
		return false
	}
	if r.End == nil {
		return true
	}
	return end != nil && bytes.Compare(end, r.End) <= 0
}

// OptimisticSnapshot is implemented by snapshots that may answer from
// stale data (a cache) on the understanding that the commit validates
// every read. When fn fails, or writes nothing, on such a snapshot, or
// its commit conflicts, Run runs fn again at once on a fresh snapshot of
// the next attempt (which must not be optimistic), so that failures and
// read-only outcomes are always decided on current data.
type OptimisticSnapshot interface {
	Snapshot
	Optimistic() bool
}

// Write is one buffered write.
type Write struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// Txn is the backend-independent transaction: it implements Tx over a
// Snapshot, keeps the read set and the buffered writes, and lets reads see
// earlier writes of the same transaction. Backends receive it in Commit.
type Txn struct {
	ctx      context.Context
	snap     Snapshot
	readOnly bool
	err      error
	reads    map[string]int64
	ranges   []Range
	writes   map[string]Write
	commit   int64
}

var _ Tx = (*Txn)(nil)

// NewTxn returns a transaction reading from snap. A read-only transaction
// keeps no read set and refuses writes with ErrReadOnly.
func NewTxn(ctx context.Context, snap Snapshot, readOnly bool) *Txn {
	return &Txn{ctx: ctx, snap: snap, readOnly: readOnly}
}

// Revision is the snapshot revision the transaction read at (0: no read).
func (t *Txn) Revision() int64 { return t.snap.Revision() }

// ReadSet returns the keys read with the ModRev seen (0: absent) and the
// ranges scanned. The caller must not modify them.
func (t *Txn) ReadSet() (keys map[string]int64, ranges []Range) { return t.reads, t.ranges }

// Writes returns the buffered writes sorted by key, one per key.
func (t *Txn) Writes() []Write {
	out := make([]Write, 0, len(t.writes))
	for _, w := range t.writes {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Key, out[j].Key) < 0 })
	return out
}

// SetCommitRev records the revision t was committed at (backends call it).
func (t *Txn) SetCommitRev(rev int64) { t.commit = rev }

// CommitRev is the revision t was committed at, 0 before a commit.
func (t *Txn) CommitRev() int64 { return t.commit }

// HasWrites reports whether the transaction buffered any write.
func (t *Txn) HasWrites() bool { return len(t.writes) > 0 }

// CheckLimits returns an error wrapping ErrTooLarge if committing t would
// exceed l. keyOverhead is the bytes a backend adds to every key (a prefix).
func (t *Txn) CheckLimits(l Limits, keyOverhead int) error {
	const perEntry = 16 // protobuf tags, lengths and revisions, rounded up
	nCmp := len(t.reads) + len(t.ranges)
	if l.MaxOps > 0 && len(t.writes) > l.MaxOps {
		return fmt.Errorf("%w: %d writes, the backend accepts %d per transaction: split the work", ErrTooLarge, len(t.writes), l.MaxOps)
	}
	if l.MaxOps > 0 && nCmp > l.MaxOps {
		return fmt.Errorf("%w: %d keys and ranges read, the backend accepts %d per read-write transaction: read less, or scan in View", ErrTooLarge, nCmp, l.MaxOps)
	}
	if l.MaxBytes <= 0 {
		return nil
	}
	n := 512 // request header
	for k, w := range t.writes {
		n += len(k) + len(w.Value) + keyOverhead + perEntry
	}
	for k := range t.reads {
		n += len(k) + keyOverhead + perEntry
	}
	for _, r := range t.ranges {
		n += len(r.Start) + len(r.End) + 2*keyOverhead + perEntry
	}
	if n > l.MaxBytes {
		return fmt.Errorf("%w: about %d bytes, the backend accepts %d per transaction: write less per transaction", ErrTooLarge, n, l.MaxBytes)
	}
	return nil
}

func (t *Txn) record(v Versioned) {
	if t.readOnly {
		return
	}
	if t.reads == nil {
		t.reads = make(map[string]int64)
	}
	if _, ok := t.reads[string(v.Key)]; !ok {
		t.reads[string(v.Key)] = v.ModRev
	}
}

func present(v Versioned) []byte {
	if v.ModRev == 0 {
		return nil
	}
	if v.Value == nil {
		return []byte{}
	}
	return v.Value
}

// Get implements Tx.
func (t *Txn) Get(key []byte) ([]byte, error) {
	vs, err := t.GetMany(key)
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// GetMany implements Tx.
func (t *Txn) GetMany(keys ...[]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	var fetch [][]byte
	var at []int
	for i, k := range keys {
		if w, ok := t.writes[string(k)]; ok {
			if !w.Delete {
				out[i] = append([]byte{}, w.Value...)
			}
			continue
		}
		fetch = append(fetch, k)
		at = append(at, i)
	}
	if len(fetch) == 0 {
		return out, nil
	}
	vs, err := t.snap.Get(t.ctx, fetch)
	if err != nil {
		return nil, err
	}
	for j, v := range vs {
		v.Key = fetch[j]
		t.record(v)
		out[at[j]] = present(v)
	}
	return out, nil
}

// Scan implements Tx.
func (t *Txn) Scan(start, end []byte, limit int) ([]KV, []byte, error) {
	inRange := func(k []byte, hi []byte) bool {
		return bytes.Compare(k, start) >= 0 && (hi == nil || bytes.Compare(k, hi) < 0)
	}
	// Buffered deletes can hide fetched keys: fetch that many more.
	var buffered []Write
	dels := 0
	for _, w := range t.writes {
		if inRange(w.Key, end) {
			buffered = append(buffered, w)
			if w.Delete {
				dels++
			}
		}
	}
	fetchLimit := 0
	if limit > 0 {
		fetchLimit = limit + dels
	}
	page, more, rev, err := t.snap.Scan(t.ctx, start, end, fetchLimit)
	if err != nil {
		return nil, nil, err
	}
	bound := end
	if more && len(page) > 0 {
		bound = After(page[len(page)-1].Key)
	}
	// Merge the page with buffered writes below bound.
	sort.Slice(buffered, func(i, j int) bool { return bytes.Compare(buffered[i].Key, buffered[j].Key) < 0 })
	var out []KV
	i, j := 0, 0
	for i < len(page) || j < len(buffered) {
		if j < len(buffered) && !inRange(buffered[j].Key, bound) {
			buffered = buffered[:j]
			continue
		}
		switch {
		case j >= len(buffered) || (i < len(page) && bytes.Compare(page[i].Key, buffered[j].Key) < 0):
			out = append(out, KV{Key: page[i].Key, Value: present(page[i])})
			i++
		case i >= len(page) || bytes.Compare(buffered[j].Key, page[i].Key) < 0:
			if !buffered[j].Delete {
				out = append(out, KV{Key: append([]byte{}, buffered[j].Key...), Value: append([]byte{}, buffered[j].Value...)})
			}
			j++
		default: // same key: the buffered write wins
			if !buffered[j].Delete {
				out = append(out, KV{Key: page[i].Key, Value: append([]byte{}, buffered[j].Value...)})
			}
			i++
			j++
		}
	}
	truncated := limit > 0 && len(out) > limit
	if truncated {
		out = out[:limit]
	}
	var next []byte
	switch {
	case truncated:
		next = After(out[len(out)-1].Key)
	case more:
		next = bound
	}
	if !t.readOnly {
		rangeEnd := bound
		if truncated {
			rangeEnd = next
		}
		t.ranges = append(t.ranges, Range{Start: append([]byte{}, start...), End: rangeEnd, Rev: rev})
		for _, v := range page {
			if inRange(v.Key, rangeEnd) {
				t.record(v)
			}
		}
	}
	return out, next, nil
}

// Put implements Tx.
func (t *Txn) Put(key, value []byte) {
	t.write(Write{Key: append([]byte{}, key...), Value: append([]byte{}, value...)})
}

// Delete implements Tx.
func (t *Txn) Delete(key []byte) {
	t.write(Write{Key: append([]byte{}, key...), Delete: true})
}

func (t *Txn) write(w Write) {
	if t.readOnly {
		t.err = ErrReadOnly
		return
	}
	if t.writes == nil {
		t.writes = make(map[string]Write)
	}
	t.writes[string(w.Key)] = w
}
