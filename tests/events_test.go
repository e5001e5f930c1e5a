package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/tests/harness"
)

// Low-space mode on a real cluster: filling the pool below the 5 % free
// threshold turns the mode on within seconds (weft status shows it, an
// event records it) and pauses a running rebalance, which does not free
// space; a treedelete, which does, runs in the mode and frees the space;
// the mode ends by itself and the rebalance resumes and completes.
func TestLowSpaceModeOnCluster(t *testing.T) {
	harness.Run(t, harness.ProcessByDefault, func(t *testing.T, m harness.Mode) {
		const driveSize = 64 << 20
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, Mount: true, LeaseTTL: 3 * time.Second, DriveSize: driveSize})
		ctx := context.Background()
		keep := randBytes(1, 3*unit+5)
		writeFile(t, filepath.Join(c.Mount, "keep"), keep)
		weft := func(args ...string) string {
			t.Helper()
			out, code := c.Weft(args...)
			if code != 0 {
				t.Fatalf("weft %v: exit %d: %s", args, code, out)
			}
			return out
		}
		status := func() admin.Status {
			t.Helper()
			var st admin.Status
			if err := json.Unmarshal([]byte(weft("status", "--json")), &st); err != nil {
				t.Fatal(err)
			}
			return st
		}
		st := status()
		if st.JobEngine == nil || st.JobEngine.Mode != job.ModeNormal || !strings.Contains(weft("status"), "jobs      normal") {
			t.Fatalf("job engine mode before: %+v", st.JobEngine)
		}

		// A rebalance that cannot make progress (its policy pauses its
		// workers) stays running until low-space mode pauses it. It has work:
		// a file below one unit is stored as 3 copies, on 3 of the 6 drives.
		writeFile(t, filepath.Join(c.Mount, "tilt"), randBytes(2, 900<<10))
		weft("job", "policies", "create", "hold", "--default", "paused")
		id := startJob(t, c, "rebalance", "--param", "pool=default", "--policy", "hold")
		waitJob := func(what string, ok func(job.JobView) bool) job.JobView {
			t.Helper()
			deadline := time.Now().Add(time.Minute)
			for {
				j, err := c.Admin.Job(ctx, id)
				if err == nil && ok(j) {
					return j
				}
				if time.Now().After(deadline) {
					t.Fatalf("job %d not %s after a minute: %+v (%v)", id, what, j, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		waitJob("running", func(j job.JobView) bool { return j.State == job.Running })
		if j, _ := c.Admin.Job(ctx, id); j.Phase != 0 {
			t.Fatalf("the held rebalance went past its first phase: %+v", j)
		}

		// Fill the pool: 8 MiB files under /tree until the mode is on.
		must(t, os.MkdirAll(filepath.Join(c.Mount, "tree"), 0o755))
		failures := 0
		for i := 0; ; i++ {
			if st = status(); st.JobEngine != nil && st.JobEngine.Mode == job.ModeLowSpace {
				t.Logf("low-space mode on after %d files: %s", i, st.JobEngine.Reason)
				break
			}
			if err := os.WriteFile(filepath.Join(c.Mount, "tree", fmt.Sprintf("f%03d", i)), randBytes(uint64(100+i), 8*unit), 0o644); err != nil {
				// The pool is nearly full: wait for the watcher's next look.
				if failures++; failures > 50 {
					t.Fatalf("writes fail and low-space mode is still off: %v; %+v", err, st)
				}
				time.Sleep(200 * time.Millisecond)
			}
			if i > 200 {
				t.Fatalf("wrote %d files of 8 MiB to 384 MiB of drives and the mode is off: %+v", i, st)
			}
		}
		if !strings.Contains(st.JobEngine.Reason, "below the 5% threshold") || st.JobEngine.Since.IsZero() {
			t.Fatalf("mode %+v, want a reason naming the 5%% threshold", st.JobEngine)
		}
		if out := weft("status"); !strings.Contains(out, "jobs      low-space since ") {
			t.Fatalf("weft status does not show the mode:\n%s", out)
		}
		j := waitJob("paused by the system", func(j job.JobView) bool { return j.State == job.SystemPaused })
		if !strings.Contains(j.Reason, "low-space mode") {
			t.Fatalf("paused for %q, want low-space mode", j.Reason)
		}

		// treedelete frees space, so it runs in the mode.
		td := c.WaitJob(startJob(t, c, "treedelete", "--path", "/tree", "--policy", "high"), 3*time.Minute)
		if td.State != job.Succeeded {
			t.Fatalf("treedelete in low-space mode: %+v", td)
		}
		waitJob("running again", func(j job.JobView) bool { return j.State == job.Running })
		if st = status(); st.JobEngine.Mode != job.ModeNormal {
			t.Fatalf("mode after the tree was deleted: %+v", st.JobEngine)
		}
		weft("job", "modify", fmt.Sprint(id), "--policy", "high")
		if j := c.WaitJob(id, 2*time.Minute); j.State != job.Succeeded {
			t.Fatalf("rebalance after low-space mode: %+v", j)
		}
		checkFile(t, filepath.Join(c.Mount, "keep"), keep)

		var evs []job.Event
		if err := json.Unmarshal([]byte(weft("job", "events", "list", "--json")), &evs); err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, ev := range evs {
			if ev.Kind == job.EventLowSpace || ev.Kind == job.EventSpaceRecovered {
				kinds = append(kinds, ev.Kind)
			}
		}
		if got := strings.Join(kinds, " "); got != "low-space space-recovered" {
			t.Fatalf("low-space events %q, want low-space then space-recovered: %+v", got, evs)
		}
		if out := weft("job", "events", "list"); !strings.Contains(out, "ID  TIME") || !strings.Contains(out, "low-space mode on") {
			t.Fatalf("weft job events list:\n%s", out)
		}
	})
}
