package client

import (
	"slices"
	"sort"
)

// span is the half-open byte range [lo, hi) inside one stripe's data.
type span struct{ lo, hi int }

// spans is a set of byte ranges kept sorted, disjoint and non-adjacent
// (touching ranges are merged). A dirty stripe records in one which of its
// bytes the writers set, so that a read-modify-write fills only the others
// from the stored stripe, and a retried commit re-applies exactly them.
// The zero value is the empty set.
type spans []span

// add returns s with [lo, hi) added. Empty ranges are ignored. It may
// modify s in place: use only its result afterwards.
func (s spans) add(lo, hi int) spans {
	if lo >= hi {
		return s
	}
	// s[i:j] are the ranges [lo, hi) touches or overlaps.
	i := sort.Search(len(s), func(k int) bool { return s[k].hi >= lo })
	j := i
	for ; j < len(s) && s[j].lo <= hi; j++ {
		lo, hi = min(lo, s[j].lo), max(hi, s[j].hi)
	}
	if i == j {
		return slices.Insert(s, i, span{lo, hi})
	}
	s[i] = span{lo, hi}
	return slices.Delete(s, i+1, j)
}

// covers reports whether [lo, hi) lies wholly inside s (true if empty).
func (s spans) covers(lo, hi int) bool {
	if lo >= hi {
		return true
	}
	// Only the first range ending at or after hi can hold it.
	i := sort.Search(len(s), func(k int) bool { return s[k].hi >= hi })
	return i < len(s) && s[i].lo <= lo
}

// end is the end of the last range (0 for the empty set).
func (s spans) end() int {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1].hi
}

// clip returns s cut to [0, n).
func (s spans) clip(n int) spans {
	var out spans
	for _, r := range s {
		if r.lo >= n {
			break
		}
		out = append(out, span{r.lo, min(r.hi, n)})
	}
	return out
}

// within returns the parts of s inside [lo, hi), in order.
func (s spans) within(lo, hi int) spans {
	var out spans
	i := sort.Search(len(s), func(k int) bool { return s[k].hi > lo })
	for _, r := range s[i:] {
		if r.lo >= hi {
			break
		}
		a, b := max(r.lo, lo), min(r.hi, hi)
		if a < b {
			out = append(out, span{a, b})
		}
	}
	return out
}

// size is the number of bytes in s.
func (s spans) size() int {
	n := 0
	for _, r := range s {
		n += r.hi - r.lo
	}
	return n
}
