package client

import (
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
		ino.maps[d.idx] = mapEntry{s: s, ok: len(s.Units) > 0, at: time.Now()} // no units: a hole
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
		ino.grow(d, len(nd.buf))
		for _, r := range nd.ext {
			copy(d.buf[r.lo:r.hi], nd.buf[r.lo:r.hi])
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

// makeRoom flushes the file when buffering n more bytes would pass
// MaxDirty. It returns the flush's error.
func (ino *inode) makeRoom(ctx context.Context, n int) error {
	ino.mu.Lock()
	over := ino.buffered+int64(n) > ino.c.maxDirty && ino.hasStateLocked()
	ino.mu.Unlock()
	if !over {
		return nil
	}
	return ino.flush(ctx)
}
