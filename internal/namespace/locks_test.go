package namespace

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/meta"
)

// TestLocksInEtcd runs the lock table on etcd with two sessions of real
// leases: a conflict is refused, a waiter is woken by the holder's lease
// being revoked (a dead mount), and released locks leave no key behind.
func TestLocksInEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd member")
	}
	ctx := context.Background()
	cli := etcdtest.New(t)
	var ms []*meta.Meta
	var leases []clientv3.LeaseID
	for i := 0; i < 2; i++ {
		lease, err := cli.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		m, err := OpenSession(ctx, cli, true, false, meta.SessionID(lease.ID))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		leases = append(leases, lease.ID)
	}
	a, b := ms[0], ms[1]
	owner := func(i int) meta.LockOwner { return meta.LockOwner{Session: meta.SessionID(leases[i]), Owner: 7} }
	const lin = meta.LIN(1234)
	wr := func(i int, start, end uint64) meta.Lock {
		return meta.Lock{Owner: owner(i), Type: meta.LockWrite, Start: start, End: end, PID: uint32(10 + i)}
	}
	if err := a.SetLock(ctx, lin, wr(0, 0, 99), false); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLock(ctx, lin, wr(1, 50, 149), false); !errors.Is(err, meta.ErrLocked) {
		t.Fatalf("B over A's range: %v, want ErrLocked", err)
	}
	if err := b.SetLock(ctx, lin, wr(1, 100, 149), false); err != nil {
		t.Fatalf("B beside A's range: %v", err)
	}
	c, found, err := b.TestLock(ctx, lin, wr(1, 0, 0))
	if err != nil || !found || c.PID != 10 || c.Owner != owner(0) {
		t.Fatalf("TestLock: %v %v %v, want A's lock, pid 10", c, found, err)
	}
	// Two clients racing for one range: exactly one wins each round.
	for round := 0; round < 20; round++ {
		l := meta.LIN(5000 + round)
		errs := make(chan error, 2)
		for i, m := range ms {
			go func() { errs <- m.SetLock(ctx, l, wr(i, 0, meta.MaxLockOffset), false) }()
		}
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) {
			t.Fatalf("round %d: both or neither got the lock: %v, %v", round, e1, e2)
		}
	}
	for _, m := range ms {
		for round := 0; round < 20; round++ {
			if err := m.UnlockOwner(ctx, meta.LIN(5000+round), 7, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A waiter is woken when the holder's lease goes.
	got := make(chan error, 1)
	start := time.Now()
	go func() { got <- b.SetLock(ctx, lin, wr(1, 0, 9), true) }()
	select {
	case err := <-got:
		t.Fatalf("B's wait returned while A holds the range: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := cli.Revoke(ctx, leases[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("B's wait after A's lease was revoked: %v", err)
		}
		t.Logf("B got the lock %s after the wait began", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("B still waits 10 s after A's lease was revoked")
	}
	if err := a.SetLock(ctx, lin, wr(0, 500, 599), false); !errors.Is(err, meta.ErrLocksLost) {
		t.Fatalf("a lock through a revoked lease: %v, want ErrLocksLost", err)
	}
	// A wait cut short ends with the context's error.
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	c3, err := OpenSession(ctx, cli, true, false, meta.SessionID(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	l3 := meta.Lock{Owner: meta.LockOwner{Session: meta.SessionID(lease.ID), Owner: 7}, Type: meta.LockRead, Start: 5, End: 5}
	if err := c3.SetLock(wctx, lin, l3, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its deadline: %v, want DeadlineExceeded", err)
	}
	if err := b.UnlockOwner(ctx, lin, 7, false); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, LocksPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Fatalf("%d lock records left in etcd after every lock was released", resp.Count)
	}
}
