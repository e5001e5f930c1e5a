package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/erasure"
)

const (
	mib = int64(1) << 20
	tib = int64(1) << 40
)

// grid returns nodes × drives healthy candidates with ids 1, 2, … and nodes
// n1, n2, …, each drive with free bytes free.
func grid(nodes, drives int, free int64) []Candidate {
	var out []Candidate
	for n := range nodes {
		for range drives {
			out = append(out, Candidate{
				ID: DriveID(len(out) + 1), Node: fmt.Sprintf("n%d", n+1),
				FreeBytes: free, TotalBytes: 2 * tib, Up: true, Usable: true,
			})
		}
	}
	return out
}

// request returns the request for a full stripe of protection ps.
func request(t testing.TB, ps string, pool []Candidate, seed uint64) Request {
	t.Helper()
	p, err := erasure.ParseProtection(ps)
	if err != nil {
		t.Fatal(err)
	}
	g := erasure.Geometry{Protection: p}
	l := g.Layout(int(g.StripeDataSize()))
	return Request{
		Candidates: pool, Width: l.Width(), Min: l.MinPlaced(), Needed: l.Needed(),
		UnitBytes: int64(l.UnitLen), Label: ps, Rand: rand.New(rand.NewPCG(seed, 0)),
	}
}

// perNode counts the units of res per node, as sorted "node=count" pairs.
func perNode(res Result) string {
	load := map[string]int{}
	for _, n := range res.Nodes {
		load[n]++
	}
	var out []string
	for n, c := range load {
		out = append(out, fmt.Sprintf("%s=%d", n, c))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// checkInvariants fails if res uses an ineligible, excluded, existing or
// repeated drive, or reports inconsistent counts.
func checkInvariants(t testing.TB, req Request, res Result) {
	t.Helper()
	byID := map[DriveID]Candidate{}
	for _, c := range req.Candidates {
		byID[c.ID] = c
	}
	used := map[DriveID]bool{}
	for _, id := range req.Exclude {
		used[id] = true
	}
	for _, u := range req.Existing {
		used[u.Drive] = true
	}
	for i, id := range res.Drives {
		c, ok := byID[id]
		switch {
		case !ok:
			t.Fatalf("drive %d is not a candidate", id)
		case used[id]:
			t.Fatalf("drive %d used twice, excluded or already holding a unit", id)
		case !c.Up || !c.Usable:
			t.Fatalf("drive %d is down or not ready", id)
		case c.FreeBytes < req.UnitBytes:
			t.Fatalf("drive %d has %d bytes free, unit needs %d", id, c.FreeBytes, req.UnitBytes)
		case res.Nodes[i] != c.Node:
			t.Fatalf("drive %d reported on node %s, is on %s", id, res.Nodes[i], c.Node)
		}
		used[id] = true
	}
	if res.Placed != len(res.Drives) || res.Placed < req.Min || res.Placed > req.Width ||
		res.UnderProtected != (res.Placed < req.Width) {
		t.Fatalf("inconsistent result %+v for width %d min %d", res, req.Width, req.Min)
	}
}

func TestPlaceScenarios(t *testing.T) {
	down := grid(3, 4, tib)
	down[0].Up = false      // n1
	down[5].Usable = false  // n2, suspended
	down[10].Usable = false // n3, draining
	small := grid(2, 3, tib)
	small[0].FreeBytes = mib - 1
	small[4].FreeBytes = 0
	for _, tc := range []struct {
		name     string
		prot     string
		pool     []Candidate
		placed   int
		perNode  string
		tol      Tolerance
		underPro bool
	}{
		{"3 nodes x 4 drives", "ec:4+2", grid(3, 4, tib), 6, "n1=2 n2=2 n3=2", Tolerance{2, 1}, false},
		{"1 node x 12 drives", "ec:4+2", grid(1, 12, tib), 6, "n1=6", Tolerance{2, 0}, false},
		{"6 nodes x 1 drive", "ec:4+2", grid(6, 1, tib), 6, "n1=1 n2=1 n3=1 n4=1 n5=1 n6=1", Tolerance{2, 2}, false},
		{"4 nodes x 2 drives", "ec:4+2", grid(4, 2, tib), 6, "", Tolerance{2, 1}, false},
		{"5 drives, exactly K+1", "ec:4+2", grid(5, 1, tib), 5, "n1=1 n2=1 n3=1 n4=1 n5=1", Tolerance{1, 1}, true},
		{"5 drives on 1 node", "ec:4+2", grid(1, 5, tib), 5, "n1=5", Tolerance{1, 0}, true},
		{"mirror:3 on 2 nodes", "mirror:3", grid(2, 2, tib), 3, "", Tolerance{2, 1}, false},
		{"mirror:3 on 3 nodes", "mirror:3", grid(3, 2, tib), 3, "n1=1 n2=1 n3=1", Tolerance{2, 2}, false},
		{"mirror:1", "mirror:1", grid(3, 1, tib), 1, "", Tolerance{0, 0}, false},
		{"down and suspended skipped", "ec:4+2", down, 6, "n1=2 n2=2 n3=2", Tolerance{2, 1}, false},
		{"too full skipped", "ec:2+2", small, 4, "n1=2 n2=2", Tolerance{2, 1}, false},
		{"ec:8+2 on 3 nodes x 4", "ec:8+2", grid(3, 4, tib), 10, "", Tolerance{2, 0}, false},
		{"ec:8+2 on 5 nodes x 2", "ec:8+2", grid(5, 2, tib), 10, "n1=2 n2=2 n3=2 n4=2 n5=2", Tolerance{2, 1}, false},
	} {
		for seed := range uint64(20) {
			req := request(t, tc.prot, tc.pool, seed)
			res, err := Place(req)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			checkInvariants(t, req, res)
			if res.Placed != tc.placed || res.Tolerance != tc.tol || res.UnderProtected != tc.underPro ||
				(tc.perNode != "" && perNode(res) != tc.perNode) {
				t.Errorf("%s seed %d: placed %d (%s) tolerance %v under %v; want %d (%s) %v %v",
					tc.name, seed, res.Placed, perNode(res), res.Tolerance, res.UnderProtected,
					tc.placed, tc.perNode, tc.tol, tc.underPro)
			}
		}
	}
}

func TestPlaceNotEnoughDrives(t *testing.T) {
	mixed := grid(2, 3, tib)
	mixed[0].Up = false
	mixed[1].Usable = false
	mixed[2].FreeBytes = 10
	for _, tc := range []struct {
		name string
		prot string
		pool []Candidate
		want string
	}{
		{"4 drives for ec:4+2", "ec:4+2", grid(4, 1, tib), "pool has 4 usable drives, ec:4+2 needs at least 5 (4 listed: all usable)"},
		{"empty pool", "ec:4+2", nil, "pool has no drives, ec:4+2 needs at least 5"},
		{"mixed", "ec:4+2", mixed, "pool has 3 usable drives, ec:4+2 needs at least 5 (6 listed: 2 down or not ready, 1 with less than 1048576 bytes free)"},
		{"mirror:2 on one drive", "mirror:2", grid(1, 1, tib), "pool has 1 usable drive, mirror:2 needs at least 2"},
	} {
		_, err := Place(request(t, tc.prot, tc.pool, 1))
		if !errors.Is(err, ErrNotEnoughDrives) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrNotEnoughDrives saying %q", tc.name, err, tc.want)
		}
	}
	// Everything down: same sentinel.
	pool := grid(3, 2, tib)
	for i := range pool {
		pool[i].Up = false
	}
	if _, err := Place(request(t, "ec:2+1", pool, 1)); !errors.Is(err, ErrNotEnoughDrives) {
		t.Errorf("all down: %v", err)
	}
}

func TestPlaceBadRequest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	pool := grid(2, 2, tib)
	for _, req := range []Request{
		{Candidates: pool, Width: 0, Min: 1, Needed: 1, Rand: rng},
		{Candidates: pool, Width: 2, Min: 3, Needed: 1, Rand: rng},
		{Candidates: pool, Width: 2, Min: 0, Needed: 1, Rand: rng},
		{Candidates: pool, Width: 2, Min: 2, Needed: 0, Rand: rng},
		{Candidates: pool, Width: 2, Min: 2, Needed: 1},
		{Candidates: pool, Width: 2, Min: 2, Needed: 1, UnitBytes: -1, Rand: rng},
		{Candidates: append(grid(1, 1, tib), grid(1, 1, tib)...), Width: 1, Min: 1, Needed: 1, Rand: rng},
	} {
		if _, err := Place(req); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%+v: err = %v, want ErrBadRequest", req, err)
		}
	}
}

