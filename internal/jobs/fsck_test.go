package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// fsckEnv is an FsckEnv over a namespace and job data in memory.
type fsckTestEnv struct {
	metaEnv
	data *memData
}

var _ FsckEnv = fsckTestEnv{}

func (e fsckTestEnv) JobData() TierData { return e.data }

// runFsck runs the fsck job's phases in order, as the engine would, and
// returns the sum of the counters and the report's summary.
func runFsck(t *testing.T, e fsckTestEnv, id job.JobID, params map[string]string) (map[string]int64, string) {
	t.Helper()
	ty := newFsck()
	if err := ty.CheckParams(params); err != nil {
		t.Fatal(err)
	}
	j := &job.Job{ID: id, Type: "fsck", Params: params, Parallelism: 3, Created: time.Now()}
	counts := map[string]int64{}
	var summary string
	for i, ph := range ty.Phases() {
		j.Phase = i
		r, _ := runPhase(t, e, j, ph)
		for k, v := range r.Counts {
			counts[k] += v
		}
		j.Reports = append(j.Reports, job.PhaseReport{Name: ph.Name(), Scopes: []job.ScopeReport{{Scope: "all", Counts: r.Counts}}})
		summary = r.Summary
	}
	return counts, summary
}

// For each injected kind: a dry run reports exactly the number injected
// and changes nothing, a repair fixes them all, a second run finds none;
// the report names the kind and the paths.
func TestFsckJob(t *testing.T) {
	const n = 4
	for _, tc := range []struct {
		point string
		kind  meta.FsckKind
	}{
		{"meta/create-no-backpointer", meta.FsckMissingBackpointer},
		{"meta/entry-wrong-lin", meta.FsckWrongEntry},
		{"meta/wrong-nlink", meta.FsckLinkCount},
		{"meta/orphan-inode", meta.FsckUnreachable},
		{"meta/dangling-entry", meta.FsckDanglingEntry},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			m := newMeta(t)
			e := fsckTestEnv{metaEnv{m}, &memData{m: map[string][]byte{}}}
			d := mustDir(t, m, meta.RootLIN, "d")
			for i := range 40 {
				mustFile(t, m, d, fmt.Sprintf("ok%02d", i))
			}
			if err := failpoint.Enable(tc.point, fmt.Sprintf("%d*error", n)); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				mustFile(t, m, d, fmt.Sprintf("bad%d", i))
			}
			failpoint.Disable(tc.point)
			found := func(c map[string]int64) int64 {
				var s int64
				for _, k := range meta.FsckKinds() {
					s += c[string(k)+".found"]
				}
				return s
			}
			c, sum := runFsck(t, e, 1, map[string]string{"dry-run": "true"})
			if c[string(tc.kind)+".found"] != n || found(c) != n || c[string(tc.kind)+".repaired"] != 0 {
				t.Fatalf("dry run counts %v, want %d %s found, nothing else\n%s", c, n, tc.kind, sum)
			}
			if !strings.Contains(sum, "dry run") || !strings.Contains(sum, string(tc.kind)) {
				t.Fatalf("dry run summary:\n%s", sum)
			}
			if tc.kind != meta.FsckUnreachable && !strings.Contains(sum, "/d/bad0") {
				t.Fatalf("summary lacks the first finding's path:\n%s", sum)
			}
			c, sum = runFsck(t, e, 2, map[string]string{})
			t.Logf("repair run's report:\n%s", sum)
			if c[string(tc.kind)+".found"] != n || c[string(tc.kind)+".repaired"] != n || found(c) != n {
				t.Fatalf("repair counts %v\n%s", c, sum)
			}
			c, sum = runFsck(t, e, 3, map[string]string{"dry-run": "true"})
			if found(c) != 0 || !strings.Contains(sum, "no findings") {
				t.Fatalf("after the repair: %v\n%s", c, sum)
			}
			if c["checked"] == 0 {
				t.Fatalf("nothing checked: %v", c)
			}
		})
	}
}

// The speed parameter paces checks per job: n checks at speed s take
// about n/s seconds; without it nothing waits.
func TestFsckPace(t *testing.T) {
	ty := newFsck()
	j := &job.Job{ID: 9, Params: map[string]string{"speed": "1000"}}
	ctx, cancel := context.WithCancel(bg)
	if err := ty.pace(ctx, j, 1000); err != nil { // the first batch starts at once
		t.Fatal(err)
	}
	cancel()
	if err := ty.pace(ctx, j, 1); err == nil { // the next waits: cancelled
		t.Fatal("a paced check did not wait")
	}
	if err := ty.pace(ctx, &job.Job{ID: 10, Params: map[string]string{}}, 1e6); err != nil {
		t.Fatalf("no speed limit: %v", err)
	}
	if got := slices.Sorted(func(yield func(job.JobID) bool) {
		for id := range ty.buckets {
			if !yield(id) {
				return
			}
		}
	}); !slices.Equal(got, []job.JobID{9}) {
		t.Fatalf("buckets %v", got)
	}
}
