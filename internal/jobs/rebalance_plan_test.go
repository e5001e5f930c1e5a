package jobs

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

const mb = 1 << 20

// twelve drives of three nodes at 60% used plus two empty new ones.
func grownPool() []driveSpace {
	var ds []driveSpace
	for i := 1; i <= 12; i++ {
		ds = append(ds, driveSpace{ID: meta.DriveID(i), Node: fmt.Sprintf("n%d", (i-1)/4+1), Pool: "default", Used: 60 * mb, Total: 100 * mb})
	}
	ds = append(ds, driveSpace{ID: 13, Node: "n1", Pool: "default", Total: 100 * mb}, driveSpace{ID: 14, Node: "n2", Pool: "default", Total: 100 * mb})
	ds = append(ds, driveSpace{ID: 20, Node: "n1", Pool: "fast", Used: 10 * mb, Total: 100 * mb})
	return ds
}

func TestPlanBalance(t *testing.T) {
	plans := planBalance(grownPool(), "")
	if len(plans) != 2 || plans[0].Pool != "default" || plans[1].Pool != "fast" {
		t.Fatalf("plans %+v", plans)
	}
	p := plans[0]
	mean := 720.0 / 1400
	if math.Abs(p.Mean-mean) > 1e-9 || p.Nodes != 3 || len(p.Member) != 14 {
		t.Fatalf("plan %+v", p)
	}
	// Each full drive sheds (60 - 51.4)/60 of its units; the new ones take.
	want := int(math.Ceil((60*mb - mean*100*mb) / (60 * mb) * 1e6))
	for i := 1; i <= 12; i++ {
		if p.Src[meta.DriveID(i)] != want {
			t.Fatalf("drive %d sheds %d ppm, want %d", i, p.Src[meta.DriveID(i)], want)
		}
	}
	if !reflect.DeepEqual(p.Dst, map[meta.DriveID]bool{13: true, 14: true}) {
		t.Fatalf("targets %v", p.Dst)
	}
	if !plans[1].balanced() {
		t.Fatalf("a one-drive pool has moves: %+v", plans[1])
	}
	// Only the named pool; a balanced pool has nothing to shed.
	if ps := planBalance(grownPool(), "fast"); len(ps) != 1 || ps[0].Pool != "fast" {
		t.Fatalf("pool filter: %+v", ps)
	}
	even := grownPool()[:12]
	if ps := planBalance(even, ""); !ps[0].balanced() {
		t.Fatalf("even pool: %+v", ps[0])
	}
	// Within the dead band: left alone.
	near := grownPool()[:12]
	near[0].Used += mb / 4
	if ps := planBalance(near, ""); len(ps[0].Src) != 0 {
		t.Fatalf("a drive 0.25 points above the mean sheds: %+v", ps[0])
	}
}

func TestPlanScopeRoundTrip(t *testing.T) {
	for _, p := range planBalance(grownPool(), "") {
		got, err := decodePlan(p.encode())
		if err != nil {
			t.Fatal(err)
		}
		if got.Pool != p.Pool || got.Nodes != p.Nodes || math.Abs(got.Mean-p.Mean) > 1e-6 ||
			!reflect.DeepEqual(got.Src, p.Src) || !reflect.DeepEqual(got.Dst, p.Dst) || !reflect.DeepEqual(got.Member, p.Member) {
			t.Fatalf("round trip:\n%+v\n%+v", p, got)
		}
	}
	for _, bad := range []string{"", "pool=x;src=3", "pool=x;src=a:1", "nodes=2", "pool=x;bogus=1", "pool=x;dst=0"} {
		if _, err := decodePlan(bad); !errors.Is(err, job.ErrInvalid) {
			t.Errorf("decodePlan(%q) = %v", bad, err)
		}
	}
}

func nodesOf(ds []driveSpace) map[meta.DriveID]string {
	m := map[meta.DriveID]string{}
	for _, d := range ds {
		m[d.ID] = d.Node
	}
	return m
}

