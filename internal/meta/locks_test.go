package meta

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// lockClients returns n Metas of sessions 1..n sharing one namespace and
// one lock table.
func lockClients(t *testing.T, n int) ([]*Meta, *MemLocks) {
	t.Helper()
	store := memkv.New(kv.Options{})
	if err := Format(bg, store, FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	locks := NewMemLocks()
	var ms []*Meta
	for i := 1; i <= n; i++ {
		m, err := Open(bg, Config{Store: store, Session: SessionID(i), Locks: locks})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms, locks
}

func plock(s SessionID, owner uint64, typ LockType, start, end uint64) Lock {
	return Lock{Owner: LockOwner{Session: s, Owner: owner}, Type: typ, Start: start, End: end, PID: uint32(100*uint64(s) + owner)}
}

func flock(s SessionID, owner uint64, typ LockType) Lock {
	return Lock{Owner: LockOwner{Session: s, Owner: owner}, Flock: true, Type: typ, End: MaxLockOffset, PID: uint32(100*uint64(s) + owner)}
}

// ranges renders locks as "owner:type[start,end]" for comparisons.
func ranges(ls []Lock) string {
	s := ""
	for _, l := range ls {
		end := fmt.Sprint(l.End)
		if l.End == MaxLockOffset {
			end = "max"
		}
		k := ""
		if l.Flock {
			k = "F"
		}
		s += fmt.Sprintf("%d%s:%s[%d,%s] ", l.Owner.Owner, k, l.Type, l.Start, end)
	}
	return s
}

func TestApplyLock(t *testing.T) {
	const M = MaxLockOffset
	for _, tc := range []struct {
		name string
		held []Lock
		req  Lock
		want string
	}{
		{"first lock", nil, plock(1, 1, LockWrite, 0, 9), "1:write[0,9] "},
		{"merge adjacent", []Lock{plock(1, 1, LockWrite, 0, 9)}, plock(1, 1, LockWrite, 10, 19), "1:write[0,19] "},
		{"merge overlapping", []Lock{plock(1, 1, LockRead, 0, 9), plock(1, 1, LockRead, 20, 29)}, plock(1, 1, LockRead, 5, 24), "1:read[0,29] "},
		{"no merge across a gap", []Lock{plock(1, 1, LockRead, 0, 9)}, plock(1, 1, LockRead, 11, 19), "1:read[0,9] 1:read[11,19] "},
		{"upgrade the middle", []Lock{plock(1, 1, LockRead, 0, 29)}, plock(1, 1, LockWrite, 10, 19), "1:read[0,9] 1:write[10,19] 1:read[20,29] "},
		{"downgrade", []Lock{plock(1, 1, LockWrite, 0, 29)}, plock(1, 1, LockRead, 0, 29), "1:read[0,29] "},
		{"unlock the middle", []Lock{plock(1, 1, LockWrite, 0, M)}, plock(1, 1, LockUnlock, 10, 19), "1:write[0,9] 1:write[20,max] "},
		{"unlock an edge", []Lock{plock(1, 1, LockWrite, 0, 29)}, plock(1, 1, LockUnlock, 20, M), "1:write[0,19] "},
		{"unlock all", []Lock{plock(1, 1, LockWrite, 0, 9), plock(1, 1, LockRead, 20, 29)}, plock(1, 1, LockUnlock, 0, M), ""},
		{"unlock nothing held", []Lock{plock(1, 1, LockWrite, 0, 9)}, plock(1, 1, LockUnlock, 10, 19), "1:write[0,9] "},
		{"other owner untouched", []Lock{plock(1, 2, LockRead, 0, 9)}, plock(1, 1, LockUnlock, 0, M), "2:read[0,9] "},
		{"same type to eof merges", []Lock{plock(1, 1, LockWrite, 100, M)}, plock(1, 1, LockWrite, 50, 99), "1:write[50,max] "},
		{"flock conversion", []Lock{flock(1, 1, LockRead)}, flock(1, 1, LockWrite), "1F:write[0,max] "},
		{"flock and posix apart", []Lock{flock(1, 1, LockWrite)}, plock(1, 1, LockUnlock, 0, M), "1F:write[0,max] "},
		{"posix beside flock", []Lock{flock(1, 1, LockWrite)}, plock(1, 1, LockRead, 0, 9), "1:read[0,9] 1F:write[0,max] "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ranges(applyLock(tc.held, tc.req)); got != tc.want {
				t.Fatalf("applyLock(%s, %s) = %q, want %q", ranges(tc.held), tc.req, got, tc.want)
			}
		})
	}
}

func TestLockRecordRoundTrip(t *testing.T) {
	ls := []Lock{plock(7, 1, LockRead, 0, 9), flock(7, 3, LockWrite)}
	got, err := decodeLocks(7, encodeLocks(ls))
	if err != nil || !slices.Equal(got, ls) {
		t.Fatalf("decode(encode(%v)) = %v, %v", ls, got, err)
	}
	b := encodeLocks(ls)
	b[0] = recordVersion + 1
	if _, err := decodeLocks(7, b); !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("a newer record version: err %v, want ErrNewerFormat", err)
	}
	if _, err := decodeLocks(7, encodeLocks(ls)[:5]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a truncated record: err %v, want ErrCorrupt", err)
	}
	lin, s, err := ParseLockKey(LockKey(42, 0xabc))
	if lin != 42 || s != 0xabc || err != nil {
		t.Fatalf("ParseLockKey(LockKey(42, 0xabc)) = %d, %x, %v", lin, s, err)
	}
	if _, _, err := ParseLockKey(LockRoot + "42/abc"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ParseLockKey of a short key: %v", err)
	}
}

