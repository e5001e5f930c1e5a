package client

import (
	"context"
	"sync/atomic"

	"github.com/weftfs/weft/internal/meta"
)

// stripeCache holds the data of whole stripes of one file, read ahead of a
// sequential reader or read whole for it, keyed by stripe index and valid
// for one stripe generation. It holds at most max entries that are not
// loading (about Readahead+2 stripes), evicting the least recently used,
// and its entries count against the Client's CacheBytes (bytes, shared by
// all files). It is guarded by the inode's mu.
type stripeCache struct {
	max     int
	tick    uint64
	entries map[int64]*cacheEntry
	bytes   *atomic.Int64 // the Client's cached bytes
	limit   int64         // the Client's CacheBytes
	// unread counts the bytes prefetched (stripes read ahead, records
	// prefetched for a strided reader) that were dropped before any read
	// used them: the Client's PrefetchUnreadBytes.
	unread *atomic.Int64
	// ranges are records prefetched for strided readers (see rangeEntry),
	// oldest first, at most maxRanges.
	ranges []*rangeEntry
}

// cacheEntry is one stripe's data, or its loading. gen, data and err are
// set before ready is closed and never change after.
type cacheEntry struct {
	gen   uint64
	ready chan struct{}
	data  []byte // the stripe's DataLen bytes
	err   error
	used  uint64 // last use tick
	size  int64  // bytes reserved against CacheBytes
	// prefetched: loaded by readahead, not for a reader waiting on it;
	// served: the bytes of data readers have used (guarded by the
	// inode's mu), so that what was read ahead in vain can be counted.
	prefetched bool
	served     spans
}

// getLocked returns the entry of stripe idx (possibly still loading), or nil.
func (sc *stripeCache) getLocked(idx int64) *cacheEntry {
	e := sc.entries[idx]
	if e != nil {
		sc.tick++
		e.used = sc.tick
	}
	return e
}

// reserveLocked reserves n bytes for a new entry of idx, first evicting
// entries of this file past max, and reports whether the Client's budget
// allows it.
func (sc *stripeCache) reserveLocked(n int64) bool {
	if sc.bytes.Add(n) > sc.limit {
		sc.bytes.Add(-n)
		return false
	}
	return true
}

// putLocked adds a loading entry for idx (its size reserved), evicting
// loaded entries past max.
func (sc *stripeCache) putLocked(idx int64, e *cacheEntry) {
	sc.tick++
	e.used = sc.tick
	sc.dropLocked(idx)
	sc.entries[idx] = e
	for len(sc.entries) > max(sc.max, 1) {
		// Stripes readers have used go first, least recently used first;
		// stripes read ahead and not used yet only when there are no
		// others (evicting them would read them twice).
		victim, oldest, usedOne := int64(-1), ^uint64(0), false
		for j, x := range sc.entries {
			if j == idx || !loaded(x) {
				continue
			}
			u := len(x.served) > 0 || !x.prefetched
			if (u && !usedOne) || (u == usedOne && x.used < oldest) {
				victim, oldest, usedOne = j, x.used, u
			}
		}
		if victim < 0 {
			return
		}
		sc.dropLocked(victim)
	}
}

// dropLocked forgets stripe idx and releases its bytes.
func (sc *stripeCache) dropLocked(idx int64) {
	if e := sc.entries[idx]; e != nil {
		sc.bytes.Add(-e.size)
		if e.prefetched && sc.unread != nil {
			sc.unread.Add(e.size - int64(e.served.size()))
		}
		delete(sc.entries, idx)
	}
}

// clearLocked forgets every stripe and every prefetched record.
func (sc *stripeCache) clearLocked() {
	for idx := range sc.entries {
		sc.dropLocked(idx)
	}
	for len(sc.ranges) > 0 {
		sc.dropRangeLocked(0)
	}
}

// loaded reports whether e finished loading.
func loaded(e *cacheEntry) bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// overlay is buffered data over a range of a stripe: the bytes in ext
// (relative to the range start) of data.
type overlay struct {
	ext  spans
	data []byte
}

// overlayLocked copies the buffered bytes of stripe idx in [within,
// within+n) — in-flight ones, then newer dirty ones over them — or returns
// nil if there are none.
func (ino *inode) overlayLocked(idx int64, within, n int) *overlay {
	var ov *overlay
	for _, d := range []*dstripe{ino.inflight[idx], ino.dirty[idx]} {
		if d == nil {
			continue
		}
		for _, r := range d.ext.within(within, within+n) {
			if ov == nil {
				ov = &overlay{data: make([]byte, n)}
			}
			d.copyTo(ov.data[r.lo-within:r.hi-within], r.lo, r.hi)
			ov.ext = ov.ext.add(r.lo-within, r.hi-within)
		}
	}
	return ov
}

