package job

import (
	"testing"

	"github.com/weftfs/weft/internal/failpoint"
)

// The error actions of the engine's failpoints are faults it recovers
// from: checkpoints that fail before their write (job/before-checkpoint)
// or lose their reply after it (job/after-checkpoint) are retried or
// adopted, and a node that gives the coordinator's role up right after
// winning it (job/after-elect) lets the next one take it; the job still
// processes every item.
func TestFailpointErrors(t *testing.T) {
	for point, action := range map[string]string{
		"job/before-checkpoint": "6*error",
		"job/after-checkpoint":  "6*error",
		"job/after-elect":       "2*error",
	} {
		if err := failpoint.Enable(point, action); err != nil {
			t.Fatal(err)
		}
		defer failpoint.Disable(point)
	}
	typ := newFakeType("scan", SetMark, 400, 100)
	c := newTestCluster(t, 2, nil, typ)
	e := c.engines[0]
	id, err := e.Submit(bg, "scan", Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := c.waitState(e, id, Succeeded)
	evs := c.d.snapshot()
	requireAll(t, evs, id, 0, 400)
	requireAll(t, evs, id, 1, 100)
	if v.Phases[0].Items < 400 || v.Phases[1].Items < 100 {
		t.Fatalf("phases %+v", v.Phases)
	}
	if on := failpoint.Names(); len(on) != 0 {
		t.Fatalf("points that never fired all their errors: %v", on)
	}
}