func TestLockConflicts(t *testing.T) {
	ms, locks := lockClients(t, 2)
	a, b := ms[0], ms[1]
	const lin = LIN(100)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.SetLock(bg, lin, plock(1, 1, LockWrite, 0, 9), false))
	// Overlapping: refused, for read and write, from another session.
	if err := b.SetLock(bg, lin, plock(2, 1, LockRead, 5, 14), false); !errors.Is(err, ErrLocked) {
		t.Fatalf("B read [5,14] over A's write [0,9]: err %v, want ErrLocked", err)
	}
	// Another owner of the same session conflicts too.
	if err := a.SetLock(bg, lin, plock(1, 2, LockWrite, 9, 9), false); !errors.Is(err, ErrLocked) {
		t.Fatalf("owner 2 of A over owner 1's lock: err %v, want ErrLocked", err)
	}
	// Non-overlapping: granted.
	must(b.SetLock(bg, lin, plock(2, 1, LockWrite, 10, 19), false))
	// F_GETLK reports the holder with its pid.
	c, found, err := b.TestLock(bg, lin, plock(2, 1, LockRead, 0, 0))
	must(err)
	if !found || c.Owner != (LockOwner{1, 1}) || c.Start != 0 || c.End != 9 || c.Type != LockWrite || c.PID != 101 {
		t.Fatalf("TestLock from B on [0,0] = %v, %v; want A's write [0,9] pid 101", c, found)
	}
	if _, found, _ := b.TestLock(bg, lin, plock(2, 1, LockWrite, 20, 30)); found {
		t.Fatalf("TestLock on a free range reports a conflict")
	}
	// The owner's own lock never conflicts with itself.
	if _, found, _ := a.TestLock(bg, lin, plock(1, 1, LockWrite, 0, 9)); found {
		t.Fatalf("TestLock reports the owner's own lock as a conflict")
	}
	// Read locks share; a read lock blocks a write.
	must(a.SetLock(bg, lin, plock(1, 1, LockRead, 100, 199), false))
	must(b.SetLock(bg, lin, plock(2, 1, LockRead, 150, 249), false))
	if err := b.SetLock(bg, lin, plock(2, 1, LockWrite, 150, 249), false); !errors.Is(err, ErrLocked) {
		t.Fatalf("upgrade of B's read over A's read: err %v, want ErrLocked", err)
	}
	// flock and POSIX locks never conflict; flock locks conflict by description.
	must(a.SetLock(bg, lin, flock(1, 1, LockWrite), false))
	if err := b.SetLock(bg, lin, flock(2, 1, LockRead), false); !errors.Is(err, ErrLocked) {
		t.Fatalf("B flock shared over A's flock exclusive: err %v, want ErrLocked", err)
	}
	must(a.SetLock(bg, lin, flock(1, 1, LockRead), false)) // conversion to shared
	must(b.SetLock(bg, lin, flock(2, 1, LockRead), false))
	// Locks on another LIN are apart.
	must(b.SetLock(bg, lin+1, plock(2, 1, LockWrite, 0, MaxLockOffset), false))
	// Bad requests.
	if err := a.SetLock(bg, lin, plock(1, 1, LockWrite, 10, 9), false); !errors.Is(err, ErrInvalid) {
		t.Fatalf("start past end: %v", err)
	}
	if err := a.SetLock(bg, lin, plock(2, 1, LockWrite, 0, 9), false); !errors.Is(err, ErrInvalid) {
		t.Fatalf("another session's owner: %v", err)
	}
	// Closing: each owner's locks go, then nothing is left.
	for _, m := range ms {
		for _, l := range []LIN{lin, lin + 1} {
			must(m.UnlockOwner(bg, l, 1, false))
			must(m.UnlockOwner(bg, l, 1, true))
		}
	}
	if all, _ := a.Locks(bg, lin); len(all) != 0 || locks.Len() != 0 {
		t.Fatalf("after every owner unlocked: locks %v, %d records", all, locks.Len())
	}
}

