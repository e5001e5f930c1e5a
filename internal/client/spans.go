package client

// span is the half-open byte range [lo, hi) inside one stripe's data.
type span struct{ lo, hi int }

// spans is a set of byte ranges kept sorted, disjoint and non-adjacent
// (touching ranges are merged). A dirty stripe records in one which of its
// bytes the writers set, so that a read-modify-write fills only the others
// from the stored stripe, and a retried commit re-applies exactly them.
// The zero value is the empty set.
type spans []span

// add returns s with [lo, hi) added. Empty ranges are ignored.
func (s spans) add(lo, hi int) spans {
	if lo >= hi {
		return s
	}
	out := make(spans, 0, len(s)+1)
	i := 0
	for ; i < len(s) && s[i].hi < lo; i++ {
		out = append(out, s[i])
	}
	for ; i < len(s) && s[i].lo <= hi; i++ {
		lo, hi = min(lo, s[i].lo), max(hi, s[i].hi)
	}
	out = append(out, span{lo, hi})
	return append(out, s[i:]...)
}

// covers reports whether [lo, hi) lies wholly inside s (true if empty).
func (s spans) covers(lo, hi int) bool {
	if lo >= hi {
		return true
	}
	for _, r := range s {
		if r.lo <= lo && hi <= r.hi {
			return true
		}
	}
	return false
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
	for _, r := range s {
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
