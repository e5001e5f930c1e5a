package tests

import (
	"os"
	"testing"

	"github.com/weftfs/weft/tests/harness"
)

// TestMain removes the weft binary the tests built (harness.Main).
func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
