package client

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/weftfs/weft/internal/meta"
)

// Stats are a Client's counters since New, for a Prometheus collector and
// for tests. All are monotonic.
type Stats struct {
	// StripesWritten is the number of stripes committed.
	StripesWritten int64
	// InlineWritten is the number of stripes committed inline, their
	// bytes in the map (Config.InlineMax); StripesWritten counts them too.
	InlineWritten int64
	// HolesKept is the number of stripe write-outs whose bytes were all
	// zeros, committed as holes (nothing stored) instead.
	HolesKept int64
	// UnderProtectedWrites is the number of stripes written below their
	// protection: with fewer units than it asks, or on too few nodes or
	// drives for the tolerance their pool could give (left for repair).
	UnderProtectedWrites int64
	// BytesWritten is the file bytes accepted by WriteAt.
	BytesWritten int64
	// UnitBytesWritten is the bytes put to block services (data, parity
	// and copies).
	UnitBytesWritten int64
	// BytesRead is the file bytes returned by ReadAt.
	BytesRead int64
	// UnitBytesRead is the bytes fetched from block services.
	UnitBytesRead int64
	// DegradedReads is the number of stripe reads that reconstructed data
	// from parity or fell back to another copy.
	DegradedReads int64
	// UnreadableReads is the number of stripe reads that failed because
	// too few units could be read (lost data, or too many drives down):
	// the reader got an error (EIO).
	UnreadableReads int64
	// UnitErrors is the number of unit reads and writes that failed (not
	// found, corrupt, unreachable, no space).
	UnitErrors int64
	// CorruptUnits is the number of unit reads that failed a checksum.
	CorruptUnits int64
	// PutRetries is the number of units re-placed after a failed put.
	PutRetries int64
	// Conflicts is the number of stripe commits that lost the generation
	// compare-and-swap and were retried.
	Conflicts int64
	// OrphansEnqueued is the number of blocks the client wrote but did not
	// commit and sent to the delete queue.
	OrphansEnqueued int64
	// CacheHits and CacheMisses count stripe reads served from (or not
	// found in) the readahead cache.
	CacheHits, CacheMisses int64
	// ReadaheadStripes is the number of stripes prefetched.
	ReadaheadStripes int64
	// StridedRecords is the number of records prefetched for strided
	// readers (a record in two stripes counts twice).
	StridedRecords int64
	// PrefetchBytes is the number of bytes read ahead: stripes for
	// sequential readers, records for strided ones.
	PrefetchBytes int64
	// PrefetchUnreadBytes is the number of bytes read ahead that no read
	// used before they were dropped (evicted, invalidated, or the file
	// closed): the prefetch's waste.
	PrefetchUnreadBytes int64
	// LocalReads is the number of unit reads served straight from a drive
	// on this machine (short-circuit), not through a block service.
	LocalReads int64
	// LocalWrites is the number of units written straight into a drive on
	// this machine and adopted by its node (a staged write), not sent
	// through a block service.
	LocalWrites int64
	// UnsyncedWrites is the number of staged units written unsynced (of
	// files born under a delegation), and DataSyncs the number of data
	// barriers that synced drives' file systems for them (unsynced.go).
	UnsyncedWrites, DataSyncs int64
}

// counters are the live Stats.
type counters struct {
	stripesWritten, underProtected, bytesWritten, unitBytesWritten atomic.Int64
	bytesRead, unitBytesRead, degraded, unitErrors, corrupt        atomic.Int64
	putRetries, conflicts, orphans, hits, misses, readahead        atomic.Int64
	localReads, localWrites, unreadable, holesKept, inlineWritten  atomic.Int64
	prefetched, prefetchUnread, stridedRecords                     atomic.Int64
	seq                                                            atomic.Uint64 // random stream ids
	lastWarn                                                       atomic.Int64  // unix nanos of the last rate-limited warning
}

