package client

import (
	"context"
	"fmt"
	"time"

	"github.com/weftfs/weft/internal/meta"
)

// mapEntry is a cached stripe map: the stripe, or ok false for a hole.
type mapEntry struct {
	s  meta.Stripe
	ok bool
	at time.Time
}

// shortMaps is the most stripes a file may have left from the one read
// for their maps to be read key by key (meta.GetStripesAt) rather than
// scanned.
const shortMaps = 4

// maxMapEntries bounds an inode's stripe map cache (about 64 MiB of maps
// is never needed; a sequential pass refills it as it goes).
const maxMapEntries = 16 * mapBatch

// stripe returns the map of stripe idx, or ok false if the stripe is a
// hole. It serves from the cache unless fresh is set or the entry is older
// than MapTTL; a miss reads the maps of up to mapBatch stripes from idx on
// in one meta call (key by key, from the metadata cache, when at most
// shortMaps stripes of the file are left from idx).
//
// A read that raced with a local commit (the inode's map epoch moved) is
// returned but not cached: the commit's own entry is newer.
func (ino *inode) stripe(ctx context.Context, idx int64, fresh bool) (meta.Stripe, bool, error) {
	ino.mu.Lock()
	e, hit := ino.maps[idx]
	epoch := ino.mapEpoch
	ino.mu.Unlock()
	if hit && !fresh && time.Since(e.at) < ino.c.mapTTL {
		return e.s, e.ok, nil
	}
	if fresh {
		// A map found stale must be read as the store has it now, not as
		// a metadata cache may still hold it.
		if err := ino.c.meta.Sync(ctx); err != nil {
			return meta.Stripe{}, false, fmt.Errorf("client: stripe map of LIN %d stripe %d: %w", ino.lin, idx, err)
		}
	}
	// A file of a few stripes has its maps read key by key, which the
	// metadata cache answers; a longer run is scanned, up to mapBatch.
	ino.mu.Lock()
	end := (ino.size + ino.ss - 1) / ino.ss // the file's stripes, buffered writes included
	ino.mu.Unlock()
	var got []meta.Stripe
	var err error
	known := idx + mapBatch - 1
	if short := end - idx; short > 0 && short <= shortMaps {
		got, err = ino.c.meta.GetStripesAt(ctx, ino.lin, uint64(idx), uint64(end))
		known = end - 1
	} else {
		got, err = ino.c.meta.GetStripes(ctx, ino.lin, uint64(idx), mapBatch)
		if len(got) == mapBatch {
			known = min(known, int64(got[len(got)-1].Index))
		}
	}
	if err != nil {
		return meta.Stripe{}, false, fmt.Errorf("client: stripe map of LIN %d stripe %d: %w", ino.lin, idx, err)
	}
	var out meta.Stripe
	var ok bool
	if len(got) > 0 && got[0].Index == uint64(idx) {
		out, ok = got[0], true
	}
	now := time.Now()
	ino.mu.Lock()
	defer ino.mu.Unlock()
	if ino.mapEpoch != epoch {
		return out, ok, nil
	}
	if len(ino.maps) > maxMapEntries {
		clear(ino.maps)
	}
	// Every index from idx up to known (the last stripe returned, or the
	// whole batch or file if fewer came back) not returned is a hole.
	for j := idx; j <= known; j++ {
		ino.maps[j] = mapEntry{at: now}
	}
	for _, s := range got {
		ino.maps[int64(s.Index)] = mapEntry{s: s, ok: true, at: now}
	}
	return out, ok, nil
}

// forgetMapLocked drops the cached map of stripe idx.
func (ino *inode) forgetMapLocked(idx int64) {
	delete(ino.maps, idx)
	ino.mapEpoch++
}

// clearMapsLocked drops every cached stripe map.
func (ino *inode) clearMapsLocked() {
	clear(ino.maps)
	ino.mapEpoch++
}
