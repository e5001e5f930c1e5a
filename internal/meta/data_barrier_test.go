package meta

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestDataBarrier: a file born under a delegation lets its writer defer
// the data's sync (DefersData); the data barrier runs before the
// write-back's commit that names its stripes — which nobody else sees
// before then — and before a stripe commit made at once. A failing
// barrier commits nothing: the write-back drops the batch (the next Flush
// reports it) and the immediate commit fails.
func TestDataBarrier(t *testing.T) {
	for name, p := range writeBackPair(t, nil) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			d, old := delegatedDir(t, a, "old")
			ok(t, a.Flush(bg))
			var (
				mu      sync.Mutex
				calls   int
				fail    error
				watch   LIN // a file b must not see yet when the barrier runs
				visible bool
			)
			remove := a.AddDataBarrier(func(ctx context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if watch != 0 {
					if ss, err := b.GetStripes(ctx, watch, 0, 10); err == nil && len(ss) > 0 {
						visible = true
					}
				}
				return fail
			})
			defer remove()
			set := func(l LIN, err error) {
				mu.Lock()
				watch, fail, calls = l, err, 0
				mu.Unlock()
			}
			got := func() (int, bool) {
				mu.Lock()
				defer mu.Unlock()
				return calls, visible
			}

			if a.DefersData(old.LIN) || b.DefersData(old.LIN) {
				t.Fatal("DefersData of a file created before the delegation was ready")
			}
			f := must(a.Create(bg, d.LIN, "f", NewInode{Mode: 0o644}))
			if !a.DefersData(f.LIN) {
				t.Fatal("a file born under a ready delegation does not defer its data")
			}
			set(f.LIN, nil)
			must(a.CommitStripes(bg, f.LIN, []StripeUpdate{{Stripe: stripe(0, 1, 1)}}, CommitOptions{StripeSize: 100, Size: 100}))
			ok(t, a.Flush(bg))
			if n, vis := got(); n == 0 || vis {
				t.Fatalf("write-back commit: barrier ran %d times, stripes visible to others before it: %v", n, vis)
			}
			if ss := must(b.GetStripes(bg, f.LIN, 0, 10)); len(ss) != 1 {
				t.Fatalf("after the flush the other client reads %d stripes", len(ss))
			}

			// A failing barrier: the batch carrying the file is dropped.
			boom := errors.New("syncfs: input/output error")
			g := must(a.Create(bg, d.LIN, "g", NewInode{Mode: 0o644}))
			set(g.LIN, boom)
			must(a.CommitStripes(bg, g.LIN, []StripeUpdate{{Stripe: stripe(0, 1, 2)}}, CommitOptions{StripeSize: 100, Size: 100}))
			if err := a.Flush(bg); !errors.Is(err, boom) {
				t.Fatalf("Flush after a failed barrier: %v, want the barrier's error", err)
			}
			if _, err := b.GetAttr(bg, g.LIN); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the file whose data was not made durable was committed: %v", err)
			}

			// A commit made at once (the file is not born here) runs the
			// barrier first, and commits nothing when it fails.
			set(0, boom)
			_, err := a.CommitStripes(bg, old.LIN, []StripeUpdate{{Stripe: stripe(0, 1, 3)}}, CommitOptions{StripeSize: 100, Size: 100})
			if !errors.Is(err, boom) || !strings.Contains(err.Error(), "not durable") {
				t.Fatalf("immediate commit after a failed barrier: %v", err)
			}
			if ss := must(b.GetStripes(bg, old.LIN, 0, 10)); len(ss) != 0 {
				t.Fatalf("the failed commit left %d stripes", len(ss))
			}
			set(0, nil)
			must(a.CommitStripes(bg, old.LIN, []StripeUpdate{{Stripe: stripe(0, 1, 3)}}, CommitOptions{StripeSize: 100, Size: 100}))
			if n, _ := got(); n != 1 {
				t.Fatalf("immediate commit: barrier ran %d times, want 1", n)
			}
			// A restripe names blocks written synced: no barrier.
			set(0, boom)
			must(a.CommitStripe(bg, old.LIN, stripe(0, 5, 4), 1, CommitOptions{Restripe: true}))
		})
	}
}
