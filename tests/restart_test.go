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
	t.Parallel()
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, LeaseTTL: 5 * time.Second})
	ctx := context.Background()
	healthy := func(s cluster.Status) bool { return s.Health == cluster.Healthy && s.NodesUp == 3 && s.DrivesUp == 6 }
	c.WaitStatus(time.Minute, healthy)
	if _, err := c.Admin.CreatePool(ctx, "before", "mirror:2"); err != nil {
		t.Fatal(err)
	}

	// A crash and an immediate restart: the earlier lease is still alive
	// (so the old live key says n3 is up until the new process replaces
	// it: healthy means healthy with the new incarnations serving).
	pids := livePIDs(t, c)
	if err := c.Ctl.Kill(ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	if err := c.Ctl.Start(ctx, "n3"); err != nil {
		t.Fatal(err)
	}
	took := waitRestarted(t, c, pids, healthy, "n3")
	t.Logf("n3 killed and restarted at once: healthy again after %s", took.Round(10*time.Millisecond))
	if out := nodeLog(c, "n3"); !strings.Contains(out, "taking over the registration of a crashed earlier incarnation") {
		t.Errorf("n3 did not say it took its registration over; its log:\n%s", out)
	}

	// Two of three etcd members die: no quorum, no lease can expire. Both
	// come back and the cluster with them.
	pids = livePIDs(t, c)
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
	took = waitRestarted(t, c, pids, healthy, "n2", "n3")
	t.Logf("n2 and n3 killed and restarted: healthy again after %s", took.Round(10*time.Millisecond))

	// Quorum lost, then the whole cluster stopped (n1 stops without
	// quorum: it cannot revoke its lease), then started again.
	pids = livePIDs(t, c)
	for _, n := range []string{"n2", "n3"} {
		if err := c.Ctl.Kill(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	c.Stop()
	t.Logf("stopping the cluster without quorum took %s", time.Since(start).Round(10*time.Millisecond))
	start = time.Now()
	c2 := harness.Start(t, harness.Options{Dir: c.Dir})
	waitRestarted(t, c2, pids, healthy, "n1", "n2", "n3")
	t.Logf("the whole cluster started again: healthy %s after it was asked to start", time.Since(start).Round(10*time.Millisecond))
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

// livePIDs returns the pid each node's live record names.
func livePIDs(t *testing.T, c *harness.Cluster) map[string]int {
	t.Helper()
	nodes, err := c.Admin.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, n := range nodes {
		if n.Live != nil {
			pids[n.Name] = n.Live.PID
		}
	}
	return pids
}

// waitRestarted waits until every one of nodes is registered by a process
// other than the one in before and the status is ok, and returns how long
// it took.
func waitRestarted(t *testing.T, c *harness.Cluster, before map[string]int, ok func(cluster.Status) bool, nodes ...string) time.Duration {
	t.Helper()
	start := time.Now()
	for deadline := start.Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		now := livePIDs(t, c)
		fresh := true
		for _, n := range nodes {
			fresh = fresh && now[n] != 0 && now[n] != before[n]
		}
		if fresh {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes %v not registered by new processes after a minute: before %v, now %v", nodes, before, now)
		}
	}
	c.WaitStatus(time.Minute, ok)
	return time.Since(start)
}

// nodeLog returns node's log so far.
func nodeLog(c *harness.Cluster, node string) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "nodes", node, "server.log"))
	return string(b)
}