// TestPlaceRepair re-creates lost units of a stripe: the new drives avoid
// the survivors' drives and, where the pool allows, their nodes.
func TestPlaceRepair(t *testing.T) {
	pool := grid(6, 2, tib) // drives 2n-1, 2n on node n
	// ec:4+2 on nodes n1..n6, one unit each; n5's and n6's units were lost.
	existing := []Unit{{1, "n1"}, {3, "n2"}, {5, "n3"}, {7, "n4"}}
	for seed := range uint64(50) {
		req := Request{Candidates: pool, Width: 2, Min: 1, Needed: 4, UnitBytes: mib,
			Existing: existing, Exclude: []DriveID{9}, Rand: rand.New(rand.NewPCG(seed, 9))}
		res, err := Place(req)
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, req, res)
		// n5 has only drive 10 left (9 excluded); n6 has 11 and 12.
		if perNode(res) != "n5=1 n6=1" || res.Drives[0] == 9 || res.Tolerance != (Tolerance{2, 2}) {
			t.Fatalf("seed %d: repair chose %v on %v, tolerance %v", seed, res.Drives, res.Nodes, res.Tolerance)
		}
	}
	// With only survivors' nodes left, repair reuses them, balanced.
	pool = grid(3, 4, tib)
	existing = []Unit{{1, "n1"}, {5, "n2"}, {6, "n2"}, {9, "n3"}}
	req := Request{Candidates: pool, Width: 2, Min: 2, Needed: 4, Existing: existing, Rand: rand.New(rand.NewPCG(1, 1))}
	res, err := Place(req)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, req, res)
	if perNode(res) != "n1=1 n3=1" || res.Tolerance != (Tolerance{2, 1}) {
		t.Fatalf("repair on 3 nodes chose %v, tolerance %v", res.Nodes, res.Tolerance)
	}
	// Not enough drives besides the survivors.
	req = Request{Candidates: grid(1, 5, tib), Width: 2, Min: 2, Needed: 4, Label: "ec:4+2",
		Existing: units("n1", "n1", "n1", "n1"), Rand: rand.New(rand.NewPCG(1, 1))}
	if _, err := Place(req); !errors.Is(err, ErrNotEnoughDrives) || !strings.Contains(err.Error(), "repair keeping 4 units") {
		t.Fatalf("repair without room: %v", err)
	}
}

