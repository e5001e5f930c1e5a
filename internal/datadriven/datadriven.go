// Package datadriven runs test scenarios written in the datadriven format
// (as in cockroachdb/datadriven, kept in-house to stay off go.mod):
//
//	# comment
//	command key=value ...
//	input lines
//	----
//	expected output (no blank lines)
//	<blank line>
//
// It is test support only: production code never imports it.
package datadriven

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Case is one command of a file.
type Case struct {
	// Pos is "file:line", for messages.
	Pos string
	Cmd string
	// Args are the command's key=value arguments (a bare key maps to "").
	Args  map[string]string
	Input []string
}

// Arg returns the argument key, or def when the command does not give it.
func (c Case) Arg(key, def string) string {
	if v, ok := c.Args[key]; ok {
		return v
	}
	return def
}

// Files returns the files under dir, failing the test if there are none.
func Files(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("datadriven: no testdata under %s: %v", dir, err)
	}
	return files
}

// RunFile runs every case of path through run and compares its output with
// the expected one; with rewrite it writes the outputs back into the file
// instead (review the diff).
func RunFile(t testing.TB, path string, rewrite bool, run func(c Case) string) {
	t.Helper()
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
		c := Case{Pos: fmt.Sprintf("%s:%d", path, i+1), Args: map[string]string{}}
		fields := strings.Fields(line)
		c.Cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.Args[k] = v
		}
		out.WriteString(line + "\n")
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			c.Input = append(c.Input, lines[i])
			out.WriteString(lines[i] + "\n")
		}
		if i == len(lines) {
			t.Fatalf("%s: no ---- after the command", c.Pos)
		}
		var want []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			want = append(want, lines[i])
		}
		i-- // let the loop see the blank line
		got := strings.TrimRight(run(c), "\n")
		out.WriteString("----\n" + got + "\n")
		if !rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", c.Pos, line, got, strings.Join(want, "\n"))
		}
	}
	if rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
