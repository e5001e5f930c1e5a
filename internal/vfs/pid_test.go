package vfs_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/vfs"
)

// TestCallerPIDReachesBlockCalls: the pid a gateway gives a request
// (vfs.Caller.PID) reaches the QoS tag of the block calls the request
// causes, as the block services of an in-process cluster see it: the
// reads it makes itself, and the write-out of the stripes it wrote alone,
// which runs later on the client's own context. A stripe two processes
// wrote is written out with no pid (0, unknown), never one of theirs.
func TestCallerPIDReachesBlockCalls(t *testing.T) {
	f := clienttest.New(t)
	stats := make([]*qos.Stats, len(f.Nodes))
	for i, n := range f.Nodes {
		stats[i] = qos.NewStats()
		n.Svc.SetGate(qos.NewGate(stats[i]))
	}
	c := f.Client(clienttest.Unit, func(cfg *client.Config) {
		cfg.Class, cfg.ClientID, cfg.Readahead = qos.Other, "mount-t", -1
	})
	fs := vfs.New(vfs.Config{Meta: f.Meta, Client: c})
	bg := context.Background()
	t.Cleanup(func() { fs.Close(bg) })
	as := func(pid uint32) context.Context {
		return vfs.WithCaller(bg, vfs.Caller{UID: 1000, GID: 1000, PID: pid})
	}
	if got := vfs.CallerFrom(as(100)); got.PID != 100 || got.UID != 1000 {
		t.Fatalf("CallerFrom(WithCaller(pid 100)) = %+v", got)
	}
	stripe := clienttest.RandBytes(4*clienttest.Unit, 1) // a whole stripe of ec:4+2
	create := func(ctx context.Context, name string) *vfs.Handle {
		_, h, err := fs.Create(ctx, vfs.RootLIN, name, vfs.CreateArgs{Type: vfs.TypeFile, Mode: 0o644}, true, os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	write := func(ctx context.Context, h *vfs.Handle, p []byte, off int64) {
		if n, err := h.Write(ctx, p, off); err != nil || n != len(p) {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	// File a: written by pid 100 alone.
	a := create(as(100), "a")
	write(as(100), a, stripe, 0)
	if err := a.Flush(as(100)); err != nil {
		t.Fatal(err)
	}
	// File b: its one stripe written half by pid 200, half by pid 300.
	b := create(as(200), "b")
	write(as(200), b, stripe[:2*clienttest.Unit], 0)
	write(as(300), b, stripe[2*clienttest.Unit:], 2*clienttest.Unit)
	if err := b.Flush(as(300)); err != nil {
		t.Fatal(err)
	}
	// Pid 400 reads file a back through another handle.
	r, err := fs.Open(as(400), a.LIN, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(stripe))
	if n, err := r.Read(as(400), buf, 0); err != nil || n != len(buf) {
		t.Fatalf("read: %d, %v", n, err)
	}
	clienttest.MustEqual(t, "file a", buf, stripe)

	ops := map[qos.Dir]map[int]int64{qos.Read: {}, qos.Write: {}}
	for _, st := range stats {
		for _, fs := range fineSamples(st) {
			if fs.Client != "mount-t" || fs.Class != qos.Other || fs.Other {
				t.Errorf("block I/O not tagged as the mount's: %+v", fs)
			}
			ops[fs.Dir][fs.PID] += fs.Ops
		}
	}
	t.Logf("block I/O by direction and pid: %v", ops)
	if ops[qos.Write][100] != 6 {
		t.Errorf("writes of pid 100: %d, want the 6 units of file a's stripe", ops[qos.Write][100])
	}
	if ops[qos.Write][0] != 6 || ops[qos.Write][200]+ops[qos.Write][300] != 0 {
		t.Errorf("writes of file b (pids 200 and 300 in one stripe): %d with no pid, %d with pid 200 or 300; want 6 and 0",
			ops[qos.Write][0], ops[qos.Write][200]+ops[qos.Write][300])
	}
	if ops[qos.Read][400] < 4 || len(ops[qos.Read]) != 1 {
		t.Errorf("reads by pid: %v; want pid 400's only, at least the 4 data units", ops[qos.Read])
	}
}

// fineSamples returns everything st counted in the last minute, the
// current second included.
func fineSamples(st *qos.Stats) []qos.FineSample {
	ss, _ := st.FineSeconds(time.Now().Add(time.Second), qos.StatsSeconds)
	return ss
}
