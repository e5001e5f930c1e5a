package tests

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/tests/harness"
)

// waitFor polls cond until it holds; it fails the test, naming what it
// waited for, after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDrainers waits until the drainer of every node has run a whole step
// that began after the call (two steps finished since: the one under way,
// if any, and a whole one): everything queued for deletion before the call
// on a drive of an up node has been freed.
func waitDrainers(t *testing.T, c *harness.Cluster) {
	t.Helper()
	ctx := context.Background()
	nodes, err := c.Admin.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	steps := func(node string) (uint64, bool) {
		ws, err := c.Admin.NodeWorkers(ctx, node)
		if err != nil {
			return 0, false
		}
		for _, w := range ws.Workers {
			if w.Name == "drainer" {
				return w.Steps, true
			}
		}
		return 0, false
	}
	for _, n := range nodes {
		from, ok := steps(n.Name)
		if !ok {
			t.Fatalf("node %s lists no drainer worker", n.Name)
		}
		waitFor(t, "node "+n.Name+"'s drainer to run a whole step", time.Minute, func() bool {
			now, ok := steps(n.Name)
			return ok && now >= from+2
		})
	}
}

// linOf returns the LIN of an open file of a mount (its inode number).
func linOf(t *testing.T, f *os.File) meta.LIN {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return meta.LIN(st.Sys().(*syscall.Stat_t).Ino)
}

// blocksOf lists the blocks of a file of a mount (weft file info).
func blocksOf(t *testing.T, c *harness.Cluster, path string) []drive.BlockID {
	t.Helper()
	var out []drive.BlockID
	for _, s := range layout(t, c, path).Stripes {
		for _, u := range s.Units {
			id, err := drive.ParseBlockID(u.Block)
			if err != nil {
				t.Fatalf("%s: block %q: %v", path, u.Block, err)
			}
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no blocks", path)
	}
	return out
}
