package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestOpenBootstrapsOnceAndRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.New(t)
	a, err := Open(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if a.ClusterID() == "" || a.ClusterID() != b.ClusterID() {
		t.Fatalf("cluster ids %q %q", a.ClusterID(), b.ClusterID())
	}
	if _, err := cli.Put(ctx, keySchema, strconv.Itoa(SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, cli); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("Open on newer schema: %v", err)
	}
}

func TestNodeLivenessFollowsLease(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.New(t)
	s, err := Open(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.RegisterNode(ctx, NodeRecord{Name: "n1", GRPCAddr: "127.0.0.1:1"}, NodeLive{PID: 42, BootID: "a"}, 2*time.Second, discard)
	if err != nil {
		t.Fatal(err)
	}
	// A second process claiming the same name is refused while n1 is up.
	if _, err := s.RegisterNode(ctx, NodeRecord{Name: "n1"}, NodeLive{BootID: "b"}, 2*time.Second, discard); !errors.Is(err, ErrNodeInUse) {
		t.Fatalf("duplicate node: %v", err)
	}
	id, err := s.AllocDriveID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterDrive(ctx, DriveRecord{ID: id, Node: "n1", Path: "/x", Class: "ssd", Pool: "default"}); err != nil {
		t.Fatal(err)
	}
	if err := sess.PublishDrive(ctx, id, DriveLive{TotalBytes: 100, FreeBytes: 60, UsedBytes: 40}); err != nil {
		t.Fatal(err)
	}
	nodes, _ := s.ListNodes(ctx)
	drives, _ := s.ListDrives(ctx)
	if len(nodes) != 1 || nodes[0].State != Up || nodes[0].Live.PID != 42 {
		t.Fatalf("nodes = %+v", nodes)
	}
	if len(drives) != 1 || drives[0].State != Up || drives[0].Status != StatusReady {
		t.Fatalf("drives = %+v", drives)
	}
	// Revoking the lease (as a crash would, after the TTL) takes both down.
	if _, err := cli.Revoke(ctx, sess.Lease()); err != nil {
		t.Fatal(err)
	}
	nodes, _ = s.ListNodes(ctx)
	drives, _ = s.ListDrives(ctx)
	if nodes[0].State != Down || drives[0].State != Down {
		t.Fatalf("after revoke: node %s drive %s", nodes[0].State, drives[0].State)
	}
	// The session notices the lost lease and publishes again under a new one.
	deadline := time.Now().Add(10 * time.Second)
	for {
		nodes, _ = s.ListNodes(ctx)
		drives, _ = s.ListDrives(ctx)
		if nodes[0].State == Up && drives[0].State == Up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("session did not re-register after losing its lease")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	nodes, _ = s.ListNodes(ctx)
	if nodes[0].State != Down {
		t.Fatalf("after Close node is %s", nodes[0].State)
	}
}

func TestDriveStatusTransitions(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := s.AllocDriveID(ctx)
	id2, _ := s.AllocDriveID(ctx)
	if id2 != id+1 {
		t.Fatalf("ids %s %s not sequential", id, id2)
	}
	if _, err := s.RegisterDrive(ctx, DriveRecord{ID: id, Node: "n1", Path: "/d", Class: "hdd", Pool: "default"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		to DriveStatus
		ok bool
	}{
		{StatusSuspended, true}, {StatusSuspended, true}, {StatusReady, true},
		{StatusRemoved, false}, {StatusDraining, true}, {StatusRemoved, true}, {StatusReady, false},
	}
	for i, st := range steps {
		d, err := s.SetDriveStatus(ctx, id, st.to)
		if st.ok != (err == nil) {
			t.Fatalf("step %d -> %s: err %v", i, st.to, err)
		}
		if err != nil && !errors.Is(err, ErrBadTransition) {
			t.Fatalf("step %d: %v is not ErrBadTransition", i, err)
		}
		if st.ok && d.Status != st.to {
			t.Fatalf("step %d: status %s", i, d.Status)
		}
	}
	if _, err := s.SetDriveStatus(ctx, 999, StatusReady); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown drive: %v", err)
	}
	// Re-registering keeps the administrator's status.
	d, err := s.RegisterDrive(ctx, DriveRecord{ID: id, Node: "n1", Path: "/d2", Class: "hdd", Pool: "other"})
	if err != nil || d.Status != StatusRemoved || d.Pool != "default" || d.Path != "/d2" {
		t.Fatalf("re-register = %+v, %v", d, err)
	}
}

func TestPools(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	// A protection wider than the cluster's drives is refused, with the
	// numbers; ifMissing (a node creating its drives' pool) is not checked.
	if _, err := s.CreatePool(ctx, "fast", "ec:4+2", false); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "has 0") {
		t.Fatalf("ec:4+2 on no drives: %v", err)
	}
	for i := range 6 {
		id, _ := s.AllocDriveID(ctx)
		if _, err := s.RegisterDrive(ctx, DriveRecord{ID: id, Node: "n1", Path: fmt.Sprintf("/d%d", i), Class: "ssd", Pool: "fast"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreatePool(ctx, "wide", "ec:32+8", false); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "needs 40 drives") || !strings.Contains(err.Error(), "has 6") {
		t.Fatalf("ec:32+8 on 6 drives: %v", err)
	}
	if _, err := s.CreatePool(ctx, "fast", "ec:4+2", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePool(ctx, "fast", "ec:4+2", false); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if p, err := s.CreatePool(ctx, "fast", "mirror:2", true); err != nil || p.Protection != "ec:4+2" {
		t.Fatalf("ifMissing: %+v %v", p, err)
	}
	for _, bad := range [][2]string{{"Fast", "ec:4+2"}, {"", "ec:4+2"}, {"x/y", "ec:4+2"}, {"slow", "raid5"}} {
		if _, err := s.CreatePool(ctx, bad[0], bad[1], false); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreatePool(%q, %q): %v", bad[0], bad[1], err)
		}
	}
	pools, err := s.ListPools(ctx)
	if err != nil || len(pools) != 1 || pools[0].Name != "fast" {
		t.Fatalf("pools = %+v %v", pools, err)
	}
	st, err := s.Status(ctx)
	if err != nil || len(st.Etcd) != 1 || !st.Etcd[0].Healthy {
		t.Fatalf("status = %+v %v", st, err)
	}
	// The member's database against its quota, and the fullest's.
	if db := st.Etcd[0].DB; db == nil || db.Used <= 0 || db.Quota < db.Used || st.EtcdDB == nil || *st.EtcdDB != *db {
		t.Fatalf("etcd database: member %+v, fullest %+v", st.Etcd[0].DB, st.EtcdDB)
	}
}

func TestDecodeRefusesNewerRecord(t *testing.T) {
	var n NodeRecord
	err := decode("k", []byte(`{"v":99,"name":"x"}`), &n)
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("err = %v", err)
	}
	if err := decode("k", []byte(`{`), &n); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("err = %v", err)
	}
}
