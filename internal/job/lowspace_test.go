package job

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// Low-space mode end to end in the engine: a running job whose type does
// not free space is paused by the system (its managers release every
// task), while a running job whose type frees space keeps its tasks and
// runs to the end in the mode; when the mode ends the paused job resumes
// by itself from its checkpoints and processes every item.
func TestLowSpaceModePausesAndResumes(t *testing.T) {
	const n = 600
	scan := newFakeType("scan", SetNone, n)
	sweep := newFakeType("sweep", SetNone, n)
	sweep.frees = true
	c := newTestCluster(t, 2, nil, scan, sweep)
	e := c.engines[0]

	// Items of a job wait on its gate until the test opens it.
	var mu sync.Mutex
	gates := map[JobID]*gate{}
	hold := func(id JobID) *gate {
		mu.Lock()
		defer mu.Unlock()
		if gates[id] == nil {
			gates[id] = newGate()
		}
		return gates[id]
	}
	c.d.setHook(func(ctx context.Context, _ string, id JobID, _ int, _ uint64) error {
		return hold(id).wait(ctx)
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range gates {
			g.open()
		}
	})

	scanID, err := e.Submit(bg, "scan", Options{})
	if err != nil {
		t.Fatal(err)
	}
	sweepID, err := e.Submit(bg, "sweep", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitState(e, scanID, Running)
	c.waitState(e, sweepID, Running)
	c.waitFor("both jobs to hold tasks", func() bool {
		return ownerCount(t, c.clients[0], scanID) > 0 && ownerCount(t, c.clients[0], sweepID) > 0
	})

	if err := e.SetLowSpace(bg, true, "pool default: 3.1% free, below the 5% threshold"); err != nil {
		t.Fatal(err)
	}
	v := c.waitState(e, scanID, SystemPaused)
	if !strings.Contains(v.Reason, "low-space mode") {
		t.Fatalf("scan paused with reason %q, want the low-space mode", v.Reason)
	}
	c.waitFor("the paused job's managers to release its tasks", func() bool { return ownerCount(t, c.clients[0], scanID) == 0 })
	if v, err := e.Get(bg, sweepID); err != nil || v.State != Running || v.Reason != "" {
		t.Fatalf("space-freeing job in low-space mode: %+v, %v; want running", v, err)
	}
	if ownerCount(t, c.clients[0], sweepID) == 0 {
		t.Fatal("space-freeing job lost its tasks in low-space mode")
	}

	// The freeing job runs to the end while the mode lasts, each item once
	// (it was never paused, so nothing was redone)...
	hold(sweepID).open()
	c.waitState(e, sweepID, Succeeded)
	if cov := coverage(c.d.snapshot(), sweepID, 0, 0); len(cov) != n {
		t.Fatalf("sweep processed %d distinct items, want %d", len(cov), n)
	}
	// ...and the other stays paused.
	if v, err := e.Get(bg, scanID); err != nil || v.State != SystemPaused {
		t.Fatalf("scan after sweep ended: %+v, %v; want still system-paused", v, err)
	}
	if st, err := e.Status(bg); err != nil || !st.LowSpace || st.LowSpaceSince.IsZero() {
		t.Fatalf("status in low-space mode: %+v, %v", st, err)
	}

	// Mode ends: the paused job resumes by itself and finishes.
	if err := e.SetLowSpace(bg, false, ""); err != nil {
		t.Fatal(err)
	}
	c.waitState(e, scanID, Running)
	hold(scanID).open()
	v = c.waitState(e, scanID, Succeeded)
	requireAll(t, c.d.snapshot(), scanID, 0, n)
	if v.Phases[0].Items < n {
		t.Fatalf("scan report: %+v", v.Phases[0])
	}
}
