package client

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/weftfs/weft/internal/qos"
)

// startWrite moves buffered stripe idx to inflight and writes it out on a
// background goroutine, once one of the Client's write-out slots is free;
// ctx bounds only the wait for the slot. It reports whether it started a
// write-out: not when idx is no longer buffered, is being written out
// already (the write-out of the newer data waits for the older one's
// commit), a Truncate is in progress, or ctx ended.
func (ino *inode) startWrite(ctx context.Context, idx int64) bool {
	c := ino.c
	select {
	case c.wsem <- struct{}{}:
	case <-ctx.Done():
		return false
	case <-c.ctx.Done():
		return false
	}
	return ino.startWriteSlot(idx)
}

// tryStartWrite is startWrite if a write-out slot is free at once; it
// does not wait for one.
func (ino *inode) tryStartWrite(idx int64) bool {
	select {
	case ino.c.wsem <- struct{}{}:
		return ino.startWriteSlot(idx)
	default:
		return false
	}
}

// startWriteSlot is startWrite once it holds a write-out slot (which it
// hands to the write-out, or gives back).
func (ino *inode) startWriteSlot(idx int64) bool {
	c := ino.c
	ino.mu.Lock()
	d := ino.dirty[idx]
	if d == nil || ino.inflight[idx] != nil || ino.truncating {
		ino.mu.Unlock()
		<-c.wsem
		return false
	}
	delete(ino.dirty, idx)
	ino.inflight[idx] = d
	ino.mu.Unlock()
	if !c.goBackground(func() { ino.writeOut(d) }) {
		ino.mu.Lock()
		delete(ino.inflight, idx)
		ino.requeueLocked(d, ErrClosed)
		ino.signalLocked()
		ino.mu.Unlock()
		<-c.wsem
		return false
	}
	return true
}

// writeOut writes in-flight stripe d and records the outcome: the
// committed stripe map on success, d back in the buffer (merged under any
// newer writes) with its error on failure. It holds a write-out slot.
func (ino *inode) writeOut(d *dstripe) {
	c := ino.c
	s, err := ino.writeStripe(qos.WithPID(c.ctx, d.pid), d)
	<-c.wsem
	ino.mu.Lock()
	delete(ino.inflight, d.idx)
	restart := false
	if err != nil {
		c.log.Warn("write-out failed; data stays buffered", "lin", uint64(ino.lin), "stripe", d.idx, "err", err)
		ino.requeueLocked(d, err)
	} else {
		ino.maps[d.idx] = mapEntry{s: s, ok: len(s.Units) > 0 || s.IsInline(), at: time.Now()} // neither: a hole
		ino.mapEpoch++
		ino.cache.dropLocked(d.idx)
		ino.dropLocked(d)
		nd := ino.dirty[d.idx]
		restart = nd != nil && nd.ext.covers(0, int(ino.ss))
	}
	ino.signalLocked()
	ino.mu.Unlock()
	if restart {
		ino.startWrite(c.ctx, d.idx)
	}
}

// requeueLocked puts a stripe whose write-out failed back in the buffer
// with its error, under the writes that arrived meanwhile.
func (ino *inode) requeueLocked(d *dstripe, err error) {
	d.err = err
	if nd := ino.dirty[d.idx]; nd != nil {
		d.addPID(nd.pid)
		for _, r := range nd.ext {
			nd.each(r.lo, r.hi, func(off int, b []byte) { ino.put(d, off, b) })
			d.ext = d.ext.add(r.lo, r.hi)
		}
		ino.dropLocked(nd)
	}
	ino.dirty[d.idx] = d
}

// noSpaceGrace is how long a flush keeps retrying, every noSpaceRetry, a
// stripe refused for want of space: blocks that copy-on-write replaced
// are freed by their node's drainer about a second later, so a pool near
// full under rewrites finds room again without the writer seeing ENOSPC.
const (
	noSpaceGrace = 3 * time.Second
	noSpaceRetry = 250 * time.Millisecond
)

