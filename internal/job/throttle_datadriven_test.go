package job

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files under testdata/throttle/ and testdata/policy/ are scenarios in
// the datadriven format (as in cockroachdb/datadriven, kept in-house to stay
// off go.mod, like internal/placement's):
//
//	# comment
//	command key=value ...
//	input lines
//	----
//	expected output (no blank lines)
//	<blank line>
//
// Run `go test ./internal/job -run 'ThrottleDataDriven|PolicyDataDriven'
// -rewrite-throttle` to rewrite the expected outputs after an intended
// change, and review the diff. The flag has its own name so that it cannot
// clash with other datadriven tests of the package.
var rewriteThrottle = flag.Bool("rewrite-throttle", false, "rewrite the expected output of the throttle and policy datadriven tests")

// tdCase is one command of a throttle or policy datadriven file.
type tdCase struct {
	pos   string // file:line, for messages
	cmd   string
	args  map[string]string
	input []string
}

// arg returns the value of key, or def when the command does not set it.
func (c tdCase) arg(key, def string) string {
	if v, ok := c.args[key]; ok {
		return v
	}
	return def
}

// runTDFiles runs every file under dir through a fresh run function from
// newRun, each as a subtest.
func runTDFiles(t *testing.T, dir string, newRun func(t *testing.T) func(c tdCase) string) {
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata under %s: %v", dir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runTDFile(t, f, newRun(t)) })
	}
}

// runTDFile runs every case of path through run, comparing (or, with
// -rewrite-throttle, replacing) the expected outputs.
func runTDFile(t *testing.T, path string, run func(c tdCase) string) {
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
		c := tdCase{pos: fmt.Sprintf("%s:%d", path, i+1), args: map[string]string{}}
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
		i-- // let the loop see the blank line
		got := strings.TrimRight(run(c), "\n")
		out.WriteString("----\n" + got + "\n")
		if !*rewriteThrottle && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", c.pos, line, got, strings.Join(want, "\n"))
		}
	}
	if *rewriteThrottle {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