// untilWaiting returns once a request of m waits for a lock (so that
// what the test does next ends a wait, not a request yet to start).
func untilWaiting(t *testing.T, m *Meta) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for m.LockStats().Waiting == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no lock request waiting after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLockWait(t *testing.T) {
	ms, _ := lockClients(t, 2)
	a, b := ms[0], ms[1]
	const lin = LIN(100)
	if err := a.SetLock(bg, lin, plock(1, 1, LockWrite, 0, 99), false); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.SetLock(bg, lin, plock(2, 1, LockWrite, 50, 59), true) }()
	select {
	case err := <-got:
		t.Fatalf("B's wait returned while A holds the range: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	// A releases part of its range, not B's: B still waits.
	if err := a.SetLock(bg, lin, plock(1, 1, LockUnlock, 0, 9), false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("B's wait returned while A still holds [10,99]: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := a.UnlockOwner(bg, lin, 1, false); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("B's wait after A unlocked: %v", err)
	}
	// A wait cut short returns the context's error and takes nothing.
	ctx, cancel := context.WithCancel(bg)
	go func() { got <- a.SetLock(ctx, lin, plock(1, 1, LockRead, 55, 55), true) }()
	untilWaiting(t, a)
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: err %v, want context.Canceled", err)
	}
	if all, _ := a.Locks(bg, lin); len(all) != 1 || all[0].Owner.Session != 2 {
		t.Fatalf("after the cancelled wait: %v, want B's lock alone", all)
	}
	if st := a.LockStats(); st != (LockStats{Granted: 1, Unlocks: 2, Waited: 1, Cut: 1}) {
		t.Fatalf("A's lock stats: %+v", st)
	}
	if st := b.LockStats(); st != (LockStats{Granted: 1, Waited: 1}) {
		t.Fatalf("B's lock stats: %+v", st)
	}
}

func TestLockSessionExpiry(t *testing.T) {
	ms, locks := lockClients(t, 2)
	a, b := ms[0], ms[1]
	const lin = LIN(100)
	if err := a.SetLock(bg, lin, flock(1, 1, LockWrite), false); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.SetLock(bg, lin, flock(2, 1, LockWrite), true) }()
	untilWaiting(t, b)
	locks.Expire(1) // A's lease runs out
	if err := <-got; err != nil {
		t.Fatalf("B's wait after A's session expired: %v", err)
	}
	if err := a.SetLock(bg, lin, plock(1, 1, LockRead, 0, 0), false); !errors.Is(err, ErrLocksLost) {
		t.Fatalf("a lock through an expired session: err %v, want ErrLocksLost", err)
	}
}

