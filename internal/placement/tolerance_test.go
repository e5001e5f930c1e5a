package placement

import "testing"

// units builds a placement from "node" names, one drive per entry with ids
// 1, 2, …
func units(nodes ...string) []Unit {
	out := make([]Unit, len(nodes))
	for i, n := range nodes {
		out[i] = Unit{Drive: DriveID(i + 1), Node: n}
	}
	return out
}

func TestComputeTolerance(t *testing.T) {
	for _, tc := range []struct {
		name   string
		units  []Unit
		needed int
		want   Tolerance
	}{
		{"ec:4+2 over 3 nodes", units("a", "a", "b", "b", "c", "c"), 4, Tolerance{2, 1}},
		{"ec:4+2 on 1 node", units("a", "a", "a", "a", "a", "a"), 4, Tolerance{2, 0}},
		{"ec:4+2 over 6 nodes", units("a", "b", "c", "d", "e", "f"), 4, Tolerance{2, 2}},
		{"ec:4+2 uneven 3+2+1", units("a", "a", "a", "b", "b", "c"), 4, Tolerance{2, 0}},
		{"ec:4+2 over 4 nodes 2+2+1+1", units("a", "a", "b", "b", "c", "d"), 4, Tolerance{2, 1}},
		{"ec:4+2 five placed", units("a", "b", "c", "d", "e"), 4, Tolerance{1, 1}},
		{"ec:4+2 four placed", units("a", "b", "c", "d"), 4, Tolerance{0, 0}},
		{"ec:4+2 three left", units("a", "b", "c"), 4, Tolerance{-1, -1}},
		{"ec:8+2 over 4 nodes 3+3+2+2", units("a", "a", "a", "b", "b", "b", "c", "c", "d", "d"), 8, Tolerance{2, 0}},
		{"ec:8+2 over 5 nodes", units("a", "a", "b", "b", "c", "c", "d", "d", "e", "e"), 8, Tolerance{2, 1}},
		{"mirror:3 on 2 nodes", units("a", "a", "b"), 1, Tolerance{2, 1}},
		{"mirror:3 on 3 nodes", units("a", "b", "c"), 1, Tolerance{2, 2}},
		{"mirror:1", units("a"), 1, Tolerance{0, 0}},
		{"needed 0 counts as 1", units("a", "b"), 0, Tolerance{1, 1}},
		{"empty", nil, 1, Tolerance{-1, -1}},
		{"same drive twice", []Unit{{1, "a"}, {1, "a"}, {2, "b"}}, 1, Tolerance{1, 1}},
	} {
		if got := ComputeTolerance(tc.units, tc.needed); got != tc.want {
			t.Errorf("%s: ComputeTolerance = %v, want %v", tc.name, got, tc.want)
		}
	}
}
