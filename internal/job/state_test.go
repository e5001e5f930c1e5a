package job

import "testing"

func TestTransitions(t *testing.T) {
	all := []State{Queued, Running, Paused, SystemPaused, Cancelling, Cancelled, Succeeded, Failed}
	allowed := map[[2]State]bool{
		{Queued, Running}: true, {Queued, Paused}: true, {Queued, Cancelling}: true, {Queued, Failed}: true,
		{Running, Paused}: true, {Running, SystemPaused}: true, {Running, Cancelling}: true,
		{Running, Succeeded}: true, {Running, Failed}: true,
		{Paused, Queued}: true, {Paused, Cancelling}: true,
		{SystemPaused, Running}: true, {SystemPaused, Paused}: true, {SystemPaused, Cancelling}: true,
		{SystemPaused, Failed}:  true,
		{Cancelling, Cancelled}: true,
	}
	for _, from := range all {
		for _, to := range all {
			if got := CanTransition(from, to); got != allowed[[2]State{from, to}] {
				t.Errorf("CanTransition(%s, %s) = %v", from, to, got)
			}
		}
		if from.Terminal() != (from == Cancelled || from == Succeeded || from == Failed) {
			t.Errorf("%s.Terminal() = %v", from, from.Terminal())
		}
	}
}

func TestParse(t *testing.T) {
	if id, err := ParseJobID("42"); err != nil || id != 42 || id.String() != "42" {
		t.Fatalf("ParseJobID(42) = %v, %v", id, err)
	}
	for _, s := range []string{"", "0", "-1", "x", "1.5"} {
		if _, err := ParseJobID(s); err == nil {
			t.Errorf("ParseJobID(%q) accepted", s)
		}
	}
	for _, s := range []ExclusionSet{SetNone, SetMark, SetRestripe, SetMark | SetRestripe} {
		got, err := ParseExclusionSet(s.String())
		if err != nil || got != s {
			t.Errorf("ParseExclusionSet(%q) = %v, %v", s.String(), got, err)
		}
	}
	if _, err := ParseExclusionSet("mark+sweep"); err == nil {
		t.Error("ParseExclusionSet(mark+sweep) accepted")
	}
}

func TestSplitRange(t *testing.T) {
	for _, tc := range []struct {
		from, to uint64
		n, want  int
	}{
		{0, 100, 7, 7}, {0, 3, 8, 3}, {5, 5, 4, 0}, {10, 11, 0, 1}, {0, 1 << 63, 96, 96},
	} {
		got := SplitRange("s", tc.from, tc.to, tc.n)
		if len(got) != tc.want {
			t.Fatalf("SplitRange(%d, %d, %d): %d tasks, want %d", tc.from, tc.to, tc.n, len(got), tc.want)
		}
		next := tc.from
		var lo, hi uint64 = ^uint64(0), 0
		for _, s := range got {
			if s.From != next || s.To <= s.From || s.Scope != "s" {
				t.Fatalf("SplitRange(%d, %d, %d): bad task %+v after %d", tc.from, tc.to, tc.n, s, next)
			}
			lo, hi = min(lo, s.To-s.From), max(hi, s.To-s.From)
			next = s.To
		}
		if len(got) > 0 && (next != tc.to || hi-lo > 1) {
			t.Fatalf("SplitRange(%d, %d, %d) = %+v: not a cover in near-equal parts", tc.from, tc.to, tc.n, got)
		}
	}
	if err := checkSpecs([]TaskSpec{{Scope: "a", From: 0, To: 10}, {Scope: "b", From: 5, To: 15}, {Scope: "a", From: 10, To: 20}}); err != nil {
		t.Fatal(err)
	}
	if err := checkSpecs([]TaskSpec{{Scope: "a", From: 0, To: 10}, {Scope: "a", From: 9, To: 20}}); err == nil {
		t.Fatal("overlap accepted")
	}
	if err := checkSpecs([]TaskSpec{{Scope: "a", From: 3, To: 3}}); err == nil {
		t.Fatal("empty range accepted")
	}
}