// TestLockExclusion has many owners of two sessions take and release one
// write lock, waiting, and checks that no two ever hold it together.
func TestLockExclusion(t *testing.T) {
	ms, locks := lockClients(t, 2)
	const lin = LIN(100)
	var inside, entries atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		m := ms[i%2]
		owner := uint64(i + 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				l := plock(m.session, owner, LockWrite, 10, 20)
				if j%2 == 1 {
					l = flock(m.session, owner, LockWrite)
				}
				if err := m.SetLock(bg, lin, l, true); err != nil {
					t.Error(err)
					return
				}
				if j%2 == 0 {
					if n := inside.Add(1); n != 1 {
						t.Errorf("%d owners hold the write lock at once", n)
					}
					entries.Add(1)
					inside.Add(-1)
				}
				l.Type = LockUnlock
				if err := m.SetLock(bg, lin, l, false); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if entries.Load() != 8*25 || locks.Len() != 0 {
		t.Fatalf("%d entries (want %d), %d records left", entries.Load(), 8*25, locks.Len())
	}
}

func TestLockGrantFailpoint(t *testing.T) {
	ms, locks := lockClients(t, 1)
	if err := failpoint.Enable(FailpointLockGrant, "1*error"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Disable(FailpointLockGrant) })
	if err := ms[0].SetLock(bg, 100, plock(1, 1, LockWrite, 0, 9), false); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("grant with the failpoint on: %v", err)
	}
	if locks.Len() != 0 {
		t.Fatalf("a failed grant left %d records", locks.Len())
	}
	if err := ms[0].SetLock(bg, 100, plock(1, 1, LockWrite, 0, 9), false); err != nil {
		t.Fatalf("grant after the failpoint fired: %v", err)
	}
}

// countingLockStore counts a LockStore's loads and commits.
type countingLockStore struct {
	LockStore
	loads, commits atomic.Int64
}

func (c *countingLockStore) Load(ctx context.Context, lin LIN) ([]LockRecord, int64, error) {
	c.loads.Add(1)
	return c.LockStore.Load(ctx, lin)
}

func (c *countingLockStore) Commit(ctx context.Context, lin LIN, s SessionID, modRev, rev int64, v []byte) (bool, int64, error) {
	c.commits.Add(1)
	return c.LockStore.Commit(ctx, lin, s, modRev, rev, v)
}

// TestLockViews checks the records a client remembers from its commits:
// repeated changes of one LIN cost one round trip each, and what they
// remember never decides a conflict or a no-op — another client's unlock
// (a delete, which does not fail the commit's compare) is seen.
func TestLockViews(t *testing.T) {
	store := memkv.New(kv.Options{})
	if err := Format(bg, store, FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	locks := &countingLockStore{LockStore: NewMemLocks()}
	var ms []*Meta
	for s := SessionID(1); s <= 2; s++ {
		m, err := Open(bg, Config{Store: store, Session: s, Locks: locks})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	a, b := ms[0], ms[1]
	const lin = LIN(100)
	for i := 0; i < 10; i++ {
		if err := a.SetLock(bg, lin, plock(1, 1, LockWrite, 0, 9), false); err != nil {
			t.Fatal(err)
		}
		if err := a.SetLock(bg, lin, plock(1, 1, LockUnlock, 0, 9), false); err != nil {
			t.Fatal(err)
		}
	}
	if l, c := locks.loads.Load(), locks.commits.Load(); l != 1 || c != 20 {
		t.Fatalf("10 lock+unlock pairs: %d loads and %d commits, want 1 and 20", l, c)
	}
	// B locks and unlocks behind A's back: A's remembered records are
	// stale (B's lock was added, then deleted).
	if err := a.SetLock(bg, lin, plock(1, 1, LockRead, 0, 9), false); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLock(bg, lin, plock(2, 1, LockRead, 20, 29), false); err != nil {
		t.Fatal(err)
	}
	if err := a.SetLock(bg, lin, plock(1, 1, LockRead, 10, 19), false); err != nil { // commit from a stale view fails, then succeeds
		t.Fatal(err)
	}
	if err := b.SetLock(bg, lin, plock(2, 1, LockUnlock, 0, MaxLockOffset), false); err != nil {
		t.Fatal(err)
	}
	// A's view still shows B's read lock on [20,29]; a write there is free.
	if err := a.SetLock(bg, lin, plock(1, 1, LockWrite, 20, 29), false); err != nil {
		t.Fatalf("a write over a lock released by another client, from a stale view: %v", err)
	}
	all, err := a.Locks(bg, lin)
	if err != nil || ranges(all) != "1:read[0,19] 1:write[20,29] " {
		t.Fatalf("A's locks = %q, %v", ranges(all), err)
	}
}
