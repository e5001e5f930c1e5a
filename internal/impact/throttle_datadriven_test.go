package impact

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/weftfs/weft/internal/datadriven"
)

// The files under testdata/throttle/ and testdata/policy/ are scenarios in
// the datadriven format (as in cockroachdb/datadriven, kept in-house to stay
// off go.mod; runner in internal/datadriven):
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

// runTDFiles runs every file under dir through a fresh run function from
// newRun, each as a subtest.
func runTDFiles(t *testing.T, dir string, newRun func(t *testing.T) func(c tdCase) string) {
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata under %s: %v", dir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { datadriven.RunFile(t, f, *rewriteThrottle, newRun(t)) })
	}
}

// tdCase is one command of a throttle or policy datadriven file.
type tdCase = datadriven.Case
