// Package pkitest makes throw-away certificate authorities for tests.
package pkitest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/pki"
)

// New makes a CA for cluster in a new temporary directory and issues ids
// there, valid for 127.0.0.1 and localhost (pki.DefaultHosts); it returns
// the directory.
func New(tb testing.TB, cluster string, ids ...pki.Identity) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "pki")
	if _, err := pki.InitCA(dir, cluster, time.Now()); err != nil {
		tb.Fatal(err)
	}
	for _, id := range ids {
		if _, err := pki.IssueTo(dir, dir, id, pki.DefaultHosts(""), 0, time.Now()); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}
