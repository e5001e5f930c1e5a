package placement

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// weight is the draw weight of a free-space figure. Every eligible drive
// keeps a positive weight, so a nearly full pool still draws fairly.
func weight(free int64) float64 { return max(float64(free), 1) }

// drawWeighted returns an index in [0, n) drawn with probability
// proportional to w(i). n must be > 0 and every w(i) > 0.
func drawWeighted(rng *rand.Rand, n int, w func(int) float64) int {
	total := 0.0
	for i := range n {
		total += w(i)
	}
	r := rng.Float64() * total
	for i := range n {
		r -= w(i)
		if r < 0 {
			return i
		}
	}
	return n - 1 // rounding
}

// weightedOrder returns a random permutation of [0, n) drawn without
// replacement with probability proportional to w(i) at each position
// (Efraimidis–Spirakis: sort by log(u)/w, u uniform in (0, 1]).
func weightedOrder(rng *rand.Rand, n int, w func(int) float64) []int {
	type keyed struct {
		i   int
		key float64
	}
	ks := make([]keyed, n)
	for i := range n {
		ks[i] = keyed{i, math.Log(1-rng.Float64()) / w(i)}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return cmp.Compare(b.key, a.key) })
	out := make([]int, n)
	for j, k := range ks {
		out[j] = k.i
	}
	return out
}
