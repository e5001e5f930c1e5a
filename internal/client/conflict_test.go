package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
)

// hookMeta is a metaStore whose CommitStripe and CommitStripes run a hook
// first (once per stripe): a fault injection point for races with other
// writers.
type hookMeta struct {
	*meta.Meta
	mu     sync.Mutex
	before func(lin meta.LIN, s meta.Stripe)
}

func (h *hookMeta) CommitStripe(ctx context.Context, lin meta.LIN, s meta.Stripe, gen uint64, co meta.CommitOptions) (meta.Stripe, error) {
	h.mu.Lock()
	fn := h.before
	h.mu.Unlock()
	if fn != nil {
		fn(lin, s)
	}
	return h.Meta.CommitStripe(ctx, lin, s, gen, co)
}

func (h *hookMeta) CommitStripes(ctx context.Context, lin meta.LIN, ups []meta.StripeUpdate, co meta.CommitOptions) ([]meta.Stripe, error) {
	h.mu.Lock()
	fn := h.before
	h.mu.Unlock()
	if fn != nil {
		for _, up := range ups {
			fn(lin, up.Stripe)
		}
	}
	return h.Meta.CommitStripes(ctx, lin, ups, co)
}

func (h *hookMeta) setBefore(fn func(meta.LIN, meta.Stripe)) {
	h.mu.Lock()
	h.before = fn
	h.mu.Unlock()
}

// hookedClient returns a Client whose commits go through a hookMeta.
func hookedClient(f *clienttest.Fixture) (*client.Client, *hookMeta) {
	h := &hookMeta{Meta: f.Meta}
	c, err := client.NewOver(h, client.Config{Meta: f.Meta, Topology: f.Topo, UnitSize: testUnit})
	if err != nil {
		f.TB.Fatal(err)
	}
	f.TB.Cleanup(func() { c.Close() })
	return c, h
}

