package job

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// stepResult is what one step of a worker did; the runner rests
// accordingly (Garage's Busy | Idle).
type stepResult int

const (
	stepBusy stepResult = iota // did a unit of work: rest per the duty cycle
	stepIdle                   // found nothing to do: back off
)

// worker processes one task at a time, item by item. Only its own
// goroutine touches it.
type worker struct {
	m      *manager
	h      *heldTask
	job    *Job     // the view phases get, for h's phase
	batch  []uint64 // listed, not yet processed item keys
	listed bool     // the last listing returned fewer than BatchSize: h's range ends after batch
	saved  time.Time
	// pace is the time Process took per item in phase pacePhase (a moving
	// average; 0 before the first item): it sizes reservations (ahead).
	pace      time.Duration
	pacePhase int
}

// step does one unit of work: claim a task, list a batch of items,
// process one item, or finish a task; and checkpoints when one is due.
func (w *worker) step(ctx context.Context) stepResult {
	e := w.m.e
	if w.h == nil {
		job := w.m.snapshot()
		if job.State != Running || !job.PhaseSplit || job.Phase >= len(w.m.phases) {
			return stepIdle
		}
		h, err := w.m.acquire(ctx, job)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("claim task", "job", w.m.id, "err", err)
			}
			return stepIdle
		}
		if h == nil {
			return stepIdle
		}
		w.h, w.batch, w.listed, w.saved = h, nil, false, time.Now()
		if h.rec.Phase != w.pacePhase {
			w.pace, w.pacePhase = 0, h.rec.Phase
		}
		w.job = &Job{ID: job.ID, Type: job.Type, Params: job.Params, Phase: h.rec.Phase, Created: job.Created,
			Reports: earlierReports(job)}
		return stepBusy
	}
	if time.Since(w.saved) >= e.cfg.CheckpointInterval {
		if !w.save(ctx, false) {
			return stepBusy
		}
	}
	h := w.h
	phase := w.m.phases[h.rec.Phase]
	if len(w.batch) == 0 {
		if w.listed || h.rec.Cursor >= h.rec.To {
			h.rec.Cursor = max(h.rec.Cursor, h.rec.To)
			w.save(ctx, false)
			return stepBusy
		}
		var items []uint64
		err := e.retry(ctx, func() (err error) {
			items, err = phase.Items(ctx, e.cfg.Env, h.rec.Scope, h.rec.Cursor, h.rec.To, e.cfg.BatchSize)
			return err
		})
		if err == nil {
			err = checkItems(items, h.rec.Cursor, h.rec.To, e.cfg.BatchSize)
		}
		if err != nil {
			if ctx.Err() == nil {
				w.fail(ctx, fmt.Sprintf("phase %s: list items of scope %q in [%d, %d): %v", phase.Name(), h.rec.Scope, h.rec.Cursor, h.rec.To, err))
			}
			return stepBusy
		}
		w.batch, w.listed = items, len(items) < e.cfg.BatchSize
		return stepBusy
	}
	item := w.batch[0]
	if item >= h.rec.To { // a steal lowered the end: the rest is the thief's
		w.batch, w.listed = nil, true
		return stepBusy
	}
	if item >= h.rec.Reserved {
		w.reserve(ctx, w.batch[:w.ahead()])
		return stepBusy
	}
	var res ItemResult
	start := time.Now()
	err := e.retry(ctx, func() (err error) {
		res, err = phase.Process(ctx, e.cfg.Env, w.job, h.rec.Scope, item)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			w.fail(ctx, fmt.Sprintf("phase %s: item %d of scope %q: %v", phase.Name(), item, h.rec.Scope, err))
		}
		return stepBusy // interrupted: the item is processed again after resume
	}
	if d := time.Since(start); w.pace == 0 {
		w.pace = d
	} else {
		w.pace = (3*w.pace + d) / 4
	}
	w.batch = w.batch[1:]
	h.rec.Cursor = item + 1
	h.rec.add(res)
	w.m.items.Add(1)
	e.m.itemsProcessed.Add(1)
	if res.Bytes > 0 {
		e.m.bytes.Add(uint64(res.Bytes))
	}
	return stepBusy
}