// Stats returns a snapshot of the counters.
func (c *Client) Stats() Stats {
	s := &c.st
	return Stats{
		StripesWritten: s.stripesWritten.Load(), UnderProtectedWrites: s.underProtected.Load(),
		BytesWritten: s.bytesWritten.Load(), UnitBytesWritten: s.unitBytesWritten.Load(),
		BytesRead: s.bytesRead.Load(), UnitBytesRead: s.unitBytesRead.Load(),
		DegradedReads: s.degraded.Load(), UnitErrors: s.unitErrors.Load(), CorruptUnits: s.corrupt.Load(),
		PutRetries: s.putRetries.Load(), Conflicts: s.conflicts.Load(), OrphansEnqueued: s.orphans.Load(),
		CacheHits: s.hits.Load(), CacheMisses: s.misses.Load(), ReadaheadStripes: s.readahead.Load(),
		StridedRecords: s.stridedRecords.Load(), PrefetchBytes: s.prefetched.Load(), PrefetchUnreadBytes: s.prefetchUnread.Load(),
		LocalReads: s.localReads.Load(), LocalWrites: s.localWrites.Load(), UnreadableReads: s.unreadable.Load(),
		HolesKept: s.holesKept.Load(), InlineWritten: s.inlineWritten.Load(),
		UnsyncedWrites: c.unsynced.writes.Load(), DataSyncs: c.unsynced.syncs.Load(),
	}
}

// NeedsRepair returns the stripes this Client found degraded (a unit
// missing, corrupt or unreachable) since New, in (LIN, index) order, at
// most 4096 of them. Meta has no "needs repair" record yet; until it has,
// this list, the DegradedReads counter and a warning per stripe are how
// the finding is reported.
func (c *Client) NeedsRepair() []meta.StripeRef {
	c.mu.Lock()
	out := make([]meta.StripeRef, 0, len(c.repair))
	for r := range c.repair {
		out = append(out, r)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b meta.StripeRef) int {
		return cmp.Or(cmp.Compare(a.LIN, b.LIN), cmp.Compare(a.Index, b.Index))
	})
	return out
}

// noteDegraded counts a degraded stripe read and, the first time the
// stripe is seen, records it and logs why.
func (c *Client) noteDegraded(lin meta.LIN, s meta.Stripe, why string) {
	c.st.degraded.Add(1)
	ref := meta.StripeRef{LIN: lin, Index: s.Index}
	c.mu.Lock()
	seen := c.repair[ref]
	if !seen && len(c.repair) < maxRepairNotes {
		c.repair[ref] = true
	}
	c.mu.Unlock()
	if !seen {
		c.log.Warn("degraded read: stripe needs repair", "lin", uint64(lin), "stripe", s.Index, "gen", s.Gen, "why", why)
	}
}

// noteUnreadable counts a stripe read that failed for too few units and,
// the first time this Client sees the file fail so, logs it by path: a
// reader retrying a lost range gets EIO each time, and the log names the
// file once (the lost-data list, `weft file lost list`, has the ranges).
func (c *Client) noteUnreadable(ctx context.Context, lin meta.LIN, s meta.Stripe, err error) {
	c.st.unreadable.Add(1)
	c.mu.Lock()
	seen := c.unreadable[lin]
	if !seen && len(c.unreadable) < maxRepairNotes {
		c.unreadable[lin] = true
	}
	c.mu.Unlock()
	if seen {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	path, perr := c.meta.Path(ctx, lin)
	if perr != nil {
		path = fmt.Sprintf("<LIN %d: %v>", lin, perr)
	}
	c.log.Error("file unreadable: reads of it fail (EIO) until the drives are back or the data is restored; logged once per file",
		"path", path, "lin", uint64(lin), "stripe", s.Index, "err", err)
}

// warnLimited logs a warning at most once per second.
func (c *Client) warnLimited(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := c.st.lastWarn.Load()
	if now-last < int64(time.Second) || !c.st.lastWarn.CompareAndSwap(last, now) {
		return
	}
	c.log.Warn(msg, args...)
}
