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
	t.Parallel()
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

// A callback on a real cluster: added with the CLI, it runs on the
// coordinator's node for an event recorded after it (a drive added with
// weft drive add), with the event's parameters in its environment and
// arguments; its exit status and output are kept with the event (weft job
// events list and show); events recorded before it run nothing.
func TestCallbackOnCluster(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.ProcessByDefault, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 1, LeaseTTL: 3 * time.Second, DriveSize: 64 << 20})
		ctx := context.Background()
		weft := func(args ...string) string {
			t.Helper()
			out, code := c.Weft(args...)
			if code != 0 {
				t.Fatalf("weft %v: exit %d: %s", args, code, out)
			}
			return out
		}
		events := func() []job.Event {
			t.Helper()
			evs, err := c.Admin.JobEvents(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			return evs
		}
		// The cluster's first events (its nodes joining) come before the
		// callback.
		waitFor(t, "the nodes' node-added events", 20*time.Second, func() bool {
			n := 0
			for _, ev := range events() {
				if ev.Kind == job.EventNodeAdded {
					n++
				}
			}
			return n == 3
		})
		dir := t.TempDir()
		log := filepath.Join(dir, "runs.log")
		script := filepath.Join(dir, "on-event")
		must(t, os.WriteFile(script, []byte(`#!/bin/sh
echo "$WEFT_EVENT_KIND $WEFT_EVENT_SUBJECT drive=$WEFT_PARAM_DRIVE node=$WEFT_PARAM_NODE arg=$1" >> `+log+`
echo "handled event $WEFT_EVENT_ID"
exit 3
`), 0o755))
		weft("callback", "add", "on-event", "--event", "all", "--command", script, "--arg", "%pool")
		if out := weft("callback", "list"); !strings.Contains(out, "on-event") || !strings.Contains(out, script+" %pool") {
			t.Fatalf("weft callback list:\n%s", out)
		}
		if out, code := c.Weft("callback", "add", "on-event", "--event", "all", "--command", script); code != 1 || !strings.Contains(out, "callback on-event") {
			t.Fatalf("the same name again: exit %d: %s", code, out)
		}
		if out, code := c.Weft("callback", "add", "x", "--event", "all", "--command", "on-event"); code != 2 || !strings.Contains(out, "absolute path") {
			t.Fatalf("a relative command: exit %d: %s", code, out)
		}

		path := filepath.Join(c.Dir, "nodes", "n2", "disk-added")
		weft("drive", "add", "n2", path, "--pool", "default", "--capacity", "32MiB")
		var added job.Event
		waitFor(t, "the drive-added event's callback run", 25*time.Second, func() bool {
			for _, ev := range events() {
				if ev.Kind == job.EventDriveAdded && ev.Params["node"] == "n2" && len(ev.Callbacks) > 0 {
					added = ev
					return true
				}
			}
			return false
		})
		run := added.Callbacks[0]
		if run.Name != "on-event" || run.Exit != 3 || run.Error != "" || !strings.Contains(run.Output, fmt.Sprintf("handled event %d", added.ID)) {
			t.Fatalf("the run: %+v", run)
		}
		b, err := os.ReadFile(log)
		must(t, err)
		want := fmt.Sprintf("drive-added %s drive=%s node=n2 arg=default\n", added.Subject, added.Subject)
		if !strings.Contains(string(b), want) {
			t.Fatalf("the script's log:\n%s\nwant the line %q", b, want)
		}
		for _, ev := range events() {
			if ev.ID < added.ID && ev.Kind == job.EventNodeAdded && len(ev.Callbacks) > 0 {
				t.Fatalf("event %d, recorded before the callback, ran it: %+v", ev.ID, ev.Callbacks)
			}
		}
		if out := weft("job", "events", "list"); !strings.Contains(out, "on-event:exit 3") {
			t.Fatalf("weft job events list:\n%s", out)
		}
		if out := weft("job", "events", "show", fmt.Sprint(added.ID)); !strings.Contains(out, "callback on-event on n") || !strings.Contains(out, "| handled event") {
			t.Fatalf("weft job events show %d:\n%s", added.ID, out)
		}
		weft("callback", "delete", "on-event")
		if out, code := c.Weft("callback", "delete", "on-event"); code != 1 || !strings.Contains(out, "no such callback") {
			t.Fatalf("delete twice: exit %d: %s", code, out)
		}
	})
}
