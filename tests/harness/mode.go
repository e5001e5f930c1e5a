package harness

import (
	"os"
	"testing"
)

// Mode is how a test cluster runs. A test body is written once over
// Cluster and runs in either mode (Run), as etcd's cluster tests run one
// body against real binaries (e2e) and against members in the test
// process (integration).
type Mode string

const (
	// Process runs `weft local up` as a process of the weft binary built
	// from this checkout: a supervisor with one process per node and per
	// mount, as a user runs them. Kill is SIGKILL.
	Process Mode = "process"
	// InProcess runs the same supervisor (local.Up) inside the test
	// process, with every node (server.Start) and mount (mount.Run) in it
	// too (local.InProcess): no process to start, one program to debug,
	// profile and race-check. Kill is server.Server.Crash; the parts share
	// what a process owns (see local.InProcess), so a body that injects a
	// fault into one node or mount through its environment, or that maps
	// a FUSE file into memory, runs only as Process.
	InProcess Mode = "inprocess"
)

// EnvMode is the environment variable that chooses the modes test bodies
// run in: "process", "inprocess" or "both". Unset, each body runs in its
// Modes.Default. A body that cannot run in-process is skipped there with
// its reason whatever it says.
const EnvMode = "WEFT_HARNESS"

// Modes says in which modes a test body runs.
type Modes struct {
	// Default are the modes the body runs in when WEFT_HARNESS is unset
	// (make test).
	Default []Mode
	// NotInProcess, if set, is why the body cannot run in-process: it is
	// skipped there, with this reason.
	NotInProcess string
}

var (
	// Both runs a body multi-process and in-process by default.
	Both = Modes{Default: []Mode{Process, InProcess}}
	// ProcessByDefault runs a body multi-process by default, and
	// in-process too when WEFT_HARNESS asks for it: for bodies long
	// enough that running them twice would cost the default suite more
	// than the second run finds.
	ProcessByDefault = Modes{Default: []Mode{Process}}
)

// ProcessOnly returns the Modes of a body that can only run
// multi-process, and why.
func ProcessOnly(reason string) Modes {
	return Modes{Default: []Mode{Process}, NotInProcess: reason}
}

// Start starts a cluster in mode m (Options.Mode is ignored).
func (m Mode) Start(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	o.Mode = m
	return Start(tb, o)
}

// Run runs body once per selected mode (WEFT_HARNESS, else ms.Default),
// each as a subtest named for its mode, in the order Process, InProcess.
// The body starts its cluster with m.Start.
func Run(t *testing.T, ms Modes, body func(t *testing.T, m Mode)) {
	t.Helper()
	for _, m := range selected(t, ms) {
		t.Run(string(m), func(t *testing.T) {
			if m == InProcess && ms.NotInProcess != "" {
				t.Skipf("harness: multi-process only: %s", ms.NotInProcess)
			}
			body(t, m)
		})
	}
}

// selected returns the modes a body runs in.
func selected(t *testing.T, ms Modes) []Mode {
	t.Helper()
	switch v := os.Getenv(EnvMode); v {
	case "":
		return ms.Default
	case string(Process):
		return []Mode{Process}
	case string(InProcess):
		return []Mode{InProcess}
	case "both":
		return []Mode{Process, InProcess}
	default:
		t.Fatalf("harness: %s=%q: want process, inprocess or both (or unset: each test's default modes)", EnvMode, v)
		return nil
	}
}