// TestStripeConflict has two clients write non-overlapping ranges of one
// stripe, the second committing between the first one's read and commit:
// the first loses the compare-and-swap, queues its new blocks for
// deletion, re-reads the stripe and commits again, and both writes
// survive.
func TestStripeConflict(t *testing.T) {
	f := clienttest.New(t)
	lin := f.Create("f", "ec:4+2")
	base := clienttest.RandBytes(4*testUnit, 9)
	w := f.Client(testUnit)
	fh, _ := w.Open(bg, lin, true)
	clienttest.WriteAll(t, fh, base, len(base))
	if err := fh.Close(bg); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), base...)

	a, hook := hookedClient(f)
	b := f.Client(testUnit)
	ah, _ := a.Open(bg, lin, true)
	bh, _ := b.Open(bg, lin, true)
	x, y := clienttest.RandBytes(100, 1), clienttest.RandBytes(5000, 2)
	copy(want[10:], x)
	copy(want[3*testUnit:], y)
	if _, err := ah.WriteAt(bg, x, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := bh.WriteAt(bg, y, 3*testUnit); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var first meta.Stripe
	hook.setBefore(func(_ meta.LIN, s meta.Stripe) {
		once.Do(func() {
			first = s
			if err := bh.Flush(bg); err != nil {
				t.Errorf("b's flush: %v", err)
			}
		})
	})
	if err := ah.Flush(bg); err != nil {
		t.Fatalf("a's flush: %v", err)
	}
	st := a.Stats()
	if st.Conflicts != 1 || st.OrphansEnqueued != 6 {
		t.Fatalf("a's stats %+v: want 1 conflict and its 6 blocks queued", st)
	}
	queued, err := f.Meta.ListDeletes(bg, first.Units[0].Drive, meta.BlockID{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range queued {
		found = found || e.Block == first.Units[0].Block
	}
	if !found {
		t.Fatalf("a's orphaned block %v is not in the delete queue", first.Units[0].Block)
	}
	ah.Close(bg)
	bh.Close(bg)
	clienttest.MustEqual(t, "both writes", f.ReadBack(lin), want)
	if s := f.Stripes(lin)[0]; s.Gen != 3 {
		t.Fatalf("stripe generation %d, want 3 (initial, b, a)", s.Gen)
	}
}

// TestStripeConflictGivesUp keeps moving the stripe's generation under a
// writer (as a busy restriper would): the flush fails with ErrConflict
// after the bounded retries, the data stays buffered, and a later flush
// commits it.
func TestStripeConflictGivesUp(t *testing.T) {
	f := clienttest.New(t)
	lin := f.Create("f", "ec:4+2")
	w := f.Client(testUnit)
	fh, _ := w.Open(bg, lin, true)
	clienttest.WriteAll(t, fh, clienttest.RandBytes(4*testUnit, 1), 4*testUnit)
	fh.Close(bg)

	a, hook := hookedClient(f)
	ah, _ := a.Open(bg, lin, true)
	if _, err := ah.WriteAt(bg, []byte("xyz"), 7); err != nil {
		t.Fatal(err)
	}
	hook.setBefore(func(lin meta.LIN, _ meta.Stripe) {
		cur := f.Stripes(lin)[0]
		if _, err := f.Meta.CommitStripe(bg, lin, cur, cur.Gen, meta.CommitOptions{}); err != nil {
			t.Errorf("moving the generation: %v", err)
		}
	})
	if err := ah.Flush(bg); !errors.Is(err, client.ErrConflict) {
		t.Fatalf("flush under a restriper: %v", err)
	}
	if st := a.Stats(); st.Conflicts != client.MaxCommitAttempts {
		t.Fatalf("conflicts %d, want %d", st.Conflicts, client.MaxCommitAttempts)
	}
	hook.setBefore(nil)
	if err := ah.Close(bg); err != nil {
		t.Fatal(err)
	}
	got := f.ReadBack(lin)
	if string(got[7:10]) != "xyz" {
		t.Fatalf("bytes 7..10 = %q", got[7:10])
	}
}

// A handle opened before its file moved to another pool (set-pool, a
// tier job) writes the stripes after the move into the new pool: the
// commit into the old one is refused naming the file's pool, and the
// stripe is placed there instead.
func TestWriterFollowsPoolMove(t *testing.T) {
	f := clienttest.New(t)
	f.Topo.SetPool("p1", erasure.Protection{Mirrors: 2})
	p1 := map[meta.DriveID]bool{4: true, 8: true, 12: true}
	f.Topo.Set(func(d *client.DriveState) bool { return p1[d.ID] }, func(d *client.DriveState) { d.Pool = "p1" })
	c := f.Client(clienttest.Unit)
	data := clienttest.RandBytes(3*clienttest.Unit, 9)
	lin, fh, err := f.WriteFile(c, "moving", "mirror:2", data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Meta.SetAttr(bg, lin, meta.SetPool, meta.Attr{Pool: "p1"}); err != nil {
		t.Fatal(err)
	}
	patch := clienttest.RandBytes(1000, 10)
	if _, err := fh.WriteAt(bg, patch, int64(clienttest.Unit)+5); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(bg); err != nil {
		t.Fatal(err)
	}
	copy(data[clienttest.Unit+5:], patch)
	clienttest.MustEqual(t, "file", f.ReadBack(lin), data)
	for _, s := range f.Stripes(lin) {
		for _, u := range s.Units {
			if in := p1[u.Drive]; in != (s.Index == 1) {
				t.Errorf("stripe %d unit on drive %d (in p1: %v): only the stripe written after the move belongs in p1", s.Index, u.Drive, in)
			}
		}
	}
}

// A file written into a pool whose drives the client's cached topology
// still has elsewhere (moved there a moment ago) is placed after the
// topology is read again, not refused for want of drives.
func TestWriteIntoDrivesJustMoved(t *testing.T) {
	f := clienttest.New(t)
	f.Topo.SetPool("p1", erasure.Protection{Mirrors: 2})
	f.Topo.Cache()
	p1 := map[meta.DriveID]bool{4: true, 8: true, 12: true}
	f.Topo.Set(func(d *client.DriveState) bool { return p1[d.ID] }, func(d *client.DriveState) { d.Pool = "p1" })
	c := f.Client(clienttest.Unit)
	lin := f.Create("moved", "mirror:2")
	if _, err := f.Meta.SetAttr(bg, lin, meta.SetPool, meta.Attr{Pool: "p1"}); err != nil {
		t.Fatal(err)
	}
	fh, err := c.Open(bg, lin, true)
	if err != nil {
		t.Fatal(err)
	}
	data := clienttest.RandBytes(clienttest.Unit+99, 4)
	clienttest.WriteAll(t, fh, data, len(data))
	if err := fh.Close(bg); err != nil {
		t.Fatalf("close of a file in a pool the cached topology has no drives in: %v", err)
	}
	clienttest.MustEqual(t, "file", f.ReadBack(lin), data)
	for _, s := range f.Stripes(lin) {
		for _, u := range s.Units {
			if !p1[u.Drive] {
				t.Errorf("stripe %d unit on drive %d, not one of p1's", s.Index, u.Drive)
			}
		}
	}
}

// FreshSnapshot reads past the cache at most every quarter second: a
// writer failing stripe after stripe on a pool short of drives does not
// read the control plane for each.
func TestFreshSnapshotBounded(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(clienttest.Unit)
	before := f.Topo.Invalidations()
	for range 10 {
		if _, err := c.FreshSnapshot(bg); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Topo.Invalidations() - before; n != 1 {
		t.Fatalf("10 fresh snapshots at once invalidated the cache %d times, want 1", n)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := c.FreshSnapshot(bg); err != nil {
		t.Fatal(err)
	}
	if n := f.Topo.Invalidations() - before; n != 2 {
		t.Fatalf("after a quarter second: %d invalidations, want 2", n)
	}
}