// Over many stripes each source drive sheds its excess in expectation,
// moved units only go to targets, and no node ever takes more than its
// share of a stripe.
func TestStripeMovesBalance(t *testing.T) {
	ds := grownPool()
	nodeOf := nodesOf(ds)
	p := planBalance(ds, "default")[0]
	rng := rand.New(rand.NewPCG(1, 2))
	moved := map[meta.DriveID]int{}
	units := map[meta.DriveID]int{}
	const stripes = 4000
	for i := 0; i < stripes; i++ {
		// ec:4+2 placed two units per node, on distinct drives.
		var s meta.Stripe
		s.Index = uint64(i)
		for n := 0; n < 3; n++ {
			perm := rng.Perm(4)
			for _, k := range perm[:2] {
				var b meta.BlockID
				for j := range b {
					b[j] = byte(rng.Uint32())
				}
				d := meta.DriveID(n*4 + k + 1)
				s.Units = append(s.Units, meta.Unit{Drive: d, Block: b, Length: mb})
				units[d]++
			}
		}
		ms, allow := p.stripeMoves(meta.LIN(1000+i), s, nodeOf)
		for _, m := range ms {
			moved[m.Drive]++
		}
		if len(ms) == 0 {
			continue
		}
		for d := range p.Member {
			if allow(d) && !p.Dst[d] {
				t.Fatalf("stripe %d may move a unit to drive %d, not a target", i, d)
			}
		}
		// Drive 14 is on n2: allowed only if n2 is below its share after the moves.
		left := map[string]int{}
		for _, u := range s.Units {
			left[nodeOf[u.Drive]]++
		}
		for _, m := range ms {
			left[nodeOf[m.Drive]]--
		}
		if allow(14) != (left["n2"] < 2) || allow(13) != (left["n1"] < 2) {
			t.Fatalf("stripe %d: allow(13)=%v allow(14)=%v with loads %v", i, allow(13), allow(14), left)
		}
		// The same stripe always draws the same moves.
		again, _ := p.stripeMoves(meta.LIN(1000+i), s, nodeOf)
		if !reflect.DeepEqual(ms, again) {
			t.Fatal("moves are not deterministic")
		}
	}
	for d := meta.DriveID(1); d <= 12; d++ {
		want := float64(units[d]) * float64(p.Src[d]) / 1e6
		if math.Abs(float64(moved[d])-want) > 4*math.Sqrt(want) {
			t.Fatalf("drive %d: %d of %d units moved, want about %.0f", d, moved[d], units[d], want)
		}
	}
}

// A stripe with three units on one node of three sheds one; the move may
// go to any non-source drive of a node below its share.
func TestStripeMovesSpread(t *testing.T) {
	ds := grownPool()[:12]
	nodeOf := nodesOf(ds)
	p := planBalance(ds, "default")[0]
	s := meta.Stripe{Units: []meta.Unit{{Drive: 1}, {Drive: 2}, {Drive: 3}, {Drive: 5}, {Drive: 9}, {Drive: 10}}}
	for i := range s.Units {
		s.Units[i].Block[0] = byte(i + 1)
	}
	if !p.wantsFile([]meta.DriveID{1, 2, 3, 5}, nodeOf) || p.wantsFile([]meta.DriveID{1, 5, 9}, nodeOf) {
		t.Fatal("wantsFile: a file on two of three nodes is a candidate, one on all three is not")
	}
	ms, allow := p.stripeMoves(1, s, nodeOf)
	if len(ms) != 1 || nodeOf[ms[0].Drive] != "n1" {
		t.Fatalf("moves %+v", ms)
	}
	if allow(4) || !allow(6) || allow(11) {
		t.Fatalf("allow: 4 %v (n1, at its share after the move) 6 %v (n2, one unit) 11 %v (n3, at its share)", allow(4), allow(6), allow(11))
	}
}

func TestPoolSpreads(t *testing.T) {
	s := poolSpreads(grownPool(), "")
	if len(s) != 2 || s[0].Drives != 14 || s[0].Spread() != 60 || s[1].Spread() != 0 {
		t.Fatalf("spreads %+v", s)
	}
	if got := s[0].String(); got != "pool default: 14 drives 0.0%–60.0% used (spread 60.0 points)" {
		t.Fatalf("String = %q", got)
	}
}
