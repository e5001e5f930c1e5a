package block

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/qos"
)

// TestQoSTags checks that each block call arrives with the class, pool,
// job and client its caller gave (the dial default, overridden by the
// context), that a missing or unknown class is misc, and that the
// service's own pool of a drive wins over the caller's.
func TestQoSTags(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	st := qos.NewStats()
	n.svc.SetGate(qos.NewGate(st))
	n.svc.SetPools(map[drive.ID]string{1: "fast"})
	ctx := context.Background()

	jobs, err := Dial(n.addr, WithDefaultTag(qos.Tag{Class: qos.Maintenance, Job: "j1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer jobs.Close()
	data := payload(5000, 1)
	hdr := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 1}
	if err := jobs.Put(ctx, 1, hdr, data); err != nil { // maintenance, pool fast (the service's)
		t.Fatal(err)
	}
	if _, _, err := jobs.Get(WithTag(ctx, qos.Tag{Class: qos.Other, Pool: "ignored", Client: "m7"}), 1, hdr.ID, 0, -1); err != nil {
		t.Fatal(err)
	}
	hdr2 := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 2}
	if err := n.client.Put(WithTag(ctx, qos.Tag{Pool: "slow"}), 2, hdr2, data[:100]); err != nil { // no class: misc
		t.Fatal(err)
	}
	gold := metadata.AppendToOutgoingContext(ctx, mdClass, "gold")
	if err := n.client.Verify(gold, 2, hdr2.ID); err != nil { // an unknown class: misc
		t.Fatal(err)
	}
	want := map[qos.StatKey]qos.Counts{
		{Pool: "fast", Class: qos.Maintenance, Dir: qos.Write}: {Ops: 1, Bytes: 5000},
		{Pool: "fast", Class: qos.Other, Dir: qos.Read}:        {Ops: 1, Bytes: 5000},
		{Pool: "slow", Class: qos.Misc, Dir: qos.Write}:        {Ops: 1, Bytes: 100},
		{Pool: "", Class: qos.Misc, Dir: qos.Read}:             {Ops: 1, Bytes: 100},
	}
	got := st.Totals()
	for k, w := range want {
		if g := got[k]; g.Ops != w.Ops || g.Bytes != w.Bytes {
			t.Errorf("%+v: %d ops %d bytes, want %d and %d", k, g.Ops, g.Bytes, w.Ops, w.Bytes)
		}
	}
	if len(got) != len(want) {
		t.Errorf("stats keys: %v, want %v", got, want)
	}

	// The tag a handler sees, as TagOf reads it.
	md := metadata.NewIncomingContext(ctx, metadata.Pairs(mdClass, "maint", mdPool, "p", mdJob, "j", mdClient, "c", mdPID, "42"))
	if tag := TagOf(md); tag != (qos.Tag{Class: qos.Maintenance, Pool: "p", Job: "j", Client: "c", PID: 42}) {
		t.Errorf("TagOf = %+v", tag)
	}
	if tag := TagOf(ctx); tag.Class != qos.Misc {
		t.Errorf("TagOf without metadata = %+v", tag)
	}
}

// TestQoSQueuedCallEndsWithItsContext: a call queued by QoS past its
// deadline fails with DeadlineExceeded and leaves the drive untouched.
func TestQoSQueuedCallEndsWithItsContext(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	g := qos.NewGate(qos.NewStats())
	g.SetLimits(map[qos.Key]qos.Limit{{Pool: "", Class: qos.Misc}: {IOPS: 0.01}})
	n.svc.SetGate(g)
	ctx := context.Background()
	hdr := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 1}
	if err := n.client.Put(ctx, 1, hdr, payload(100, 2)); err != nil { // the burst
		t.Fatal(err)
	}
	hdr2 := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 1}
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := n.client.Put(tctx, 1, hdr2, payload(100, 3)); !errors.Is(err, context.DeadlineExceeded) && tctx.Err() == nil {
		t.Fatalf("queued put: %v", err)
	}
	if _, _, _, err := n.drives[0].Stat(hdr2.ID); !errors.Is(err, drive.ErrNotFound) {
		t.Errorf("the put that timed out in the queue reached the drive: %v", err)
	}
}

