package placement

import (
	"cmp"
	"fmt"
	"slices"
)

// Tolerance is how many failures a stripe survives and stays readable:
// any Drives drives, or any Nodes nodes, may fail. A value of -1 means the
// stripe cannot be read even with no failure (fewer units than needed).
type Tolerance struct {
	Drives int
	Nodes  int
}

// String formats t as "drives=2 nodes=1".
func (t Tolerance) String() string { return fmt.Sprintf("drives=%d nodes=%d", t.Drives, t.Nodes) }

// ComputeTolerance returns the exact tolerance of a stripe whose units are
// placed as given, when needed units suffice to read it (K for ec:K+M, 1 for
// a mirror; needed < 1 counts as 1). For each failure domain (drive, node)
// it is the largest t such that losing any t domains leaves at least needed
// units: the worst t domains to lose are those holding the most units. A
// drive listed in several units (which Place never does) counts once per
// unit it holds. It is pure and does not modify units.
func ComputeTolerance(units []Unit, needed int) Tolerance {
	needed = max(needed, 1)
	return Tolerance{
		Drives: domainTolerance(units, needed, func(u Unit) DriveID { return u.Drive }),
		Nodes:  domainTolerance(units, needed, func(u Unit) string { return u.Node }),
	}
}

// domainTolerance removes the most loaded domains (by key) one by one while
// at least needed units remain.
func domainTolerance[K comparable](units []Unit, needed int, key func(Unit) K) int {
	if len(units) < needed {
		return -1
	}
	load := make(map[K]int)
	for _, u := range units {
		load[key(u)]++
	}
	counts := make([]int, 0, len(load))
	for _, n := range load {
		counts = append(counts, n)
	}
	slices.SortFunc(counts, func(a, b int) int { return cmp.Compare(b, a) })
	left, t := len(units), 0
	for _, n := range counts {
		if left-n < needed {
			break
		}
		left -= n
		t++
	}
	return t
}
