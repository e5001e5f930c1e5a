package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// newPoolStore returns a store with n ssd drives of node n1 in pool
// "default" (created with protection mirror:2) and their ids.
func newPoolStore(t *testing.T, n int) (*Store, []DriveID) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePool(ctx, "default", "mirror:2", true); err != nil {
		t.Fatal(err)
	}
	var ids []DriveID
	for i := range n {
		id, err := s.AllocDriveID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterDrive(ctx, DriveRecord{ID: id, Node: "n1", Path: fmt.Sprintf("/d%d", i), Class: "ssd", Pool: "default"}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return s, ids
}

func TestPoolSpecValidation(t *testing.T) {
	ctx := context.Background()
	s, _ := newPoolStore(t, 4)
	for _, tc := range []struct {
		name string
		spec PoolSpec
		want string // "" ok, else a part of the ErrInvalid message
	}{
		{"fast", PoolSpec{Protection: "ec:2+1", Class: "ssd", High: 80, Low: 60}, ""},
		{"plain", PoolSpec{Protection: "mirror:2"}, ""},
		{"badclass", PoolSpec{Protection: "mirror:2", Class: "tape"}, `class "tape": want one of nvme, ssd, hdd`},
		{"lowhigh", PoolSpec{Protection: "mirror:2", High: 50, Low: 60}, "thresholds 50,60"},
		{"equal", PoolSpec{Protection: "mirror:2", High: 60, Low: 60}, "thresholds 60,60"},
		{"over", PoolSpec{Protection: "mirror:2", High: 101, Low: 60}, "thresholds 101,60"},
		{"zero", PoolSpec{Protection: "mirror:2", High: 80}, "thresholds 80,0"},
		{"wide", PoolSpec{Protection: "ec:4+2"}, "needs 6 drives"},
		{"Bad Name", PoolSpec{Protection: "mirror:2"}, "pool name"},
	} {
		_, err := s.CreatePoolSpec(ctx, tc.name, tc.spec, false)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want ErrInvalid with %q", tc.name, err, tc.want)
		}
	}
	p, err := s.GetPool(ctx, "fast")
	if err != nil || p.V != PoolRecordVersion || p.Class != "ssd" || p.High != 80 || p.Low != 60 || p.Protection != "ec:2+1" {
		t.Fatalf("fast = %+v, %v", p, err)
	}
	if p, _ := s.GetPool(ctx, "plain"); p.High != DefaultHigh || p.Low != DefaultLow || p.Class != "" {
		t.Fatalf("plain = %+v: want the default thresholds, no class", p)
	}
}

