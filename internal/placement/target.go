package placement

import (
	"cmp"
	"slices"
)

// TargetTolerance returns the tolerance a stripe of width units, of which
// needed suffice to read it, gets when its units are spread as evenly as
// possible over the pool's drives in service (Usable), whether they are up
// now or not: the tolerance the pool could give every stripe of that
// protection with all its drives and nodes up. A stripe placed below it
// (written while a node was down, say) loses data at a failure its pool
// was meant to survive; repair re-places it.
//
// The units go one at a time to the node holding the fewest so far among
// those with a drive left (no drive twice), as Place spreads them; that
// minimises the largest number of units on any node, which is what the
// node tolerance depends on. With fewer drives than units, only as many
// units are counted as there are drives. Free space is not considered (a
// full pool still has its target: add capacity). It is pure.
func TargetTolerance(cands []Candidate, width, needed int) Tolerance {
	perNode := map[string]int{}
	for _, c := range cands {
		if c.Usable {
			perNode[c.Node]++
		}
	}
	type node struct {
		name         string
		drives, used int
	}
	nodes := make([]node, 0, len(perNode))
	for n, d := range perNode {
		nodes = append(nodes, node{name: n, drives: d})
	}
	slices.SortFunc(nodes, func(a, b node) int { return cmp.Compare(a.name, b.name) })
	units := make([]Unit, 0, width)
	for len(units) < width {
		best := -1
		for i, n := range nodes {
			if n.used < n.drives && (best < 0 || n.used < nodes[best].used) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		nodes[best].used++
		units = append(units, Unit{Drive: DriveID(len(units) + 1), Node: nodes[best].name})
	}
	return ComputeTolerance(units, needed)
}

// Spread chooses units of a stripe to move so that its units spread over
// more nodes: the units it returns (indexes into units), re-placed by
// Place with the others as Existing, raise the stripe's node tolerance as
// far as the eligible drives allow (up, usable, with unitBytes free, not
// holding a unit of the stripe). units are the stripe's units that stay
// where they are unless moved; pending is how many more units will be
// placed anyway (a repair's rebuilt units), which Place puts on the least
// loaded nodes first.
//
// It simulates Place: the pending units go to the least loaded nodes with
// a drive left; then, while the most loaded node holding a unit holds at
// least two more than the least loaded node with a drive left, one unit
// moves from the first to the second (the highest-indexed unit of that
// node: parity before data). It returns nothing when no move raises the
// tolerance (every node already within one unit of the others, or no
// eligible node with room), so a stripe is never moved for nothing. It is
// pure and deterministic.
func Spread(units []Unit, pending int, cands []Candidate, needed int, unitBytes int64) []int {
	used := make(map[DriveID]bool, len(units))
	load := map[string]int{}
	for _, u := range units {
		used[u.Drive] = true
		load[u.Node]++
	}
	room := map[string]int{} // eligible drives left per node
	for _, c := range cands {
		if c.Up && c.Usable && c.FreeBytes >= unitBytes && !used[c.ID] {
			room[c.Node]++
			if _, ok := load[c.Node]; !ok {
				load[c.Node] = 0
			}
		}
	}
	names := make([]string, 0, len(load))
	for n := range load {
		names = append(names, n)
	}
	slices.Sort(names)
	emptiest := func(skip string) string {
		best := ""
		for _, n := range names {
			if n != skip && room[n] > 0 && (best == "" || load[n] < load[best]) {
				best = n
			}
		}
		return best
	}
	for ; pending > 0; pending-- {
		n := emptiest("")
		if n == "" {
			break
		}
		load[n]++
		room[n]--
	}
	before := loadTolerance(load, needed)
	byNode := map[string][]int{} // movable units per node, by index
	for i, u := range units {
		byNode[u.Node] = append(byNode[u.Node], i)
	}
	var moved []int
	for {
		src := ""
		for _, n := range names {
			if len(byNode[n]) > 0 && (src == "" || load[n] > load[src]) {
				src = n
			}
		}
		if src == "" {
			break
		}
		dst := emptiest(src)
		if dst == "" || load[src]-load[dst] < 2 {
			break
		}
		k := len(byNode[src]) - 1
		moved = append(moved, byNode[src][k])
		byNode[src] = byNode[src][:k]
		load[src]--
		load[dst]++
		room[dst]--
	}
	if loadTolerance(load, needed) <= before {
		return nil
	}
	slices.Sort(moved)
	return moved
}

// loadTolerance is the node tolerance of a stripe with load[n] units on
// node n.
func loadTolerance(load map[string]int, needed int) int {
	var units []Unit
	for n, k := range load {
		for range k {
			units = append(units, Unit{Drive: DriveID(len(units) + 1), Node: n})
		}
	}
	return ComputeTolerance(units, needed).Nodes
}
