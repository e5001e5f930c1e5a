package client

import (
	"context"
	"errors"

	"github.com/weftfs/weft/internal/meta"
)

// Prefetch for strided readers. A handle whose reads are about n bytes at
// a constant stride greater than n (readPattern) gets its next records
// read ahead, each as a range of the stripes it falls in, instead of the
// whole stripes: N tasks reading records interleaved in one shared file
// each use 1/N of every stripe, and stripe readahead would read the rest
// in vain. The records prefetched are bounded by the Client's PrefetchCap
// and maxStrideAhead per handle, and by maxRanges and CacheBytes per file.

// maxStrideAhead is the most records prefetched ahead of one strided
// reader (fewer if PrefetchCap allows fewer).
const maxStrideAhead = 2

// maxRanges is the most prefetched records one file holds, over all its
// strided readers; past it the oldest is dropped.
const maxRanges = 256

// rangeEntry is a prefetched record piece: bytes [within, within+n) of
// stripe idx in generation gen, or its loading. gen, data and err are set
// before ready is closed and never change after; served is guarded by the
// inode's mu.
type rangeEntry struct {
	idx    int64
	within int
	n      int
	gen    uint64
	ready  chan struct{}
	data   []byte
	err    error
	served spans
}

// dropRangeLocked forgets ranges[i], releases its bytes and counts what
// no read used of it as prefetched in vain.
func (sc *stripeCache) dropRangeLocked(i int) {
	r := sc.ranges[i]
	sc.bytes.Add(-int64(r.n))
	if sc.unread != nil {
		sc.unread.Add(int64(r.n - r.served.size()))
	}
	sc.ranges = append(sc.ranges[:i], sc.ranges[i+1:]...)
}

// findRangeLocked returns the index of the range of stripe idx that
// covers [within, within+n), or -1. A range still loading does not know
// its generation yet: its reader checks it once loaded.
func (sc *stripeCache) findRangeLocked(idx int64, within, n int) int {
	for i, r := range sc.ranges {
		if r.idx == idx && r.within <= within && within+n <= r.within+r.n {
			return i
		}
	}
	return -1
}

// rangeHit fills dst with bytes [within, within+len(dst)) of stripe s from
// the prefetched records that hold them (waiting for those loading) and
// reads the rest, if any, from the block services; it reports false, having
// done nothing, when no prefetched record overlaps the range. A record read
// whole is dropped: a strided reader does not come back. (The kernel
// splits and widens a strided reader's reads at its page cache's edges,
// so one read may take part of one record and part of the next.)
func (ino *inode) rangeHit(ctx context.Context, idx int64, s meta.Stripe, within int, dst []byte) bool {
	lo, hi := within, within+len(dst)
	ino.mu.Lock()
	var over []*rangeEntry
	for _, r := range ino.cache.ranges {
		if r.idx == idx && r.within < hi && lo < r.within+r.n {
			over = append(over, r)
		}
	}
	ino.mu.Unlock()
	var got spans
	var used []*rangeEntry
	for _, r := range over {
		select {
		case <-r.ready:
		case <-ctx.Done():
			return false
		}
		if r.err != nil || r.gen != s.Gen {
			continue
		}
		a, b := max(lo, r.within), min(hi, r.within+r.n)
		copy(dst[a-lo:b-lo], r.data[a-r.within:b-r.within])
		got = got.add(a-lo, b-lo)
		used = append(used, r)
	}
	if len(used) == 0 {
		return false
	}
	// The bytes no record held, read now.
	at := 0
	for _, g := range append(got, span{len(dst), len(dst)}) {
		if at < g.lo {
			if err := ino.readStripe(ctx, s, lo+at, g.lo-at, dst[at:g.lo]); err != nil {
				return false
			}
		}
		at = g.hi
	}
	ino.c.st.hits.Add(1)
	ino.mu.Lock()
	defer ino.mu.Unlock()
	for _, r := range used {
		a, b := max(lo, r.within), min(hi, r.within+r.n)
		r.served = r.served.add(a-r.within, b-r.within)
		if r.served.covers(0, r.n) {
			for j, x := range ino.cache.ranges {
				if x == r {
					ino.cache.dropRangeLocked(j)
					break
				}
			}
		}
	}
	return true
}

