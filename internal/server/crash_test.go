package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// TestCrash: a crashed node stops serving at once and leaves its lease to
// expire — it still shows up, and its name cannot be taken, until then —
// and starts again in the same process once the lease is gone.
func TestCrash(t *testing.T) {
	ctx := context.Background()
	etcd := etcdtest.NewCluster(t, 1)
	root := t.TempDir()
	cfg := nodeConfig(t, "n1", etcd.Endpoints, root)
	cfg.LeaseTTL = time.Minute // never expires by itself during the test
	n1 := startTestNode(t, cfg)
	n2 := startTestNode(t, nodeConfig(t, "n2", etcd.Endpoints, root))
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
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if s, err := Start(ctx, cfg, log); !errors.Is(err, cluster.ErrNodeInUse) {
		if err == nil {
			s.Crash()
		}
		t.Fatalf("restart while the crashed node's lease lives: %v, want ErrNodeInUse", err)
	}

	// The lease expires (revoked here, as its TTL would): the node shows
	// down, and starts again with its drives.
	cli := etcd.Client(t)
	r, err := cli.Get(ctx, "/weft/live/nodes/n1")
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("the crashed node's live key: %v, %v", r, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(r.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	n1.start()
	if d := findDrive(t, n2.api, 1); d.Node != "n1" || d.State != cluster.Up {
		t.Fatalf("n1's drive after the restart: %+v", d)
	}
}
