package kv

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Run is the retry loop behind Store.Update (readOnly false) and Store.View
// (readOnly true), shared by all backends: take a snapshot, run fn, commit,
// and on ErrConflict back off and start again, at most o.MaxRetries times.
// It returns fn's error, a commit error, ctx's error, or an error wrapping
// ErrConflict that says how many attempts were made.
func Run(ctx context.Context, b Backend, o Options, readOnly bool, fn func(Tx) error) error {
	attempts := o.MaxRetries
	if attempts <= 0 {
		attempts = DefaultMaxRetries
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err, optimistic := runOnce(ctx, b, attempt, readOnly, fn)
		if optimistic && ctx.Err() == nil {
			// Decided on possibly stale data: decide again on fresh data,
			// at once (see OptimisticSnapshot).
			continue
		}
		if err == nil || !errors.Is(err, ErrConflict) {
			return err
		}
		if attempt+1 >= attempts {
			return fmt.Errorf("kv: gave up after %d attempts (raise Options.MaxRetries or reduce contention on these keys): %w", attempt+1, err)
		}
		if err := sleep(ctx, backoff(o, attempt)); err != nil {
			return err
		}
	}
}

// runOnce runs one attempt. retry reports an optimistic attempt that did
// not commit: its outcome must be decided again on fresh data.
func runOnce(ctx context.Context, b Backend, attempt int, readOnly bool, fn func(Tx) error) (err error, retry bool) {
	snap, err := b.Begin(ctx, attempt)
	if err != nil {
		return err, false
	}
	os, _ := snap.(OptimisticSnapshot)
	optimistic := os != nil && os.Optimistic()
	t := NewTxn(ctx, snap, readOnly)
	if err := fn(t); err != nil {
		return err, optimistic
	}
	if t.err != nil {
		return t.err, optimistic
	}
	if readOnly || !t.HasWrites() {
		// A consistent snapshot needs no commit to be serializable.
		return nil, optimistic
	}
	err = b.Commit(ctx, t)
	// A failed commit is decided again only on a conflict: after another
	// error (unavailable) it may have been applied.
	return err, optimistic && errors.Is(err, ErrConflict)
}

// backoff returns the sleep before attempt+1: doubling from MinBackoff to
// MaxBackoff, randomized to [d/2, d] so that conflicting writers spread out.
func backoff(o Options, attempt int) time.Duration {
	lo, hi := o.MinBackoff, o.MaxBackoff
	if lo <= 0 {
		lo = 500 * time.Microsecond
	}
	if hi <= 0 {
		hi = 100 * time.Millisecond
	}
	d := lo
	for i := 0; i < attempt && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