// TestQoSTagPrecedence: a call's tag is WithTag's, then the dial-time
// function's of its context, then the dial-time default's, field by
// field, and reads back as sent.
func TestQoSTagPrecedence(t *testing.T) {
	type jobKey struct{}
	of := func(ctx context.Context) qos.Tag {
		j, _ := ctx.Value(jobKey{}).(string)
		return qos.Tag{Job: j, Client: "from-context"}
	}
	def := qos.Tag{Class: qos.Maintenance, Client: "default", PID: 7}
	ctx := context.WithValue(context.Background(), jobKey{}, "42")
	ctx = WithTag(ctx, qos.Tag{Pool: "fast", P99: 2345 * time.Microsecond})
	ctx = WithTag(ctx, qos.Tag{Class: qos.Other}) // adds to the tag before
	out := tagMetadata(ctx, def, of)
	md, _ := metadata.FromOutgoingContext(out)
	got := TagOf(metadata.NewIncomingContext(context.Background(), md))
	if want := (qos.Tag{Class: qos.Other, Pool: "fast", Job: "42", Client: "from-context", PID: 7, P99: 2345 * time.Microsecond}); got != want {
		t.Errorf("tag = %+v, want %+v", got, want)
	}
}

// TestQoSFineStats: the fine statistics of a node's I/O carry the job,
// client and pid of each call's tag, and its size class: a put and a
// read of a whole 2 MiB block are whole units, a 1 MiB read of part of
// it is a large part, a small read by its bytes.
func TestQoSFineStats(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	st := qos.NewStats()
	n.svc.SetGate(qos.NewGate(st))
	n.svc.SetPools(map[drive.ID]string{1: "fast"})
	ctx := WithTag(context.Background(), qos.Tag{Class: qos.Other, Client: "m1", PID: 4242})
	hdr := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 1}
	if err := n.client.Put(ctx, 1, hdr, payload(2<<20, 4)); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ off, n int64 }{{0, -1}, {0, 2 << 20}, {0, 1 << 20}, {4096, 100}} {
		if _, _, err := n.client.Get(WithTag(ctx, qos.Tag{Job: "j9"}), 1, hdr.ID, r.off, r.n); err != nil {
			t.Fatal(err)
		}
	}
	fs, over := st.FineSeconds(time.Now().Add(time.Second), 3)
	got := map[qos.FineKey]int64{}
	for _, s := range fs {
		got[s.Key()] += s.Ops
	}
	k := func(dir qos.Dir, job string, size qos.SizeClass) qos.FineKey {
		return qos.FineKey{StatKey: qos.StatKey{Pool: "fast", Class: qos.Other, Dir: dir}, Job: job, Client: "m1", PID: 4242, Size: size}
	}
	want := map[qos.FineKey]int64{
		k(qos.Write, "", qos.SizeUnit):   1,
		k(qos.Read, "j9", qos.SizeUnit):  2,
		k(qos.Read, "j9", qos.SizeLarge): 1,
		k(qos.Read, "j9", qos.Size4K):    1,
	}
	if over != 0 || len(got) != len(want) {
		t.Errorf("fine keys %v (overflow %d), want %v", got, over, want)
	}
	for key, w := range want {
		if got[key] != w {
			t.Errorf("%+v: %d ops, want %d", key, got[key], w)
		}
	}
}

// TestQoSClientReportsP99: a client's calls carry its own p99 of the
// pool (qos.Tag.P99), and the node's ClientP99 answers it where it is
// above the drive's own figure; a figure beyond an hour, or not a
// number, is not taken.
func TestQoSClientReportsP99(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	st := qos.NewStats()
	n.svc.SetGate(qos.NewGate(st))
	n.svc.SetPools(map[drive.ID]string{1: "fast"})
	ctx := WithTag(context.Background(), qos.Tag{Class: qos.Other, Client: "m1", P99: 250 * time.Millisecond})
	for i := range qos.MinLatencyOps {
		hdr := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 1, Stripe: uint64(i)}
		if err := n.client.Put(ctx, 1, hdr, payload(4096, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	l, ok := st.ClientP99(time.Now())["fast"]
	if !ok || !l.Reported || l.P99 != 250*time.Millisecond {
		t.Fatalf("ClientP99 = %+v, want the client's 250ms, reported", l)
	}
	for _, v := range []string{"4000000000", "fast", "-5"} {
		md := metadata.NewIncomingContext(context.Background(), metadata.Pairs(mdClass, "other", mdP99, v))
		if tag := TagOf(md); tag.P99 != 0 {
			t.Errorf("p99 %q read as %v", v, tag.P99)
		}
	}
}
