package cluster

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// drv is a drive of pool with total and used bytes (free = total - used).
func drv(id DriveID, pool string, state Availability, status DriveStatus, total, used int64) Drive {
	d := Drive{DriveRecord: DriveRecord{ID: id, Node: "n1", Pool: pool, Status: status}, State: state}
	if total >= 0 {
		d.Live = &DriveLive{TotalBytes: total, UsedBytes: used, FreeBytes: total - used}
	}
	return d
}

func TestPoolUsages(t *testing.T) {
	drives := []Drive{
		drv(4, "fast", Up, StatusReady, 1000, 900),
		drv(1, "fast", Up, StatusReady, 1000, 100),
		drv(2, "fast", Down, StatusReady, 1000, 0),     // down: out
		drv(3, "fast", Up, StatusDraining, 1000, 0),    // draining: out
		drv(5, "fast", Up, StatusSuspended, 1000, 0),   // suspended: out
		drv(6, "fast", Up, StatusRemoved, 1000, 0),     // removed: out
		drv(7, "fast", Up, StatusReady, -1, 0),         // no usage published: out
		drv(8, "cap", Up, StatusReady, 4000, 1000),     // alone in its pool
		drv(9, "empty", Down, StatusReady, 1000, 1000), // pool with no drive in service: absent
	}
	got := PoolUsages(drives)
	if len(got) != 2 || got[0].Pool != "cap" || got[1].Pool != "fast" {
		t.Fatalf("pools %+v, want cap and fast", got)
	}
	fast := got[1]
	if len(fast.Drives) != 2 || fast.Drives[0].ID != 1 || fast.Drives[1].ID != 4 {
		t.Fatalf("fast drives %+v, want d1 and d4 in id order", fast.Drives)
	}
	if fast.TotalBytes != 2000 || fast.FreeBytes != 1000 || fast.FreeFraction() != 0.5 {
		t.Fatalf("fast totals %+v (free %v)", fast, fast.FreeFraction())
	}
	full, empty, spread, ok := fast.Spread()
	if !ok || full.ID != 4 || empty.ID != 1 || math.Abs(spread-0.8) > 1e-9 {
		t.Fatalf("fast spread: %v %v %v %v", full.ID, empty.ID, spread, ok)
	}
	if _, _, _, ok := got[0].Spread(); ok {
		t.Fatal("a pool of one drive has no spread")
	}
	if (PoolUsage{}).FreeFraction() != 1 || (DriveUsage{}).UsedFraction() != 0 {
		t.Fatal("empty sizes must not divide by zero")
	}
}

func TestWatchRecordAdded(t *testing.T) {
	w := WatchRecord{Drives: []DriveID{1, 2, 3}, Nodes: []string{"n1"}}
	drives := []Drive{drv(1, "p", Up, StatusReady, 1, 0), drv(5, "p", Up, StatusReady, 1, 0), drv(4, "p", Down, StatusReady, 1, 0),
		drv(6, "p", Up, StatusRemoved, 1, 0), drv(2, "p", Down, StatusDraining, 1, 0)}
	nodes := []Node{{NodeRecord: NodeRecord{Name: "n1"}}, {NodeRecord: NodeRecord{Name: "n2"}, State: Down}}
	nd, nn := w.Added(drives, nodes)
	var ids []DriveID
	for _, d := range nd {
		ids = append(ids, d.ID)
	}
	if !reflect.DeepEqual(ids, []DriveID{5, 4}) || len(nn) != 1 || nn[0].Name != "n2" {
		t.Fatalf("Added = drives %v nodes %+v; want d5 d4 (a down new drive counts, a removed one does not) and n2", ids, nn)
	}
	if !w.Remember(drives, nodes) {
		t.Fatal("Remember reported nothing new")
	}
	if !reflect.DeepEqual(w.Drives, []DriveID{1, 2, 3, 4, 5, 6}) || !reflect.DeepEqual(w.Nodes, []string{"n1", "n2"}) {
		t.Fatalf("after Remember: %+v", w)
	}
	if w.Remember(drives, nodes) {
		t.Fatal("Remember twice reported something new")
	}
	if nd, nn := w.Added(drives, nodes); len(nd)+len(nn) != 0 {
		t.Fatalf("Added after Remember: %v %v", nd, nn)
	}
}

func TestWatchStore(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	// A new cluster's bootstrap writes an empty record: everything that
	// joins is an addition.
	fresh, rev0, found, err := s.Watch(ctx)
	if err != nil || !found || rev0 == 0 || len(fresh.Drives)+len(fresh.Nodes) != 0 || fresh.V != RecordVersion {
		t.Fatalf("Watch of a fresh cluster: %+v %v %v %v", fresh, rev0, found, err)
	}
	w := WatchRecord{Drives: []DriveID{1, 2}, Nodes: []string{"n1"}}
	if _, err := s.SaveWatch(ctx, w, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("create over the bootstrap record: %v, want ErrConflict", err)
	}
	rev, err := s.SaveWatch(ctx, w, rev0)
	if err != nil {
		t.Fatal(err)
	}
	got, rev2, found, err := s.Watch(ctx)
	if err != nil || !found || rev2 != rev || !reflect.DeepEqual(got.Drives, w.Drives) || got.Updated.IsZero() || got.V != RecordVersion {
		t.Fatalf("Watch = %+v rev %d (want %d), %v %v", got, rev2, rev, found, err)
	}
	if _, err := s.SaveWatch(ctx, got, rev-1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale save: %v, want ErrConflict", err)
	}
	if _, err := s.SaveWatch(ctx, got, rev); err != nil {
		t.Fatal(err)
	}
}
