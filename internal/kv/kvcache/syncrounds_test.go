package kvcache

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSyncRoundsShareOnlyLaterReads: concurrent callers share reads of the
// revision, and each gets one read after it was called — at least the
// revision of a commit made just before its call — even when the caller
// that made the read gave up meanwhile.
func TestSyncRoundsShareOnlyLaterReads(t *testing.T) {
	var r syncRounds
	var committed, reads atomic.Int64
	read := func(ctx context.Context) (int64, error) {
		reads.Add(1)
		rev := committed.Load()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
		return rev, nil
	}
	const callers, rounds = 32, 20
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				ctx := context.Background()
				var cancel context.CancelFunc = func() {}
				if (c+i)%7 == 0 {
					// Some callers give up at once: those sharing their
					// read must read again, not fail.
					ctx, cancel = context.WithCancel(ctx)
					cancel()
				}
				want := committed.Add(1)
				rev, err := r.revision(ctx, read)
				cancel()
				if ctx.Err() != nil {
					continue
				}
				if err != nil {
					t.Errorf("caller %d: %v", c, err)
					return
				}
				if rev < want {
					t.Errorf("caller %d got revision %d, committed %d before its call", c, rev, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := reads.Load(); n >= callers*rounds/2 {
		t.Errorf("%d reads for %d concurrent calls: not shared", n, callers*rounds)
	}
	t.Logf("%d reads for %d calls", reads.Load(), callers*rounds)
}
