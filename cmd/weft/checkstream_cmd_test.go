package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runIn is run with standard input.
func runIn(stdin []byte, args ...string) (string, error) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(bytes.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestCheckstreamCommands writes a stream, checks it from a file and from
// standard input, damages it and checks the report and exit status.
func TestCheckstreamCommands(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "s")
	out, err := run("checkstream", "gen", f, "--size", "1MiB", "--block", "4KiB", "--id", "cafef00d")
	if err != nil || !strings.Contains(out, "wrote stream 00000000cafef00d: 1048576 bytes in 256 blocks of 4KiB") {
		t.Fatalf("gen: %v\n%s", err, out)
	}
	out, err = run("checkstream", "check", f, "--id", "cafef00d")
	if err != nil || !strings.HasSuffix(out, "checkstream: VALID 1048576 bytes (stream 00000000cafef00d)\n") {
		t.Fatalf("check: %v\n%s", err, out)
	}
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err = runIn(data, "checkstream", "check", "-")
	if err != nil || !strings.Contains(out, "checkstream[stdin]") || !strings.Contains(out, "VALID 1048576 bytes") {
		t.Fatalf("check -: %v\n%s", err, out)
	}

	clear(data[10000:20000])
	out, err = runIn(data[:900000], "checkstream", "check", "-")
	if !errors.Is(err, errNotValid) {
		t.Fatalf("damaged: err %v\n%s", err, out)
	}
	for _, want := range []string{"zero     10000   10000", "missing  900000  148576", "checkstream: FAILED valid=890000 zero=10000 corrupt=0 missing=148576\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("damaged: no %q in\n%s", want, out)
		}
	}
	out, err = runIn(data[:900000], "checkstream", "check", "-", "--json")
	var rep struct {
		OK      bool
		Extents []struct {
			Class         string
			Offset, Bytes int64
		}
	}
	if !errors.Is(err, errNotValid) || json.Unmarshal([]byte(out), &rep) != nil || rep.OK || len(rep.Extents) != 4 || rep.Extents[1].Class != "zero" || rep.Extents[1].Offset != 10000 {
		t.Errorf("--json: %v %+v\n%s", err, rep, out)
	}
}

func TestCheckstreamUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"checkstream", "gen", filepath.Join(dir, "x")}, "give --size"},
		{[]string{"checkstream", "gen", filepath.Join(dir, "x"), "--size", "lots"}, `--size: drive: invalid argument: size "lots"`},
		{[]string{"checkstream", "gen", filepath.Join(dir, "x"), "--size", "1M", "--block", "1000"}, "block size 1000: want a multiple of 512"},
		{[]string{"checkstream", "gen", filepath.Join(dir, "x"), "--size", "1M", "--block", "1T"}, "block size"},
		{[]string{"checkstream", "gen", filepath.Join(dir, "x"), "--size", "10"}, "size 10: a stream is at least 48 bytes"},
		{[]string{"checkstream", "gen", filepath.Join(dir, "x"), "--size", "1M", "--id", "xyz"}, `--id "xyz": want up to 16 hex digits`},
		{[]string{"checkstream", "gen", filepath.Join(dir, "no", "x"), "--size", "1M"}, "give a FILE that can be written"},
		{[]string{"checkstream", "check", filepath.Join(dir, "none")}, "give a readable FILE"},
		{[]string{"checkstream", "check"}, "takes one FILE"},
		{[]string{"checkstream", "frob"}, `unknown command "frob" for "weft checkstream"`},
	} {
		out, err := run(tc.args...)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v (%s), want a usage error with %q", tc.args, err, out, tc.want)
		}
	}
}
