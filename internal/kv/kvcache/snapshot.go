package kvcache

import (
	"bytes"
	"context"

	"github.com/google/btree"

	"github.com/weftfs/weft/internal/kv"
)

// Reads and commits through the cache: the snapshot that answers from the
// cache where it can and from the inner store otherwise, and what a
// commit teaches the cache.

// pending is a read of the inner store in flight: changes to r delivered
// meanwhile are noted, so that the read does not fill the cache with a
// value older than one the cache has seen go by.
type pending struct {
	r       kv.Range
	w0      int64 // s.w when the read started
	changed int64 // newest change seen in r since
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
	// A View sees the deferred writes as they are now, before its inner
	// snapshot is taken: a batch committed meanwhile leaves the overlay
	// (commitNext), and a View reading the live overlay after that but the
	// inner store as of before it would see neither — half of a
	// transaction (an entry without its inode). The clone is copy-on-write.
	var ov *btree.BTreeG[*ovEntry]
	if b.view && s.overlay.Len() > 0 {
		ov = s.overlay.Clone()
	}
	s.mu.Unlock()
	cached := serving && (b.view || attempt == 0)
	// An optimistic attempt may read the inner store like a View (session
	// reads): its commit validates what it read, and a failure is decided
	// again on a strict snapshot.
	inner, err := s.inner.Backend(cached).Begin(ctx, attempt)
	if err != nil {
		return nil, err
	}
	return &snapshot{s: s, inner: inner, cached: cached, fill: serving, optimistic: cached && !b.view, overlay: ov}, nil
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
	// overlay is a View's copy of the deferred writes as of its Begin
	// (writeback.go), which it sees; nil for a transaction or when there
	// were none.
	overlay *btree.BTreeG[*ovEntry]
}

var _ kv.OptimisticSnapshot = (*snapshot)(nil)

func (sn *snapshot) Optimistic() bool { return sn.optimistic }

func (sn *snapshot) Revision() int64 { return sn.inner.Revision() }

func (sn *snapshot) Get(ctx context.Context, keys [][]byte) ([]kv.Versioned, error) {
	s := sn.s
	out := make([]kv.Versioned, len(keys))
	var fetch [][]byte
	var at []int
	if sn.cached || sn.overlay != nil {
		s.mu.Lock()
		serving := s.servingLocked() && sn.cached
		for i, k := range keys {
			if sn.overlay != nil {
				if e, ok := sn.overlay.Get(&ovEntry{w: kv.Write{Key: k}}); ok {
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
	if sn.overlay != nil {
		if ov := overlayIn(sn.overlay, start, end); len(ov) > 0 {
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
