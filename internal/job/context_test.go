package job

import (
	"context"
	"sync"
	"testing"
)

// TestItemsRunWithTheirJobID: every item a manager's workers process has
// its job's id in its context (JobIDOf), for the QoS tag of its I/O.
func TestItemsRunWithTheirJobID(t *testing.T) {
	typ := newFakeType("scan", SetMark, 50)
	c := newTestCluster(t, 1, nil, typ)
	var mu sync.Mutex
	bad, calls := 0, 0
	c.d.setHook(func(ctx context.Context, _ string, id JobID, _ int, _ uint64) error {
		mu.Lock()
		calls++
		mu.Unlock()
		if got, ok := JobIDOf(ctx); !ok || got != id {
			mu.Lock()
			bad++
			mu.Unlock()
		}
		return nil
	})
	e := c.engines[0]
	id, err := e.Submit(bg, "scan", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitState(e, id, Succeeded)
	mu.Lock()
	defer mu.Unlock()
	if calls < 50 || bad != 0 {
		t.Fatalf("%d of %d items ran without their job's id in their context", bad, calls)
	}
	if _, ok := JobIDOf(context.Background()); ok {
		t.Fatal("JobIDOf outside a job says ok")
	}
}
