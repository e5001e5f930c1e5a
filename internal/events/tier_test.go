package events

import (
	"testing"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/policy"
)

// A pool's marks: its own thresholds, lowered by the THRESHOLD of a
// MIGRATE rule out of it; a pool nothing moves out of is not movable.
func TestPoolMarks(t *testing.T) {
	pol, err := policy.Parse(`
RULE 'cold' MIGRATE FROM POOL 'fast' THRESHOLD(80,40) WEIGHT(KB_ALLOCATED) TO POOL 'capacity'
RULE 'wide' MIGRATE FROM POOL 'capacity' TO POOL 'capacity' PROTECTION 'ec:4+2'
RULE 'default' SET POOL 'fast'
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := func(name string, high, low int) cluster.Pool {
		return cluster.Pool{PoolRecord: cluster.PoolRecord{Name: name, High: high, Low: low}}
	}
	pools := []cluster.Pool{pool("fast", 90, 70), pool("capacity", 95, 85), pool("archive", 90, 70), pool("scratch", 75, 50)}
	got := marksOf(pools, pol)
	want := map[string]poolMarks{
		"fast":     {high: 80, low: 40, movable: true, rules: []string{"cold"}},
		"capacity": {high: 95, low: 85, movable: true},
		"archive":  {high: 90, low: 70},
		"scratch":  {high: 75, low: 50},
	}
	for name, w := range want {
		g := got[name]
		if g.high != w.high || g.low != w.low || g.movable != w.movable || len(g.rules) != len(w.rules) {
			t.Errorf("%s: got %+v, want %+v", name, g, w)
		}
	}
	if m := marksOf(pools, nil)["fast"]; m.high != 90 || m.movable {
		t.Errorf("no policy: %+v", m)
	}
}
