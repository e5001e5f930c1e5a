package client

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestSpansAdd(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   spans
		lo   int
		hi   int
		want spans
	}{
		{"empty set", nil, 3, 5, spans{{3, 5}}},
		{"empty range", spans{{1, 2}}, 4, 4, spans{{1, 2}}},
		{"before", spans{{10, 20}}, 1, 5, spans{{1, 5}, {10, 20}}},
		{"after", spans{{10, 20}}, 25, 30, spans{{10, 20}, {25, 30}}},
		{"touching left", spans{{10, 20}}, 5, 10, spans{{5, 20}}},
		{"touching right", spans{{10, 20}}, 20, 22, spans{{10, 22}}},
		{"inside", spans{{10, 20}}, 12, 15, spans{{10, 20}}},
		{"bridge", spans{{1, 3}, {5, 7}, {9, 11}}, 2, 10, spans{{1, 11}}},
		{"between", spans{{1, 3}, {9, 11}}, 5, 6, spans{{1, 3}, {5, 6}, {9, 11}}},
	} {
		if got := tc.in.add(tc.lo, tc.hi); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: add(%d, %d) = %v, want %v", tc.name, tc.lo, tc.hi, got, tc.want)
		}
	}
}

func TestSpansQueries(t *testing.T) {
	s := spans{{2, 5}, {8, 12}}
	for _, tc := range []struct {
		lo, hi int
		covers bool
		within spans
	}{
		{0, 0, true, nil},
		{2, 5, true, spans{{2, 5}}},
		{3, 4, true, spans{{3, 4}}},
		{4, 9, false, spans{{4, 5}, {8, 9}}},
		{0, 20, false, spans{{2, 5}, {8, 12}}},
		{5, 8, false, nil},
	} {
		if got := s.covers(tc.lo, tc.hi); got != tc.covers {
			t.Errorf("covers(%d, %d) = %v", tc.lo, tc.hi, got)
		}
		if got := s.within(tc.lo, tc.hi); !reflect.DeepEqual(got, tc.within) {
			t.Errorf("within(%d, %d) = %v, want %v", tc.lo, tc.hi, got, tc.within)
		}
	}
	if s.end() != 12 || s.size() != 7 || (spans{}).end() != 0 {
		t.Errorf("end %d size %d", s.end(), s.size())
	}
	if got := s.clip(9); !reflect.DeepEqual(got, spans{{2, 5}, {8, 9}}) {
		t.Errorf("clip(9) = %v", got)
	}
	if got := s.clip(8); !reflect.DeepEqual(got, spans{{2, 5}}) {
		t.Errorf("clip(8) = %v", got)
	}
}

// TestSpansModel compares random adds against a bitmap.
func TestSpansModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 200; iter++ {
		var s spans
		var bits [64]bool
		for k := 0; k < 8; k++ {
			lo := rng.IntN(64)
			hi := lo + rng.IntN(64-lo+1)
			s = s.add(lo, hi)
			for i := lo; i < hi; i++ {
				bits[i] = true
			}
		}
		n := 0
		for i, b := range bits {
			if b {
				n++
			}
			if s.covers(i, i+1) != b {
				t.Fatalf("%v: byte %d covered %v, want %v", s, i, !b, b)
			}
		}
		if s.size() != n {
			t.Fatalf("%v: size %d, want %d", s, s.size(), n)
		}
		for i := 1; i < len(s); i++ {
			if s[i-1].hi >= s[i].lo {
				t.Fatalf("%v: not sorted and disjoint", s)
			}
		}
	}
}