// readChunk fills dst with the file bytes at offset within of stripe idx
// (dst does not cross the stripe's end): buffered bytes from the overlay,
// the rest from the cache or the block services. A sequential reader
// loads whole stripes into the cache. With view, when the cache holds all
// of them and nothing buffered lies over them, it returns the cached
// bytes instead of copying them (see ReadAtView); otherwise nil.
//
// The overlay is copied before the stripe map is looked up: a write-out
// that commits in between leaves the new map cached, so the read sees the
// data either way.
func (ino *inode) readChunk(ctx context.Context, dst []byte, idx int64, within int, seq, view bool) ([]byte, error) {
	ino.mu.Lock()
	ov := ino.overlayLocked(idx, within, len(dst))
	ino.mu.Unlock()
	if ov != nil && ov.ext.covers(0, len(dst)) {
		copy(dst, ov.data)
		return nil, nil
	}
	s, ok, err := ino.stripe(ctx, idx, false)
	if err != nil {
		return nil, err
	}
	switch {
	case !ok:
		clear(dst)
	default:
		if data, hit := ino.cached(ctx, idx, s, seq, within, len(dst)); hit {
			if view && ov == nil && within+len(dst) <= len(data) {
				return data[within : within+len(dst) : within+len(dst)], nil
			}
			copyStripe(dst, data, within)
			break
		}
		if ino.rangeHit(ctx, idx, s, within, dst) {
			break
		}
		if err := ino.readStripe(ctx, s, within, len(dst), dst); err != nil {
			return nil, err
		}
	}
	if ov != nil {
		for _, r := range ov.ext {
			copy(dst[r.lo:r.hi], ov.data[r.lo:r.hi])
		}
	}
	return nil, nil
}

// copyStripe copies stripe data from offset within into dst, zeros past
// the data.
func copyStripe(dst, data []byte, within int) {
	n := 0
	if within < len(data) {
		n = copy(dst, data[within:])
	}
	clear(dst[n:])
}

// cached returns the cached data of stripe s if the cache has it (waiting
// for it if it is loading), and notes [within, within+n) of it as read.
// If not and load is set, it loads the whole stripe into the cache first.
func (ino *inode) cached(ctx context.Context, idx int64, s meta.Stripe, load bool, within, n int) ([]byte, bool) {
	c := ino.c
	ino.mu.Lock()
	e := ino.cache.getLocked(idx)
	if e != nil && loaded(e) && (e.err != nil || e.gen != s.Gen) {
		e = nil
	}
	ino.mu.Unlock()
	if e == nil {
		c.st.misses.Add(1)
		if !load {
			return nil, false
		}
		if e = ino.fill(ctx, idx, s, false); e == nil {
			return nil, false
		}
	} else {
		c.st.hits.Add(1)
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		return nil, false
	}
	if e.err != nil || e.gen != s.Gen {
		return nil, false
	}
	ino.mu.Lock()
	e.served = e.served.add(within, min(within+n, len(e.data)))
	ino.mu.Unlock()
	return e.data, true
}

// fill loads stripe s into the cache (unless an entry of its generation is
// there or loading) and returns the entry, loaded or failed; nil if the
// Client's CacheBytes are used up. prefetched marks a load by readahead.
func (ino *inode) fill(ctx context.Context, idx int64, s meta.Stripe, prefetched bool) *cacheEntry {
	ino.mu.Lock()
	if e := ino.cache.getLocked(idx); e != nil && e.gen == s.Gen && (!loaded(e) || e.err == nil) {
		ino.mu.Unlock()
		return e
	}
	e := &cacheEntry{gen: s.Gen, ready: make(chan struct{}), size: int64(s.DataLen), prefetched: prefetched}
	if !ino.cache.reserveLocked(e.size) {
		ino.mu.Unlock()
		return nil
	}
	ino.cache.putLocked(idx, e)
	ino.mu.Unlock()
	data := make([]byte, s.DataLen)
	e.err = ino.readStripe(ctx, s, 0, len(data), data)
	if e.err == nil {
		e.data = data
		if prefetched {
			ino.c.st.readahead.Add(1)
			ino.c.st.prefetched.Add(e.size)
		}
	}
	close(e.ready)
	if e.err != nil {
		ino.mu.Lock()
		if ino.cache.entries[idx] == e {
			ino.cache.dropLocked(idx)
		}
		ino.mu.Unlock()
	}
	return e
}

// prefetch loads up to Readahead stripes from stripe from on (those below
// size) into the cache in the background, skipping cached ones and holes,
// as long as readahead slots and cache bytes are free; no more than the
// Client's PrefetchCap bytes ahead.
func (ino *inode) prefetch(from, size int64) {
	c := ino.c
	ahead := int64(c.readahead)
	if c.prefetchCap > 0 {
		ahead = min(ahead, c.prefetchCap/ino.ss)
	}
	for j := from; j < from+ahead && j*ino.ss < size; j++ {
		ino.mu.Lock()
		e := ino.cache.entries[j]
		ino.mu.Unlock()
		if e != nil {
			continue
		}
		if c.cached.Load()+ino.ss > c.maxCache {
			return
		}
		select {
		case c.rasem <- struct{}{}:
		default:
			return
		}
		if !c.goBackground(func() {
			defer func() { <-c.rasem }()
			s, ok, err := ino.stripe(c.ctx, j, false)
			if err != nil || !ok {
				return
			}
			ino.fill(c.ctx, j, s, true)
		}) {
			<-c.rasem
			return
		}
	}
}
