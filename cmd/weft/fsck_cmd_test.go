package main

import (
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/job"
)

// weft fsck status and stop pick the latest fsck job (stop: one not
// ended), and say so when there is none; the counts so far are a table
// per kind.
func TestFsckPick(t *testing.T) {
	jobs := []job.JobView{
		{ID: 3, Type: "fsck", State: job.Succeeded},
		{ID: 9, Type: "collect", State: job.Running},
		{ID: 5, Type: "fsck", State: job.Running},
		{ID: 7, Type: "fsck", State: job.Cancelled},
	}
	if j, err := pickFsck(jobs, false); err != nil || j.ID != 7 {
		t.Errorf("status picks %d, %v; want 7", j.ID, err)
	}
	if j, err := pickFsck(jobs, true); err != nil || j.ID != 5 {
		t.Errorf("stop picks %d, %v; want 5", j.ID, err)
	}
	if _, err := pickFsck(jobs[:2], true); err == nil || !strings.Contains(err.Error(), "no fsck job is queued, running or paused") {
		t.Errorf("stop with none running: %v", err)
	}
	if _, err := pickFsck(nil, false); err == nil || !strings.Contains(err.Error(), "weft fsck start --dry-run") {
		t.Errorf("status with none: %v", err)
	}
	var b strings.Builder
	printFsckCounts(&b, job.JobView{Phases: []job.PhaseReport{
		{Name: "entries", Scopes: []job.ScopeReport{{Scope: "lin", Counts: map[string]int64{"checked": 40, "entry-type.found": 1, "entry-type.repaired": 1}}}},
		{Name: "links", Scopes: []job.ScopeReport{{Scope: "pages", Counts: map[string]int64{"checked": 2, "unreachable.found": 2, "unreachable.changed": 1, "unreachable.failed": 1}}}},
	}})
	for _, want := range []string{"findings so far (42 checks)", "entry-type           1      1         0        0",
		"unreachable          2      0         1        1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("counts lack %q:\n%s", want, b.String())
		}
	}
}