// prefetchStrided reads ahead of a strided reader whose last read was n
// bytes at off: the records at off+stride, off+2·stride, … (below size),
// each widened by slack bytes on both sides (how far reads have strayed
// from the stride: kernel page rounding), from the first not yet
// prefetched (*queued, the start of the furthest record queued for this
// handle) on, as long as readahead slots, cache bytes and the cap allow.
func (ino *inode) prefetchStrided(off int64, n int, stride, slack, size int64, queued *int64) {
	c := ino.c
	span := int64(n) + 2*slack
	ahead := int64(maxStrideAhead)
	if c.prefetchCap > 0 {
		ahead = min(ahead, c.prefetchCap/span)
	}
	for j := int64(1); j <= ahead; j++ {
		at := off + j*stride
		lo, hi := max(at-slack, 0), min(at+int64(n)+slack, size)
		if lo >= hi {
			return
		}
		if at <= *queued {
			continue
		}
		if !ino.queueRange(lo, hi) {
			return
		}
		*queued = at
	}
}

// queueRange starts loading file bytes [lo, hi) as prefetched record
// pieces, one per stripe they fall in, skipping pieces already held. It
// reports false if it ran out of readahead slots or cache bytes.
func (ino *inode) queueRange(lo, hi int64) bool {
	c := ino.c
	for pos := lo; pos < hi; {
		idx, within := pos/ino.ss, int(pos%ino.ss)
		m := int(min(hi-pos, ino.ss-int64(within)))
		pos += int64(m)
		ino.mu.Lock()
		held := ino.cache.findRangeLocked(idx, within, m) >= 0
		ino.mu.Unlock()
		if held {
			continue
		}
		if c.cached.Load()+int64(m) > c.maxCache {
			return false
		}
		select {
		case c.rasem <- struct{}{}:
		default:
			return false
		}
		// The record is held (its bytes reserved) from now on, so that a
		// read that comes before the load ends waits for it.
		r := &rangeEntry{idx: idx, within: within, n: m, ready: make(chan struct{})}
		ino.mu.Lock()
		ino.cache.bytes.Add(int64(m))
		ino.cache.ranges = append(ino.cache.ranges, r)
		for len(ino.cache.ranges) > maxRanges {
			ino.cache.dropRangeLocked(0)
		}
		ino.mu.Unlock()
		if !c.goBackground(func() {
			defer func() { <-c.rasem }()
			ino.loadRange(r)
		}) {
			<-c.rasem
			ino.mu.Lock()
			ino.cache.forgetRangeLocked(r)
			ino.mu.Unlock()
			close(r.ready)
			return false
		}
	}
	return true
}

// loadRange reads r's bytes from its stripe. A hole or a failed read
// leaves r failed and forgotten (never prefetched: not counted unread).
func (ino *inode) loadRange(r *rangeEntry) {
	c := ino.c
	s, ok, err := ino.stripe(c.ctx, r.idx, false)
	switch {
	case err != nil:
		r.err = err
	case !ok:
		r.err = errHole
	default:
		data := make([]byte, r.n)
		if r.err = ino.readStripe(c.ctx, s, r.within, r.n, data); r.err == nil {
			r.gen, r.data = s.Gen, data
			c.st.prefetched.Add(int64(r.n))
			c.st.stridedRecords.Add(1)
		}
	}
	if r.err != nil {
		ino.mu.Lock()
		ino.cache.forgetRangeLocked(r)
		ino.mu.Unlock()
	}
	close(r.ready)
}

// errHole fails the prefetch of a record in a hole (a read of it is
// served as zeros without a block read anyway).
var errHole = errors.New("a hole")

// forgetRangeLocked drops r, if the file still holds it, without counting
// it as prefetched in vain (it was not prefetched).
func (sc *stripeCache) forgetRangeLocked(r *rangeEntry) {
	for j, x := range sc.ranges {
		if x == r {
			r.served = spans{}.add(0, r.n)
			sc.dropRangeLocked(j)
			return
		}
	}
}
