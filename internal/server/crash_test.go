package server

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// TestCrash: a crashed node stops serving at once and leaves its lease
// behind (it still shows up), and starts again in the same process, taking
// its registration over without waiting for that lease.
func TestCrash(t *testing.T) {
	ctx := context.Background()
	etcd := etcdtest.NewTLSCluster(t, 1)
	root := t.TempDir()
	cfg, cfg2 := nodeConfig(t, "n1", etcd, root), nodeConfig(t, "n2", etcd, root) // both known when n1 enables etcd's authentication
	cfg.LeaseTTL = time.Minute                                                    // never expires by itself during the test
	n1 := startTestNode(t, cfg)
	n2 := startTestNode(t, cfg2)
	adminAddr, grpcAddr := n1.s.AdminAddr(), n1.s.GRPCAddr()

	s := n1.s
	s.Crash()
	s.Crash() // idempotent
	if err := s.Wait(ctx); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Wait after Crash: %v, want ErrCrashed", err)
	}
	n1.s = nil
	for what, addr := range map[string]string{"admin API": adminAddr, "block service": grpcAddr} {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("the crashed node's %s still accepts connections at %s", what, addr)
		}
	}
	nodes, err := n2.api.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Name == "n1" && n.State != cluster.Up {
			t.Fatalf("the crashed node is %s at once: its lease was revoked", n.State)
		}
	}
	// Started again while the crashed incarnation's lease lives: the new
	// process holds every drive of the node, which proves the old one gone,
	// so it takes the registration over at once (cluster.Registration.Holds)
	// instead of waiting for the lease.
	n1.start()
	if d := findDrive(t, n2.api, 1); d.Node != "n1" || d.State != cluster.Up {
		t.Fatalf("n1's drive after the restart: %+v", d)
	}
}
