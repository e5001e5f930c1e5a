package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/tests/harness"
)

// Job type schedules through the CLI: a fresh cluster shows mediascan's
// monthly default with its next run; modify sets, refuses and clears a
// schedule; list shows each change (table and --json).
func TestJobTypeSchedulesCLI(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 1, DrivesPerNode: 1})
		weft := func(args ...string) string {
			t.Helper()
			out, code := c.Weft(args...)
			if code != 0 {
				t.Fatalf("weft %v: exit %d: %s", args, code, out)
			}
			return out
		}
		row := func(out, typ string) string {
			t.Helper()
			for _, l := range strings.Split(out, "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[0] == typ {
					return l
				}
			}
			t.Fatalf("no %s row in:\n%s", typ, out)
			return ""
		}
		types := func() map[string]job.TypeView {
			t.Helper()
			var vs []job.TypeView
			if err := json.Unmarshal([]byte(weft("job", "types", "list", "--json")), &vs); err != nil {
				t.Fatal(err)
			}
			m := map[string]job.TypeView{}
			for _, v := range vs {
				m[v.Name] = v
			}
			return m
		}

		out := weft("job", "types", "list")
		if !strings.Contains(out, "SCHEDULE") || !strings.Contains(out, "NEXT RUN") || !strings.Contains(row(out, "mediascan"), "0 2 1 * *") {
			t.Fatalf("fresh cluster:\n%s", out)
		}
		ms := types()["mediascan"]
		if ms.Schedule != "0 2 1 * *" || ms.NextRun.UTC().Day() != 1 || ms.NextRun.UTC().Hour() != 2 || !ms.NextRun.After(time.Now()) {
			t.Fatalf("mediascan: %+v", ms)
		}
		if r := row(out, "repair"); !strings.Contains(r, " - ") {
			t.Fatalf("repair has no schedule, shown as -: %q", r)
		}

		out = weft("job", "types", "modify", "integrityscan", "--schedule", "TZ=Europe/Paris 0 3 * * sat")
		if !strings.Contains(row(out, "integrityscan"), "TZ=Europe/Paris 0 3 * * sat") {
			t.Fatalf("modify:\n%s", out)
		}
		is := types()["integrityscan"]
		paris, _ := time.LoadLocation("Europe/Paris")
		if next := is.NextRun.In(paris); next.Weekday() != time.Saturday || next.Hour() != 3 || is.Priority != 6 {
			t.Fatalf("integrityscan: %+v (next in Paris %s)", is, next)
		}

		o, code := c.Weft("job", "types", "modify", "mediascan", "--schedule", "0 0 30 2 *")
		if code == 0 || !strings.Contains(o, `schedule "0 0 30 2 *" never fires: feb never has a day 30`) {
			t.Fatalf("impossible schedule: exit %d: %s", code, o)
		}
		o, code = c.Weft("job", "types", "modify", "mediascan", "--schedule", "0 0 * * mon-xyz")
		if code == 0 || !strings.Contains(o, `day-of-week field "mon-xyz"`) {
			t.Fatalf("bad schedule: exit %d: %s", code, o)
		}

		// A priority change keeps the schedule; "" clears it.
		weft("job", "types", "modify", "mediascan", "--priority", "9")
		if ms = types()["mediascan"]; ms.Priority != 9 || ms.Schedule != "0 2 1 * *" {
			t.Fatalf("after --priority: %+v", ms.TypeSettings)
		}
		out = weft("job", "types", "modify", "mediascan", "--schedule", "")
		if r := strings.Fields(row(out, "mediascan")); r[len(r)-1] != "-" || r[len(r)-2] != "-" {
			t.Fatalf("cleared:\n%s", out)
		}
		if ms = types()["mediascan"]; ms.Schedule != "" || !ms.NextRun.IsZero() || ms.DefaultSchedule != "0 2 1 * *" {
			t.Fatalf("cleared: %+v", ms)
		}
	})
}
