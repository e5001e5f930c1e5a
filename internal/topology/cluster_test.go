package topology

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/meta"
)

var bg = context.Background()

// TestCluster reads drives, node addresses and pool protection
// from a real control plane, serves them from its snapshot, and sees a
// node go down once invalidated.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	cli := etcdtest.New(t)
	store, err := cluster.Open(bg, cli)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreatePool(bg, "p0", "ec:4+2", true); err != nil { // as a node whose drives name it
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sess, err := store.RegisterNode(bg, cluster.NodeRecord{Name: "n1", GRPCAddr: "127.0.0.1:7001"}, cluster.NodeLive{BootID: "b"}, 5*time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	var ids []cluster.DriveID
	for range 2 {
		id, err := store.AllocDriveID(bg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.RegisterDrive(bg, cluster.DriveRecord{ID: id, Node: "n1", Path: "/x", Class: "ssd", Pool: "p0"}); err != nil {
			t.Fatal(err)
		}
		if err := sess.PublishDrive(bg, id, cluster.DriveLive{TotalBytes: 100, FreeBytes: 60}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := store.SetDriveStatus(bg, ids[1], cluster.StatusSuspended); err != nil {
		t.Fatal(err)
	}

	topo := New(store, time.Hour)
	ds, err := topo.Drives(bg)
	if err != nil {
		t.Fatal(err)
	}
	want := []client.DriveState{
		{ID: meta.DriveID(ids[0]), Node: "n1", Pool: "p0", Up: true, Usable: true, FreeBytes: 60, TotalBytes: 100},
		{ID: meta.DriveID(ids[1]), Node: "n1", Pool: "p0", Up: true, Usable: false, FreeBytes: 60, TotalBytes: 100},
	}
	if len(ds) != 2 || ds[0] != want[0] || ds[1] != want[1] {
		t.Fatalf("drives = %+v, want %+v", ds, want)
	}
	if addr, err := topo.NodeAddr(bg, "n1"); err != nil || addr != "127.0.0.1:7001" {
		t.Fatalf("NodeAddr = %q, %v", addr, err)
	}
	if _, err := topo.NodeAddr(bg, "nope"); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("unknown node: %v", err)
	}
	if p, err := topo.PoolProtection(bg, "p0"); err != nil || p != (erasure.Protection{Data: 4, Parity: 2}) {
		t.Fatalf("PoolProtection = %v, %v", p, err)
	}
	if _, err := topo.PoolProtection(bg, "nope"); !errors.Is(err, cluster.ErrNotFound) {
		t.Fatalf("unknown pool: %v", err)
	}

	// The node dies: the snapshot still says up until it is invalidated.
	if _, err := cli.Revoke(bg, sess.Lease()); err != nil {
		t.Fatal(err)
	}
	if ds, _ := topo.Drives(bg); !ds[0].Up {
		t.Fatalf("snapshot refreshed before its time")
	}
	topo.Invalidate()
	if ds, _ := topo.Drives(bg); ds[0].Up || ds[1].Up {
		t.Fatalf("after Invalidate: %+v", ds)
	}
}