// TestPlaceDeterministic checks that the result depends on the seed, not
// on the order of the candidates.
func TestPlaceDeterministic(t *testing.T) {
	pool := grid(4, 3, tib)
	for i := range pool {
		pool[i].FreeBytes = tib + int64(i)*mib*997
	}
	want, err := Place(request(t, "ec:4+2", pool, 42))
	if err != nil {
		t.Fatal(err)
	}
	shuffled := slices.Clone(pool)
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	got, err := Place(request(t, "ec:4+2", shuffled, 42))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Drives, want.Drives) {
		t.Fatalf("shuffled candidates gave %v, want %v", got.Drives, want.Drives)
	}
}

// TestPlaceRandomPools places stripes on random pools and checks the
// invariants and that nodes are balanced as far as their drives allow.
func TestPlaceRandomPools(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range 2000 {
		var pool []Candidate
		nodes := 1 + rng.IntN(8)
		for n := range nodes {
			for range 1 + rng.IntN(5) {
				pool = append(pool, Candidate{
					ID: DriveID(len(pool) + 1), Node: fmt.Sprintf("n%d", n),
					FreeBytes: rng.Int64N(4 * mib), Up: rng.IntN(8) > 0, Usable: rng.IntN(8) > 0,
				})
			}
		}
		width := 1 + rng.IntN(10)
		req := Request{Candidates: pool, Width: width, Min: 1 + rng.IntN(width), Needed: 1 + rng.IntN(width),
			UnitBytes: mib, Rand: rng}
		res, err := Place(req)
		if errors.Is(err, ErrNotEnoughDrives) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, req, res)
		// Balance: a node with more units than another must have run out
		// of eligible drives, or exceed it by at most one.
		load := map[string]int{}
		for _, n := range res.Nodes {
			load[n]++
		}
		eligible := map[string]int{}
		for _, c := range pool {
			if c.Up && c.Usable && c.FreeBytes >= mib {
				eligible[c.Node]++
			}
		}
		for a := range eligible {
			for b := range eligible {
				if load[a] > load[b]+1 && load[b] < eligible[b] {
					t.Fatalf("unbalanced: %s has %d units, %s has %d of %d drives", a, load[a], b, load[b], eligible[b])
				}
			}
		}
		total := 0
		for _, n := range eligible {
			total += n
		}
		if res.Placed != min(width, total) {
			t.Fatalf("placed %d of width %d with %d drives eligible", res.Placed, width, total)
		}
	}
}

// TestPlaceWeightedBalance places many stripes on a pool where one drive
// has 4× the free space of the others: it must receive proportionally more
// units. The seed is fixed and the bounds loose, so the test is stable.
func TestPlaceWeightedBalance(t *testing.T) {
	pool := grid(4, 4, tib)
	big := DriveID(6) // on n2
	pool[big-1].FreeBytes = 4 * tib
	counts := map[DriveID]int{}
	rng := rand.New(rand.NewPCG(2026, 1))
	const stripes = 20000
	for range stripes {
		req := request(t, "ec:2+1", pool, 0)
		req.Rand = rng
		res, err := Place(req)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Drives {
			counts[d]++
		}
	}
	// Mean of the small drives of the big drive's node, and of other nodes.
	var sameNode, otherNodes float64
	for id, c := range counts {
		switch {
		case id == big:
		case pool[id-1].Node == "n2":
			sameNode += float64(c) / 3
		default:
			otherNodes += float64(c) / 12
		}
	}
	ratio := float64(counts[big]) / sameNode
	// Within its node, free space 4:1:1:1 gives the big drive 4/7 of the
	// node's units, i.e. 4× a small neighbour.
	if ratio < 3.2 || ratio > 4.8 {
		t.Errorf("big drive got %d units, %.2f× its neighbours' mean %.0f; want about 4×", counts[big], ratio, sameNode)
	}
	// Across the pool it still gets well above the average small drive.
	if r := float64(counts[big]) / otherNodes; r < 2.5 {
		t.Errorf("big drive got %.2f× the units of a drive on another node; want > 2.5×", r)
	}
	t.Logf("big %d, neighbours %.0f, other nodes %.0f per drive", counts[big], sameNode, otherNodes)
}