// reserve writes the end of items (the next listed ones) into the held
// task before any of them is processed, so that a steal splits after it
// (stealSplit): no item is processed by two nodes. The checkpoint is a
// compare-and-swap; a steal that won first lowered To, and the items at or
// past it are the thief's (the step drops them). It reports whether the
// worker still holds the task.
func (w *worker) reserve(ctx context.Context, items []uint64) bool {
	if len(items) == 0 {
		return true
	}
	end := items[len(items)-1] + 1
	if end <= w.h.rec.Reserved {
		return true
	}
	prev := w.h.rec.Reserved
	w.h.rec.Reserved = end
	err := w.m.e.checkpoint(ctx, w.h, false)
	w.saved = time.Now()
	if errors.Is(err, errLost) {
		w.m.e.m.tasksLost.Add(1)
		w.m.hold(w.h, false)
		w.h, w.batch, w.job = nil, nil, nil
		return false
	}
	if err != nil {
		// Not reserved: process none of the items; the next step tries
		// once more.
		w.h.rec.Reserved = prev
		if ctx.Err() == nil {
			w.m.e.log.Warn("reserve items", "job", w.m.id, "err", err)
		}
		return false
	}
	return true
}

// ahead returns how many of the listed items the next reservation covers:
// about a checkpoint interval of work at the pace of the items done so far
// in this phase (one while the pace is unknown), at least one. Cheap items
// (a scan's) are reserved a whole batch at a time, as one checkpoint; slow
// ones (large files to repair) a few at a time, so that idle workers steal
// the rest of the batch instead of waiting while one worker goes through
// it. A serial task, which nobody steals from, reserves its whole batch.
func (w *worker) ahead() int {
	n := 1
	switch {
	case w.h.rec.Serial:
		n = len(w.batch)
	case w.pace > 0:
		n = int(w.m.e.cfg.CheckpointInterval / w.pace)
	}
	return max(1, min(n, len(w.batch)))
}

// checkItems enforces Items' contract: keys increasing, within [from, to),
// at most limit.
func checkItems(items []uint64, from, to uint64, limit int) error {
	if len(items) > limit {
		return fmt.Errorf("Items returned %d keys, more than the limit %d", len(items), limit)
	}
	prev, first := from, true
	for _, k := range items {
		if k < from || k >= to || (!first && k <= prev) {
			return fmt.Errorf("Items returned key %d out of order or outside [%d, %d)", k, from, to)
		}
		prev, first = k, false
	}
	return nil
}

// save checkpoints the held task (release: and gives it back). It drops
// the task when it is done, released, lost or failed, and reports whether
// the worker still holds it.
func (w *worker) save(ctx context.Context, release bool) bool {
	e := w.m.e
	wctx := ctx
	if ctx.Err() != nil || release {
		// Final writes of a stopping worker outlive its context.
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), e.cfg.LeaseTTL)
		defer cancel()
	}
	err := e.checkpoint(wctx, w.h, release)
	w.saved = time.Now()
	switch {
	case errors.Is(err, errLost):
		e.m.tasksLost.Add(1)
	case err != nil:
		if !release {
			e.log.Warn("checkpoint", "job", w.m.id, "err", err)
			return true // keep working; the next checkpoint retries
		}
		e.log.Warn("release task", "job", w.m.id, "err", err)
	case w.h.rec.Failed != "":
		e.m.itemFailures.Add(1)
	case w.h.rec.Done:
		e.m.tasksDone.Add(1)
	case release:
		e.m.tasksReleased.Add(1)
	default:
		return true
	}
	w.m.hold(w.h, false)
	w.h, w.batch, w.job = nil, nil, nil
	return false
}

// fail records why the held task failed and gives it up; the coordinator
// fails the phase and the job with the reason.
func (w *worker) fail(ctx context.Context, reason string) {
	w.m.e.log.Warn("task failed", "job", w.m.id, "reason", reason)
	w.h.rec.Failed = clip(reason, 1000)
	w.save(ctx, true)
}

// release checkpoints and gives back the held task, if any.
func (w *worker) release(ctx context.Context) {
	if w.h != nil {
		w.save(ctx, true)
	}
}
