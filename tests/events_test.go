package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/tests/harness"
)

// Low-space mode on a real cluster: raising low_space_threshold above the
// pools' free space turns the mode on within a few seconds (weft status
// shows it, an event records it) and pauses a running job of a type that
// does not free space; lowering it again ends the mode and the job
// resumes by itself and completes.
func TestLowSpaceModeOnCluster(t *testing.T) {
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, Mount: true, LeaseTTL: 3 * time.Second})
	ctx := context.Background()
	for i := range 20 {
		writeFile(t, filepath.Join(c.Mount, fmt.Sprintf("f%02d", i)), randBytes(uint64(i), 64<<10))
	}
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
	const threshold = 50 // the highest the setting takes
	for _, p := range st.Pools {
		if p.TotalBytes > 0 && 100*float64(p.FreeBytes)/float64(p.TotalBytes) >= threshold {
			t.Skipf("pool %s has %d%% free: a threshold of %d%% cannot force low-space mode on this file system", p.Name, 100*p.FreeBytes/p.TotalBytes, threshold)
		}
	}

	// A job that cannot make progress (its policy pauses its workers)
	// stays running until low-space mode pauses it.
	weft("job", "policies", "create", "hold", "--default", "paused")
	id := startJob(t, c, "integrityscan", "--dry-run", "--policy", "hold")
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

	weft("job", "settings", "--low-space-threshold", fmt.Sprint(threshold))
	deadline := time.Now().Add(time.Minute)
	for {
		st = status()
		if st.JobEngine != nil && st.JobEngine.Mode == job.ModeLowSpace {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("low-space mode not on a minute after the threshold rose: %+v", st.JobEngine)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if want := fmt.Sprintf("below the %d%% threshold", threshold); !strings.Contains(st.JobEngine.Reason, want) || st.JobEngine.Since.IsZero() {
		t.Fatalf("mode %+v, want a reason with %q", st.JobEngine, want)
	}
	if out := weft("status"); !strings.Contains(out, "jobs      low-space since ") {
		t.Fatalf("weft status does not show the mode:\n%s", out)
	}
	j := waitJob("paused by the system", func(j job.JobView) bool { return j.State == job.SystemPaused })
	if !strings.Contains(j.Reason, "low-space mode") {
		t.Fatalf("paused for %q, want low-space mode", j.Reason)
	}

	weft("job", "settings", "--low-space-threshold", "5")
	waitJob("running again", func(j job.JobView) bool { return j.State == job.Running })
	if st = status(); st.JobEngine.Mode != job.ModeNormal {
		t.Fatalf("mode after the threshold fell: %+v", st.JobEngine)
	}
	weft("job", "modify", fmt.Sprint(id), "--policy", "high")
	if j := c.WaitJob(id, 2*time.Minute); j.State != job.Succeeded {
		t.Fatalf("job after low-space mode: %+v", j)
	}

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
}
