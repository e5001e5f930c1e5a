package tests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/tests/harness"
)

// Nodes that crashed come back, whatever the control plane went through
// meanwhile: a node restarted within a second of its crash, two of three
// etcd members killed and restarted (the quorum is lost in between), and a
// whole cluster stopped while it had no quorum and started again. Nothing
// on the restart path may wait for the lease of a dead process to expire:
// a restarting node proves its earlier incarnation gone and takes its
// registration over.
func TestRestartAfterCrashAndQuorumLoss(t *testing.T) {
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, LeaseTTL: 5 * time.Second})
	ctx := context.Background()
	healthy := func(s cluster.Status) bool { return s.Health == cluster.Healthy && s.NodesUp == 3 && s.DrivesUp == 6 }
	c.WaitStatus(time.Minute, healthy)
	if _, err := c.Admin.CreatePool(ctx, "before", "mirror:2"); err != nil {
		t.Fatal(err)
	}

	// A crash and an immediate restart: the earlier lease is still alive.
	if err := c.Ctl.Kill(ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	if err := c.Ctl.Start(ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	took := waitHealthy(t, c, healthy)
	t.Logf("n3 killed and restarted at once: healthy again after %s", took.Round(10*time.Millisecond))
	if out := nodeLog(c, "n3"); !strings.Contains(out, "taking over the registration of a crashed earlier incarnation") {
		t.Errorf("n3 did not say it took its registration over; its log:\n%s", out)
	}

	// Two of three etcd members die: no quorum, no lease can expire. Both
	// come back and the cluster with them.
	for _, n := range []string{"n2", "n3"} {
		if err := c.Ctl.Kill(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"n2", "n3"} {
		if err := c.Ctl.Start(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	took = waitHealthy(t, c, healthy)
	t.Logf("n2 and n3 killed and restarted: healthy again after %s", took.Round(10*time.Millisecond))

	// Quorum lost, then the whole cluster stopped (n1 stops without
	// quorum: it cannot revoke its lease), then started again.
	for _, n := range []string{"n2", "n3"} {
		if err := c.Ctl.Kill(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	c.Stop()
	t.Logf("stopping the cluster without quorum took %s", time.Since(start).Round(10*time.Millisecond))
	c2 := harness.Start(t, harness.Options{Dir: c.Dir})
	start = time.Now()
	c2.WaitStatus(time.Minute, healthy)
	t.Logf("the whole cluster started again: healthy after %s", time.Since(start).Round(10*time.Millisecond))
	pools, err := c2.Admin.Pools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pools {
		found = found || p.Name == "before"
	}
	if !found {
		t.Fatalf("pool created before the outages is gone: %+v", pools)
	}
}

// waitHealthy waits for ok and returns how long it took.
func waitHealthy(t *testing.T, c *harness.Cluster, ok func(cluster.Status) bool) time.Duration {
	t.Helper()
	start := time.Now()
	c.WaitStatus(time.Minute, ok)
	return time.Since(start)
}

// nodeLog returns node's log so far.
func nodeLog(c *harness.Cluster, node string) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "nodes", node, "server.log"))
	return string(b)
}
