package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// run executes the CLI with args and returns its output and error.
func run(args ...string) (string, error) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestUsageErrors checks the command-line mistakes a script must notice:
// each is a usage error (exit status 2) that names what was wrong.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"job", "frobnicate"}, `unknown command "frobnicate" for "weft job"`},
		{[]string{"job", "lsit"}, "did you mean list?"},
		{[]string{"job", "types", "frob"}, `for "weft job types"`},
		{[]string{"drive", "frob"}, `for "weft drive"`},
		{[]string{"node", "frob"}, `for "weft node"`},
		{[]string{"local", "up", "--nodes", "0", "--dir", "/nonexistent/x"}, "--nodes 0"},
		{[]string{"local", "up", "--drives-per-node", "-1", "--dir", "/nonexistent/x"}, "--drives-per-node -1"},
		{[]string{"status", "--no-such-flag"}, "unknown flag"},
		{[]string{"callback", "frob"}, `unknown command "frob" for "weft callback"`},
		{[]string{"callback", "add"}, "takes one callback name"},
		{[]string{"callback", "add", "page", "--command", "/bin/true"}, "give --event KIND"},
		{[]string{"callback", "add", "page", "--event", "low-space"}, "give --command /PATH"},
		{[]string{"callback", "add", "page", "--event", "low-space", "--command", "page.sh"}, `--command "page.sh": give an absolute path`},
		{[]string{"callback", "add", "page", "--event", "all", "--command", "/bin/true", "--timeout", "soon"}, `invalid argument "soon" for "--timeout"`},
		{[]string{"callback", "delete"}, "takes one callback name"},
		{[]string{"job", "events", "show", "latest"}, `event id "latest"`},
		{[]string{"bench", "populate", "--inject", "dangling", "--faults", "3"}, `no failpoint injects "dangling"`},
		{[]string{"bench", "populate", "--inject", "link-count"}, "--faults 0: want at least 1"},
		{[]string{"bench", "populate", "--faults", "3"}, "--faults 3 without --inject"},
		{[]string{"fsck", "frob"}, `unknown command "frob" for "weft fsck"`},
		{[]string{"fsck", "start", "--only", "blocks"}, `--only "blocks": want namespace or layout (leave --only out to check both)`},
		{[]string{"fsck", "start", "--speed", "-5"}, `invalid argument "-5" for "--speed"`},
		{[]string{"fsck", "start", "--priority", "11"}, "--priority 11"},
		{[]string{"fsck", "start", "extra"}, "takes no arguments"},
		{[]string{"fsck", "status", "42"}, "takes no arguments"},
		{[]string{"fsck", "stop", "42"}, "takes no arguments"},
		{[]string{"bench", "populate", "--tops", "0"}, "--tops 0"},
		{[]string{"bench", "throughput", "--size", "3000", "/tmp"}, "file size 3000: want a multiple of the record size"},
		{[]string{"bench", "throughput", "--size", "lots", "/tmp"}, `--size: drive: invalid argument: size "lots"`},
		{[]string{"bench", "throughput", "--block", "512", "/tmp"}, "block size 512: want a multiple of 4KiB"},
		{[]string{"bench", "throughput", "--tests", "seqread,mixed", "/tmp"}, `test "mixed"`},
		{[]string{"bench", "throughput", "--runtime", "0s", "/tmp"}, "need a runtime or an operation count"},
		{[]string{"bench", "throughput", "http://h/"}, "want a directory or an nfs:// URL"},
		{[]string{"bench", "throughput", "nfs://h/?nfsport=0"}, `nfsport "0" is not a port number`},
		{[]string{"bench", "meta", "nfs://h/?version=4"}, `version "4": only NFSv3`},
		{[]string{"bench", "meta", "--jobs", "0", "/tmp"}, "--jobs 0"},
		{[]string{"bench", "populate", "--under", "rel"}, "absolute path"},
		{[]string{"policy", "test", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"policy", "test", "--timeout", "31m"}, "--timeout 31m0s"},
		{[]string{"qos", "frob"}, `unknown command "frob" for "weft qos"`},
		{[]string{"qos", "set"}, "takes one or more limit specifications"},
		{[]string{"qos", "set", "maintenance=300IOPS"}, `a specification starts with pool=NAME`},
		{[]string{"qos", "set", "pool=*,maintenance=300"}, `limit "300": want unlimited`},
		{[]string{"qos", "enable", "pool=*,gold=3IOPS"}, `unknown class "gold"`},
		{[]string{"qos", "disable", "now"}, "takes no arguments"},
		{[]string{"qos", "stats", "--seconds", "61"}, "--seconds 61: give 1 to 60"},
		{[]string{"qos", "stats", "--seconds", "5", "--interval", "10"}, "--interval 10: give 1 to --seconds (5)"},
		{[]string{"qos", "stats", "--fine", "--csv", "--json"}, "--csv and --json: give one of them"},
		{[]string{"qos", "stats", "--fine", "--seconds", "0"}, "--seconds 0: give 1 to 60 (the nodes keep 60 seconds)"},
		{[]string{"qos", "stats", "--fine", "--seconds", "1000"}, "--seconds 1000: give 1 to 60"},
		{[]string{"qos", "stats", "--fine", "--interval", "0"}, "--interval 0: give 1 to --seconds (10)"},
		{[]string{"qos", "stats", "--fine", "--seconds", "ten"}, `invalid argument "ten" for "--seconds"`},
		{[]string{"qos", "stats", "--fine=maybe"}, `invalid argument "maybe" for "--fine"`},
		{[]string{"qos", "show", "x"}, "takes no arguments"},
		{[]string{"job", "policies", "create", "p", "--client-p99", "-3ms"}, `--client-p99: impact: invalid argument: client p99 "-3ms": want a duration from 100µs to 1m0s`},
		{[]string{"job", "policies", "modify", "p", "--client-p99", "fast"}, `client p99 "fast": not a duration; want one such as 5ms`},
	} {
		_, err := run(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("weft %s: %v; want an error saying %q", strings.Join(tc.args, " "), err, tc.want)
			continue
		}
		var ue usageError
		if tc.args[0] != "frobnicate" && !errors.As(err, &ue) {
			t.Errorf("weft %s: %v is not a usage error (exit status 2)", strings.Join(tc.args, " "), err)
		}
	}
	// A group without a subcommand prints its help and succeeds.
	out, err := run("job")
	if err != nil || !strings.Contains(out, "Available Commands") {
		t.Errorf("weft job: %v\n%s", err, out)
	}
}
