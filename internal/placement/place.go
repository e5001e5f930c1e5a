package placement

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Request asks for drives for the units of one stripe.
//
// For a new stripe of layout l (see erasure.StripeLayout), set Width to
// l.Width(), Min to l.MinPlaced() and Needed to l.Needed(). For a repair,
// list the surviving units in Existing and set Width (and Min) to the number
// of units to re-create: Place then chooses only those, avoiding the
// drives of Existing and, as far as the pool allows, their nodes.
type Request struct {
	Candidates []Candidate // the pool's drives; order does not matter
	Width      int         // units to place (K+M, copies, or missing units on repair)
	Min        int         // fewest units acceptable, 1 ≤ Min ≤ Width (K+1 for ec, 2 for mirrors)
	Needed     int         // units that suffice to read the stripe (K, or 1 for mirrors); for Tolerance
	UnitBytes  int64       // bytes a unit needs; drives with less free space are not eligible
	Exclude    []DriveID   // drives not to use (e.g. a drive being drained, or that just failed a write)
	Existing   []Unit      // units the stripe keeps (repair): their drives are excluded, their nodes loaded
	Label      string      // what is placed, for error messages (e.g. "ec:4+2"); optional
	Rand       *rand.Rand  // source of the weighted draws; required; not safe for concurrent use, so one per goroutine
}

// Result is a placement.
type Result struct {
	Drives         []DriveID // chosen drives in unit order: unit i goes on Drives[i]
	Nodes          []string  // Nodes[i] is the node of Drives[i]
	Placed         int       // len(Drives), Min ≤ Placed ≤ Width
	UnderProtected bool      // Placed < Width: the stripe has fewer units than asked
	Tolerance      Tolerance // of the whole stripe (Existing plus the chosen units) given Needed
}

