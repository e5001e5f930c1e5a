package bench

import (
	"context"
	"errors"
	"os"
	"testing"
)

// TestIO: every pattern writes its records and reads them back checked,
// leaving nothing behind; an ended context stops the tasks and is the
// error.
func TestIO(t *testing.T) {
	for _, p := range []string{Sequential, Random, Strided} {
		dir := t.TempDir()
		r, err := IO(context.Background(), IOOptions{Dir: dir, Pattern: p, Tasks: 3, Record: 4096, Segments: 20})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if r.Bytes != 3*20*4096 || r.WriteMBps <= 0 || r.ReadMBps <= 0 {
			t.Fatalf("%s: result %+v", p, r)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("%s: left %d entries behind", p, len(left))
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := IO(ctx, IOOptions{Dir: t.TempDir(), Pattern: Sequential, Tasks: 2, Record: 4096, Segments: 1000}); !errors.Is(err, context.Canceled) {
		t.Fatalf("IO with an ended context: %v", err)
	}
}
