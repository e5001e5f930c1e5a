package job

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/datadriven"
)

// The files under testdata/schedule/ are scheduler scenarios in the
// datadriven format (as in cockroachdb/datadriven, kept in-house):
//
//	# comment
//	schedule [max=N] [restripe-exclusive] [low-space]
//	<id> <set> p=<priority> <state> [frees-space] [reason=<text>]
//	                                                one line per job; the
//	                                                reason (to the end of
//	                                                the line) it has now
//	----
//	job <id>: <from> -> <to>: <reason>   a state change
//	job <id>: <state>: <reason>          a job that keeps waiting, and why
//	running: <ids>                       the running set afterwards
//
// Run `go test ./internal/job -run ScheduleDataDriven -rewrite-job` to
// rewrite the expected outputs after an intended change, and review the
// diff.
var rewriteJob = flag.Bool("rewrite-job", false, "rewrite the expected output of the job engine's datadriven tests")

func TestScheduleDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/schedule/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			datadriven.RunFile(t, f, *rewriteJob, func(c jobDDCase) string { return runSchedule(t, c) })
		})
	}
}

func runSchedule(t *testing.T, c jobDDCase) string {
	if c.Cmd != "schedule" {
		t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	}
	in := schedInput{MaxRunning: 3}
	if v, ok := c.Args["max"]; ok {
		in.MaxRunning, _ = strconv.Atoi(v)
	}
	_, in.RestripeExclusive = c.Args["restripe-exclusive"]
	_, in.LowSpace = c.Args["low-space"]
	for _, line := range c.Input {
		line, had, _ := strings.Cut(line, "reason=")
		f := strings.Fields(line)
		if len(f) < 4 {
			t.Fatalf("%s: job line %q: want <id> <set> p=<priority> <state> [frees-space]", c.Pos, line)
		}
		id, err := ParseJobID(f[0])
		if err != nil {
			t.Fatalf("%s: %v", c.Pos, err)
		}
		set, err := ParseExclusionSet(f[1])
		if err != nil {
			t.Fatalf("%s: %v", c.Pos, err)
		}
		p, err := strconv.Atoi(strings.TrimPrefix(f[2], "p="))
		if err != nil {
			t.Fatalf("%s: priority %q", c.Pos, f[2])
		}
		j := schedJob{ID: id, Set: set, Priority: p, State: State(f[3])}
		if !j.State.valid() {
			t.Fatalf("%s: state %q", c.Pos, f[3])
		}
		j.FreesSpace = slices.Contains(f[4:], "frees-space")
		j.Reason = had
		in.Jobs = append(in.Jobs, j)
	}
	ds := schedule(in)
	var out []string
	state := map[JobID]State{}
	for _, j := range in.Jobs {
		state[j.ID] = j.State
	}
	for _, d := range ds {
		if d.To != d.From {
			out = append(out, fmt.Sprintf("job %d: %s -> %s", d.ID, d.From, d.To))
			if d.Reason != "" {
				out[len(out)-1] += ": " + d.Reason
			}
			state[d.ID] = d.To
		} else {
			out = append(out, fmt.Sprintf("job %d: %s: %s", d.ID, d.From, d.Reason))
		}
	}
	var running []string
	for _, j := range in.Jobs {
		if state[j.ID] == Running {
			running = append(running, j.ID.String())
		}
	}
	out = append(out, "running: "+strings.Join(running, " "))
	return strings.Join(out, "\n")
}

// jobDDCase is one command of a datadriven file.
type jobDDCase = datadriven.Case