// Place chooses up to req.Width eligible drives for a stripe.
//
// Eligible drives are Up, Usable, have at least UnitBytes free, and are
// neither in Exclude nor holding an Existing unit. Units are spread over
// distinct nodes first and distinct drives second: nodes are put in a
// random order weighted by their eligible free space, then each unit goes to
// the node holding the fewest units of the stripe so far (counting
// Existing; ties go to the earlier node in that order), on a drive of that
// node drawn with probability proportional to its free space. No drive is
// used twice. So units are balanced over nodes (each gets ⌊w/n⌋ or ⌈w/n⌉
// when every node has enough drives: 3 nodes × 4 drives take 2 units each
// of ec:4+2), and over many stripes drives fill in proportion to their
// free space among the nodes they share.
//
// If fewer than Width drives are eligible but at least Min, Place uses them
// all and reports UnderProtected. If fewer than Min are eligible the error
// wraps ErrNotEnoughDrives and says how many are usable and why the others
// are not; a malformed request gives ErrBadRequest. Place is deterministic
// for a given request and state of req.Rand, whatever the order of
// Candidates.
func Place(req Request) (Result, error) {
	if err := req.validate(); err != nil {
		return Result{}, err
	}
	pool, err := req.eligible()
	if err != nil {
		return Result{}, err
	}

	load := make(map[string]int, len(pool)) // units of the stripe per node
	for _, u := range req.Existing {
		load[u.Node]++
	}
	res := Result{}
	for len(res.Drives) < req.Width {
		best := -1
		for i, n := range pool {
			if len(n.drives) > 0 && (best < 0 || load[n.name] < load[pool[best].name]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		n := &pool[best]
		d := n.take(req.Rand)
		load[n.name]++
		res.Drives = append(res.Drives, d.ID)
		res.Nodes = append(res.Nodes, n.name)
	}
	res.Placed = len(res.Drives)
	res.UnderProtected = res.Placed < req.Width

	units := slices.Clone(req.Existing)
	for i, d := range res.Drives {
		units = append(units, Unit{Drive: d, Node: res.Nodes[i]})
	}
	res.Tolerance = ComputeTolerance(units, req.Needed)
	return res, nil
}

// validate checks the request's counts and uniqueness of drive ids.
func (req *Request) validate() error {
	switch {
	case req.Width < 1:
		return fmt.Errorf("%w: width %d, want ≥ 1", ErrBadRequest, req.Width)
	case req.Min < 1 || req.Min > req.Width:
		return fmt.Errorf("%w: min %d, want 1..%d (width)", ErrBadRequest, req.Min, req.Width)
	case req.Needed < 1:
		return fmt.Errorf("%w: needed %d, want ≥ 1", ErrBadRequest, req.Needed)
	case req.UnitBytes < 0:
		return fmt.Errorf("%w: unit bytes %d, want ≥ 0", ErrBadRequest, req.UnitBytes)
	case req.Rand == nil:
		return fmt.Errorf("%w: no random source", ErrBadRequest)
	}
	seen := make(map[DriveID]bool, len(req.Candidates))
	for _, c := range req.Candidates {
		if seen[c.ID] {
			return fmt.Errorf("%w: drive %d listed twice", ErrBadRequest, c.ID)
		}
		seen[c.ID] = true
	}
	return nil
}

// node is one node's eligible drives not yet used by the stripe.
type node struct {
	name   string
	free   int64       // eligible free bytes: the node's weight
	drives []Candidate // sorted by ID
}

// take removes and returns a drive of n drawn with probability
// proportional to its free space.
func (n *node) take(rng *rand.Rand) Candidate {
	i := drawWeighted(rng, len(n.drives), func(i int) float64 { return weight(n.drives[i].FreeBytes) })
	d := n.drives[i]
	n.drives = slices.Delete(n.drives, i, i+1)
	return d
}

// eligible filters the candidates, groups them by node and puts the nodes
// in a weighted random order. It returns ErrNotEnoughDrives if fewer than
// Min drives are eligible.
func (req *Request) eligible() ([]node, error) {
	skip := make(map[DriveID]bool, len(req.Exclude)+len(req.Existing))
	for _, id := range req.Exclude {
		skip[id] = true
	}
	for _, u := range req.Existing {
		skip[u.Drive] = true
	}
	var notReady, full, excluded, ok int
	byNode := make(map[string]*node)
	for _, c := range req.Candidates {
		switch {
		case skip[c.ID]:
			excluded++
		case !c.Up || !c.Usable:
			notReady++
		case c.FreeBytes < req.UnitBytes:
			full++
		default:
			ok++
			n := byNode[c.Node]
			if n == nil {
				n = &node{name: c.Node}
				byNode[c.Node] = n
			}
			n.free += c.FreeBytes
			n.drives = append(n.drives, c)
		}
	}
	if ok < req.Min {
		return nil, req.notEnough(ok, notReady, full, excluded)
	}

	pool := make([]node, 0, len(byNode))
	for _, n := range byNode {
		slices.SortFunc(n.drives, func(a, b Candidate) int { return cmp.Compare(a.ID, b.ID) })
		pool = append(pool, *n)
	}
	slices.SortFunc(pool, func(a, b node) int { return cmp.Compare(a.name, b.name) })
	order := weightedOrder(req.Rand, len(pool), func(i int) float64 { return weight(pool[i].free) })
	sorted := make([]node, len(pool))
	for i, j := range order {
		sorted[i] = pool[j]
	}
	return sorted, nil
}

// notEnough builds the ErrNotEnoughDrives error.
func (req *Request) notEnough(ok, notReady, full, excluded int) error {
	what := req.Label
	if what == "" {
		what = fmt.Sprintf("a stripe of %d units", req.Width)
	}
	if len(req.Existing) > 0 {
		what += fmt.Sprintf(" (repair keeping %s)", plural(len(req.Existing), "unit"))
	}
	if len(req.Candidates) == 0 {
		return fmt.Errorf("%w: pool has no drives, %s needs at least %d: add drives to the pool", ErrNotEnoughDrives, what, req.Min)
	}
	var why []string
	if notReady > 0 {
		why = append(why, fmt.Sprintf("%d down or not ready", notReady))
	}
	if full > 0 {
		why = append(why, fmt.Sprintf("%d with less than %d bytes free", full, req.UnitBytes))
	}
	if excluded > 0 {
		why = append(why, fmt.Sprintf("%d excluded or already used by the stripe", excluded))
	}
	if len(why) == 0 {
		why = append(why, "all usable")
	}
	return fmt.Errorf("%w: pool has %s, %s needs at least %d (%d listed: %s); bring drives up, add drives or free space, or choose a narrower protection",
		ErrNotEnoughDrives, plural(ok, "usable drive"), what, req.Min, len(req.Candidates), strings.Join(why, ", "))
}

// plural formats n and noun, adding an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