// flush writes out every stripe buffered when it is called and waits for
// their commits. A stripe whose write-out fails during the flush is not
// retried by it — its error is returned and it stays buffered — unless
// it failed for want of space, which is retried for noSpaceGrace.
func (ino *inode) flush(ctx context.Context) error {
	ino.mu.Lock()
	want := map[int64]bool{}
	for idx := range ino.dirty {
		want[idx] = true
	}
	for idx := range ino.inflight {
		want[idx] = true
	}
	ino.mu.Unlock()
	tried := map[int64]bool{}
	start := time.Now()
	for {
		wait := false
		ino.mu.Lock()
		for ino.truncating || len(ino.inflight) > 0 {
			if err := ino.waitLocked(ctx); err != nil {
				ino.mu.Unlock()
				return err
			}
		}
		var todo []int64
		for idx := range want {
			d := ino.dirty[idx]
			switch {
			case d == nil:
				delete(want, idx)
			case tried[idx] && errors.Is(d.err, ErrNoSpace) && time.Since(start) < noSpaceGrace:
				wait = true
				todo = append(todo, idx)
			case tried[idx] && d.err != nil:
				err := d.err
				ino.mu.Unlock()
				return err
			case tried[idx]:
				delete(want, idx) // written; buffered again by a later write
			default:
				todo = append(todo, idx)
			}
		}
		ino.mu.Unlock()
		if len(todo) == 0 {
			return nil
		}
		if wait {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(noSpaceRetry):
			}
		}
		slices.Sort(todo)
		for _, idx := range todo {
			if ino.startWrite(ctx, idx) {
				tried[idx] = true
			} else if err := ctx.Err(); err != nil {
				return err
			} else if err := ino.c.closedErr(); err != nil {
				return err
			}
		}
	}
}

// bgWriteOuts is how many stripes of one file the write-behind of
// makeRoom keeps in flight while buffered bytes are past bgDirty of a
// limit but not at it.
const bgWriteOuts = 4

// bgDirty is the fraction of MaxDirty (and MaxDirtyTotal) past which
// makeRoom starts write-outs in the background: 3/4.
func bgDirty(limit int64) int64 { return limit / 4 * 3 }

// makeRoom keeps the buffered bytes (dirty and in flight) within MaxDirty
// for the file and MaxDirtyTotal for the Client before n more are
// buffered. Past three quarters of a limit, it starts write-outs of the
// file's dirtiest stripes (those holding the most buffered bytes, so that
// each read-modify-write of a stripe carries as many writes as it can) in
// the background, without waiting. At a limit, it starts as many of the
// file's as it takes to come back under (at most all of them: the
// Client's other files are written out by their own writers) and waits
// for their commits. A stripe whose write-out failed is not started again
// by one call; when only such stripes are left, it flushes the file
// (which retries them once) and returns the flush's error.
func (ino *inode) makeRoom(ctx context.Context, n int) error {
	c := ino.c
	var tried map[int64]bool
	for {
		ino.mu.Lock()
		total := c.dirty.Load() + int64(n)
		over := max(ino.buffered+int64(n)-c.maxDirty, min(total-c.maxTotal, ino.buffered))
		if over <= 0 || !ino.hasStateLocked() {
			var todo []int64
			if (ino.buffered+int64(n) > bgDirty(c.maxDirty) || total > bgDirty(c.maxTotal)) && len(ino.inflight) < bgWriteOuts {
				todo = ino.dirtiestLocked(1, nil, true)
			}
			ino.mu.Unlock()
			for _, idx := range todo {
				ino.tryStartWrite(idx)
			}
			return nil
		}
		var flying int64
		for _, d := range ino.inflight {
			flying += d.mem()
		}
		var todo []int64
		if flying < over {
			todo = ino.dirtiestLocked(over-flying, tried, false)
		}
		if len(todo) == 0 && len(ino.inflight) == 0 && !ino.truncating {
			// Only stripes whose write-out failed (or that were written
			// and buffered again) are left.
			ino.mu.Unlock()
			if err := ino.flush(ctx); err != nil {
				return err
			}
			if tried == nil {
				return nil // the file has nothing buffered: go on
			}
			tried = nil
			continue
		}
		ino.mu.Unlock()
		for _, idx := range todo {
			if ino.startWrite(ctx, idx) {
				if tried == nil {
					tried = map[int64]bool{}
				}
				tried[idx] = true
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.closedErr(); err != nil {
			return err
		}
		ino.mu.Lock()
		if len(ino.inflight) > 0 || ino.truncating {
			if err := ino.waitLocked(ctx); err != nil {
				ino.mu.Unlock()
				return err
			}
		}
		ino.mu.Unlock()
	}
}

// dirtiestLocked returns the buffered stripes not in flight, not in skip
// and, with noFailed, not those whose last write-out failed (the
// background write-behind leaves them to flushes), those holding the most
// bytes first, enough of them to hold at least want bytes (all of them if
// they hold less).
func (ino *inode) dirtiestLocked(want int64, skip map[int64]bool, noFailed bool) []int64 {
	type cand struct {
		idx int64
		mem int64
	}
	var cs []cand
	var best cand
	for idx, d := range ino.dirty {
		if ino.inflight[idx] == nil && !skip[idx] && (!noFailed || d.err == nil) {
			c := cand{idx, d.mem()}
			cs = append(cs, c)
			if c.mem > best.mem {
				best = c
			}
		}
	}
	if len(cs) > 0 && best.mem >= want {
		return []int64{best.idx} // the background's case: no sort
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(b.mem, a.mem) })
	var out []int64
	for _, c := range cs {
		if want <= 0 {
			break
		}
		out = append(out, c.idx)
		want -= c.mem
	}
	return out
}
