package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

func TestProcessStart(t *testing.T) {
	a, ok := ProcessStart(os.Getpid())
	if !ok || a == 0 {
		t.Fatalf("ProcessStart(self) = %d, %v", a, ok)
	}
	if b, _ := ProcessStart(os.Getpid()); b != a {
		t.Fatalf("ProcessStart changed: %d then %d", a, b)
	}
	if _, ok := ProcessStart(1 << 30); ok {
		t.Fatal("ProcessStart of a pid that cannot exist says it runs")
	}
	if MachineBoot() == "" {
		t.Fatal("no machine boot id")
	}
}

// A node restarting after a crash takes over its own registration when the
// earlier incarnation is provably gone, and only then.
func TestRegisterTakesOverACrashedIncarnation(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	var drives []DriveID
	for i := range 2 {
		id, _ := s.AllocDriveID(ctx)
		if _, err := s.RegisterDrive(ctx, DriveRecord{ID: id, Node: "n1", Path: fmt.Sprintf("/d%d", i), Class: "ssd", Pool: "default"}); err != nil {
			t.Fatal(err)
		}
		drives = append(drives, id)
	}
	// running says which pid runs, with which start time.
	running := map[int]uint64{100: 7}
	procs := func(pid int) (uint64, bool) { st, ok := running[pid]; return st, ok }
	incarnation := 0
	register := func(ctx context.Context, live NodeLive, holds []DriveID) (*Session, error) {
		incarnation++
		live.BootID = fmt.Sprint("incarnation-", incarnation)
		return s.Register(ctx, Registration{Record: NodeRecord{Name: "n1"}, Live: live, TTL: 30 * time.Second, Log: discard,
			Holds: holds, processStart: procs})
	}
	here := NodeLive{Host: "h1", MachineBoot: "boot-1", PID: 100, ProcStart: 7}
	first, err := register(ctx, here, nil)
	if err != nil {
		t.Fatal(err)
	}
	current := first
	for _, tc := range []struct {
		name  string
		live  NodeLive
		holds []DriveID
		setup func()
		take  bool
	}{
		{"the earlier process still runs", NodeLive{Host: "h1", MachineBoot: "boot-1", PID: 200}, nil, nil, false},
		{"another machine, no drives held", NodeLive{Host: "h2", MachineBoot: "boot-9", PID: 200}, nil, nil, false},
		{"another machine, one drive of two held", NodeLive{Host: "h2", MachineBoot: "boot-9", PID: 200}, drives[:1], nil, false},
		{"the earlier pid ended", NodeLive{Host: "h1", MachineBoot: "boot-1", PID: 201, ProcStart: 9}, nil, func() { delete(running, 100) }, true},
		{"the earlier pid is another process now", NodeLive{Host: "h1", MachineBoot: "boot-1", PID: 202, ProcStart: 11}, nil, func() { running[201] = 99 }, true},
		{"the machine rebooted", NodeLive{Host: "h1", MachineBoot: "boot-2", PID: 202, ProcStart: 3}, nil, func() { running[202] = 11 }, true},
		{"another machine holding every drive", NodeLive{Host: "h2", MachineBoot: "boot-9", PID: 300, ProcStart: 1}, drives, func() { running[202] = 3 }, true},
	} {
		if tc.setup != nil {
			tc.setup()
		}
		if tc.take {
			crash(t, current)
		}
		// A refusal first waits for the earlier lease to run out (it is
		// kept alive here): a short deadline ends the wait.
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		if tc.take {
			rctx = ctx
		}
		sess, err := register(rctx, tc.live, tc.holds)
		cancel()
		if !tc.take {
			if !errors.Is(err, ErrNodeInUse) {
				t.Fatalf("%s: registered (%v); want ErrNodeInUse", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The earlier incarnation's lease is revoked at once, not left to
		// expire.
		if ttl, err := s.cli.TimeToLive(ctx, current.Lease()); err != nil || ttl.TTL > 0 {
			t.Fatalf("%s: the earlier incarnation's lease lives on: %+v, %v", tc.name, ttl, err)
		}
		nodes, _ := s.ListNodes(ctx)
		if len(nodes) != 1 || nodes[0].State != Up || nodes[0].Live.PID != tc.live.PID {
			t.Fatalf("%s: nodes = %+v", tc.name, nodes)
		}
		current = sess
	}
	if err := current.Close(); err != nil {
		t.Fatal(err)
	}
}

// crash stops a Session as a crash would: no more keepalives and no lease
// worker, the lease left to live out its TTL.
func crash(t *testing.T, ns *Session) {
	t.Helper()
	if err := ns.own.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	ns.mu.Lock()
	ns.sess.Orphan()
	ns.mu.Unlock()
}
