package job

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The files under testdata/schedule/ are scheduler scenarios in the
// datadriven format (as in cockroachdb/datadriven, kept in-house):
//
//	# comment
//	schedule [max=N] [restripe-exclusive] [low-space]
//	<id> <set> p=<priority> <state> [frees-space]   one line per job
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
		t.Run(filepath.Base(f), func(t *testing.T) { runJobDD(t, f, runSchedule) })
	}
}

// jobDDCase is one command of a datadriven file.
type jobDDCase struct {
	pos   string
	cmd   string
	args  map[string]string
	input []string
}

func runSchedule(t *testing.T, c jobDDCase) string {
	if c.cmd != "schedule" {
		t.Fatalf("%s: unknown command %q", c.pos, c.cmd)
	}
	in := schedInput{MaxRunning: 3}
	if v, ok := c.args["max"]; ok {
		in.MaxRunning, _ = strconv.Atoi(v)
	}
	_, in.RestripeExclusive = c.args["restripe-exclusive"]
	_, in.LowSpace = c.args["low-space"]
	for _, line := range c.input {
		f := strings.Fields(line)
		if len(f) < 4 {
			t.Fatalf("%s: job line %q: want <id> <set> p=<priority> <state> [frees-space]", c.pos, line)
		}
		id, err := ParseJobID(f[0])
		if err != nil {
			t.Fatalf("%s: %v", c.pos, err)
		}
		set, err := ParseExclusionSet(f[1])
		if err != nil {
			t.Fatalf("%s: %v", c.pos, err)
		}
		p, err := strconv.Atoi(strings.TrimPrefix(f[2], "p="))
		if err != nil {
			t.Fatalf("%s: priority %q", c.pos, f[2])
		}
		j := schedJob{ID: id, Set: set, Priority: p, State: State(f[3])}
		if !j.State.valid() {
			t.Fatalf("%s: state %q", c.pos, f[3])
		}
		j.FreesSpace = slices.Contains(f[4:], "frees-space")
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

// runJobDD runs every case of path through run, comparing (or, with
// -rewrite-job, replacing) the expected outputs.
func runJobDD(t *testing.T, path string, run func(t *testing.T, c jobDDCase) string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			if i < len(lines)-1 {
				out.WriteString(line + "\n")
			}
			continue
		}
		c := jobDDCase{pos: fmt.Sprintf("%s:%d", path, i+1), args: map[string]string{}}
		fields := strings.Fields(line)
		c.cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.args[k] = v
		}
		out.WriteString(line + "\n")
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			c.input = append(c.input, lines[i])
			out.WriteString(lines[i] + "\n")
		}
		if i == len(lines) {
			t.Fatalf("%s: no ---- after the command", c.pos)
		}
		var want []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			want = append(want, lines[i])
		}
		i--
		got := strings.TrimRight(run(t, c), "\n")
		out.WriteString("----\n" + got + "\n")
		if !*rewriteJob && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", c.pos, line, got, strings.Join(want, "\n"))
		}
	}
	if *rewriteJob {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
