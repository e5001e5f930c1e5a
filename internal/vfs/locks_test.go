package vfs

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
	"github.com/weftfs/weft/internal/meta"
)

// countingLocks counts the lock table's loads.
type countingLocks struct {
	meta.LockStore
	loads atomic.Int64
}

func (c *countingLocks) Load(ctx context.Context, lin meta.LIN) ([]meta.LockRecord, int64, error) {
	c.loads.Add(1)
	return c.LockStore.Load(ctx, lin)
}

// lockFSes returns two FSes, clients of sessions 1 and 2 of one namespace
// and one lock table, and the table.
func lockFSes(t *testing.T) (a, b *FS, locks *meta.MemLocks, count *countingLocks) {
	t.Helper()
	ctx := context.Background()
	store := memkv.New(kv.Options{})
	if err := meta.Format(ctx, store, meta.FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	locks = meta.NewMemLocks()
	count = &countingLocks{LockStore: locks}
	var fss []*FS
	for s := meta.SessionID(1); s <= 2; s++ {
		m, err := meta.Open(ctx, meta.Config{Store: store, Session: s, Locks: count})
		if err != nil {
			t.Fatal(err)
		}
		fs := New(Config{Meta: m, Session: s})
		t.Cleanup(func() { _ = fs.Close(ctx) })
		fss = append(fss, fs)
	}
	return fss[0], fss[1], locks, count
}

// lockHandle is a handle of lin without a data path: enough for locks.
func lockHandle(fs *FS, lin LIN, flags int) *Handle {
	return &Handle{LIN: lin, Flags: flags, fs: fs}
}

func TestHandleLocks(t *testing.T) {
	ctx := context.Background()
	a, b, locks, count := lockFSes(t)
	const lin = LIN(100)
	ha, ha2, hb := lockHandle(a, lin, os.O_RDWR), lockHandle(a, lin, os.O_RDWR), lockHandle(b, lin, os.O_RDWR)
	wr := func(start, end uint64, pid uint32) Lock {
		return Lock{Type: LockWrite, Start: start, End: end, PID: pid}
	}

	// Closing a file nobody locked asks the lock table nothing.
	if err := ha.UnlockOwner(ctx, 11); err != nil {
		t.Fatal(err)
	}
	if n := count.loads.Load(); n != 0 {
		t.Fatalf("a close without locks loaded the lock table %d times", n)
	}
	if err := ha.SetLock(ctx, 11, wr(0, 9, 501), false); err != nil {
		t.Fatal(err)
	}
	// Another client sees the holder with PID 0; this client with its PID.
	c, found, err := hb.TestLock(ctx, 21, wr(5, 5, 601))
	if err != nil || !found || c.Type != LockWrite || c.Start != 0 || c.End != 9 || c.PID != 0 {
		t.Fatalf("TestLock from the other client = %+v, %v, %v; want write [0,9] pid 0", c, found, err)
	}
	c, found, err = ha2.TestLock(ctx, 12, wr(5, 5, 502))
	if err != nil || !found || c.PID != 501 {
		t.Fatalf("TestLock from another owner of the same client = %+v, %v, %v; want pid 501", c, found, err)
	}
	if err := hb.SetLock(ctx, 21, wr(0, 0, 601), false); !errors.Is(err, ErrLocked) {
		t.Fatalf("overlapping lock from the other client: %v, want ErrLocked", err)
	}
	// A process's close through another descriptor drops its POSIX locks.
	if err := ha2.UnlockOwner(ctx, 11); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := hb.TestLock(ctx, 21, wr(0, 9, 601)); found {
		t.Fatal("the owner's lock survived its close of the file")
	}
	// flock and OFD locks (owner: the description) go at release.
	if err := ha.SetLock(ctx, 0xf1, Lock{Flock: true, Type: LockWrite, PID: 501}, false); err != nil {
		t.Fatal(err)
	}
	if err := ha.SetLock(ctx, 0xf1, wr(100, 199, 501), false); err != nil { // an OFD lock
		t.Fatal(err)
	}
	if err := ha.UnlockOwner(ctx, 11); err != nil { // a close by the process: not the OFD's owner
		t.Fatal(err)
	}
	if err := hb.SetLock(ctx, 21, Lock{Flock: true, Type: LockRead}, false); !errors.Is(err, ErrLocked) {
		t.Fatalf("flock over the other client's exclusive flock: %v, want ErrLocked", err)
	}
	if _, found, _ := hb.TestLock(ctx, 21, wr(150, 150, 601)); !found {
		t.Fatal("the OFD lock went with a close that was not its description's last")
	}
	if err := a.releaseLocks(ctx, ha); err != nil {
		t.Fatal(err)
	}
	if err := hb.SetLock(ctx, 21, Lock{Flock: true, Type: LockWrite}, false); err != nil {
		t.Fatalf("flock after the holder's description was released: %v", err)
	}
	if err := hb.SetLock(ctx, 21, wr(150, 150, 601), false); err != nil {
		t.Fatalf("lock after the OFD lock's description was released: %v", err)
	}
	// The handle's access mode bounds POSIX lock types, not flock's.
	ro := lockHandle(b, lin, os.O_RDONLY)
	if err := ro.SetLock(ctx, 22, wr(1000, 1000, 602), false); !errors.Is(err, ErrBadHandle) {
		t.Fatalf("write lock on a read-only handle: %v, want ErrBadHandle", err)
	}
	wo := lockHandle(b, lin, os.O_WRONLY)
	if err := wo.SetLock(ctx, 22, Lock{Type: LockRead, Start: 1000, End: 1000}, false); !errors.Is(err, ErrBadHandle) {
		t.Fatalf("read lock on a write-only handle: %v, want ErrBadHandle", err)
	}
	if err := b.releaseLocks(ctx, hb); err != nil {
		t.Fatal(err)
	}
	if n := locks.Len(); n != 0 {
		t.Fatalf("%d lock records left after every handle was released", n)
	}
}