func TestPoolRecordVersions(t *testing.T) {
	ctx := context.Background()
	s, _ := newPoolStore(t, 1)
	// A record written by a weft that knew only version 1.
	if _, err := s.cli.Put(ctx, poolKey("old"), `{"v":1,"name":"old","protection":"mirror:2","created":"2025-01-02T03:04:05Z"}`); err != nil {
		t.Fatal(err)
	}
	p, err := s.GetPool(ctx, "old")
	if err != nil || p.High != DefaultHigh || p.Low != DefaultLow || p.Class != "" || p.Protection != "mirror:2" {
		t.Fatalf("version 1 record = %+v, %v", p, err)
	}
	// Modifying it writes the current version.
	if p, err = s.ModifyPool(ctx, "old", PoolSpec{Class: "hdd"}); err != nil || p.V != PoolRecordVersion || p.Class != "hdd" || p.High != DefaultHigh {
		t.Fatalf("modify = %+v, %v", p, err)
	}
	// A newer record is refused, by name and by list.
	if _, err := s.cli.Put(ctx, poolKey("new"), `{"v":3,"name":"new","protection":"mirror:2"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPool(ctx, "new"); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("version 3 record: %v", err)
	}
	if _, err := s.ListPools(ctx); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("list with a version 3 record: %v", err)
	}
}

func TestModifyAndDeletePool(t *testing.T) {
	ctx := context.Background()
	s, ids := newPoolStore(t, 3)
	if _, err := s.ModifyPool(ctx, "default", PoolSpec{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nothing to change") {
		t.Fatalf("empty modify: %v", err)
	}
	if _, err := s.ModifyPool(ctx, "nope", PoolSpec{Class: "ssd"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("modify unknown: %v", err)
	}
	// The pool has 3 drives: ec:2+2 needs 4.
	if _, err := s.ModifyPool(ctx, "default", PoolSpec{Protection: "ec:2+2"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "the pool has 3") {
		t.Fatalf("too wide: %v", err)
	}
	p, err := s.ModifyPool(ctx, "default", PoolSpec{Protection: "ec:2+1", High: 95, Low: 85})
	if err != nil || p.Protection != "ec:2+1" || p.High != 95 || p.Low != 85 {
		t.Fatalf("modify = %+v, %v", p, err)
	}
	if err := s.DeletePool(ctx, "default"); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), ids[0].String()) {
		t.Fatalf("delete with drives: %v", err)
	}
	if _, err := s.CreatePool(ctx, "empty", "mirror:2", false); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePool(ctx, "empty"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePool(ctx, "empty"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestMoveDrive(t *testing.T) {
	ctx := context.Background()
	s, ids := newPoolStore(t, 4)
	if _, err := s.CreatePoolSpec(ctx, "slow", PoolSpec{Protection: "mirror:2", Class: "hdd"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePoolSpec(ctx, "fast", PoolSpec{Protection: "mirror:2", Class: "ssd"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MoveDrive(ctx, ids[0], "slow"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "pool slow is for hdd drives") {
		t.Fatalf("class mismatch: %v", err)
	}
	if _, err := s.MoveDrive(ctx, ids[0], "default"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("move to its own pool: %v", err)
	}
	if _, err := s.MoveDrive(ctx, ids[0], "gone"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("move to unknown pool: %v", err)
	}
	d, err := s.MoveDrive(ctx, ids[0], "fast")
	if err != nil || d.Status != StatusDraining || d.MoveTo != "fast" || d.Pool != "default" || d.V != DriveRecordVersion {
		t.Fatalf("move = %+v, %v", d, err)
	}
	// default keeps 3 drives; a second leaves 2 = mirror:2's width; a
	// third would leave 1.
	if _, err := s.MoveDrive(ctx, ids[1], "fast"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MoveDrive(ctx, ids[2], "fast"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "would leave it 1 drives") {
		t.Fatalf("leaving too few: %v", err)
	}
	// The node restarts with the old pool in its flags: the record wins.
	d, err = s.RegisterDrive(ctx, DriveRecord{ID: ids[0], Node: "n1", Path: "/d0", Class: "ssd", Pool: "default"})
	if err != nil || d.MoveTo != "fast" || d.Status != StatusDraining {
		t.Fatalf("re-register during the move = %+v, %v", d, err)
	}
	if err := s.DeletePool(ctx, "fast"); !errors.Is(err, ErrInUse) {
		t.Fatalf("delete a pool drives move to: %v", err)
	}
	d, moved, err := s.FinishDriveMove(ctx, ids[0])
	if err != nil || !moved || d.Pool != "fast" || d.Status != StatusReady || d.MoveTo != "" || d.V != RecordVersion {
		t.Fatalf("finish = %+v %v, %v", d, moved, err)
	}
	if _, moved, err := s.FinishDriveMove(ctx, ids[0]); err != nil || moved {
		t.Fatalf("finish twice: %v %v", moved, err)
	}
	d, err = s.RegisterDrive(ctx, DriveRecord{ID: ids[0], Node: "n1", Path: "/d0", Class: "ssd", Pool: "default"})
	if err != nil || d.Pool != "fast" {
		t.Fatalf("re-register after the move = %+v, %v", d, err)
	}
	// Resuming a moving drive cancels its move.
	if d, err = s.SetDriveStatus(ctx, ids[1], StatusReady); err != nil || d.MoveTo != "" || d.Pool != "default" {
		t.Fatalf("resume = %+v, %v", d, err)
	}
}

// A new drive joins a pool of a class only if it is of that class; a
// pool without a class, or not made yet, takes any; a drive registered
// before keeps registering.
func TestNewDriveClass(t *testing.T) {
	ctx := context.Background()
	s, _ := newPoolStore(t, 1)
	if _, err := s.CreatePoolSpec(ctx, "slow", PoolSpec{Protection: "mirror:1", Class: "hdd"}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckDriveClass(ctx, "slow", "ssd", "/d/x"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "pool slow holds hdd drives and this one is ssd") {
		t.Fatalf("ssd into hdd pool: %v", err)
	}
	for _, c := range [][2]string{{"slow", "hdd"}, {"default", "nvme"}, {"later", "ssd"}} {
		if err := s.CheckDriveClass(ctx, c[0], c[1], "/d/x"); err != nil {
			t.Errorf("%s drive into pool %s: %v", c[1], c[0], err)
		}
	}
	id, err := s.AllocDriveID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterDrive(ctx, DriveRecord{ID: id, Node: "n1", Path: "/d/y", Class: "ssd", Pool: "slow"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("register an ssd drive in the hdd pool: %v", err)
	}
	rec, err := s.RegisterDrive(ctx, DriveRecord{ID: id, Node: "n1", Path: "/d/y", Class: "hdd", Pool: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterDrive(ctx, rec); err != nil {
		t.Fatalf("a known drive registering again: %v", err)
	}
}
