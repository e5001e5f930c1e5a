package restripe_test

import (
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// RelayoutFile: a file moved to another pool is rewritten there stripe
// by stripe (every unit on the pool's drives, the data unchanged); run
// again it rewrites nothing; a protection change re-encodes it in place;
// a writer committing a stripe meanwhile makes that stripe be tried
// again; a file moved on again meanwhile is left to that move.
func TestRelayoutFile(t *testing.T) {
	f := clienttest.New(t)
	f.Topo.SetPool("cold", erasure.Protection{Data: 2, Parity: 1})
	cold := map[meta.DriveID]bool{3: true, 4: true, 7: true, 8: true, 11: true, 12: true}
	f.Topo.Set(func(d *client.DriveState) bool { return cold[d.ID] }, func(d *client.DriveState) { d.Pool = "cold" })
	c := f.Client(testUnit)
	hd := &hookedData{DataPath: c}
	r := newRestriper(f, hd)
	data := clienttest.RandBytes(6*testUnit+123, 5) // mirror:2: 7 stripes of one unit
	lin := f.WriteClosed(c, "f", "mirror:2", data)

	relayout := func(prot string) restripe.RelayoutResult {
		t.Helper()
		a, err := f.Meta.GetAttr(bg, lin)
		if err != nil {
			t.Fatal(err)
		}
		g, err := client.FileGeometry(a, prot, 0)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.RelayoutFile(bg, lin, g)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	inCold := func() {
		t.Helper()
		for _, s := range f.Stripes(lin) {
			for _, u := range s.Units {
				if !cold[u.Drive] {
					t.Fatalf("stripe %d unit on drive %d, not one of cold's", s.Index, u.Drive)
				}
			}
		}
		clienttest.MustEqual(t, "file", f.ReadBack(lin), data)
	}

	if _, err := f.Meta.SetAttr(bg, lin, meta.SetPool, meta.Attr{Pool: "cold"}); err != nil {
		t.Fatal(err)
	}
	// A writer commits stripe 1 (the same bytes) while stripe 0 is being
	// moved: stripe 1's first attempt loses its compare-and-swap.
	once := true
	hd.setBefore(func(l meta.LIN, s meta.Stripe) {
		if once && s.Index == 1 { // while stripe 1 commits, stripe 3 is written
			once = false
			fh, err := c.Open(bg, lin, true)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := fh.WriteAt(bg, data[3*testUnit:3*testUnit+10], 3*testUnit); err != nil {
				t.Error(err)
			}
			if err := fh.Close(bg); err != nil {
				t.Error(err)
			}
		}
	})
	res := relayout("mirror:2")
	hd.setBefore(nil)
	// The writer opened the file after it moved: its stripe 3 went to
	// cold already, and the relayout found it in place.
	if res.Stripes != 7 || res.Rewritten != 6 || res.UnderProtected != 0 {
		t.Fatalf("first relayout: %+v", res)
	}
	inCold()
	if res := relayout("mirror:2"); res.Rewritten != 0 {
		t.Fatalf("a second relayout rewrote %d stripes", res.Rewritten)
	}
	// ec:2+1 keeps the stripe size (one unit of mirror:2): two half
	// units and a parity; the 123-byte tail stays mirrored, as a short
	// stripe is.
	res = relayout("ec:2+1")
	if res.Rewritten != 6 {
		t.Fatalf("relayout to ec:2+1: %+v", res)
	}
	for _, s := range f.Stripes(lin) {
		want := meta.EC(2, 1)
		if s.DataLen < testUnit {
			want = s.Protection
		}
		if s.Protection != want || len(s.Units) != 3 && s.DataLen == testUnit {
			t.Errorf("stripe %d (%d bytes) is %v with %d units after the change to ec:2+1", s.Index, s.DataLen, s.Protection, len(s.Units))
		}
	}
	inCold()

	// Moved on again (to p0) while a relayout into cold runs: the
	// relayout's commit is refused and it leaves the file to that move.
	hd.setBefore(func(l meta.LIN, s meta.Stripe) {
		if _, err := f.Meta.SetAttr(bg, lin, meta.SetPool, meta.Attr{Pool: "p0"}); err != nil {
			t.Error(err)
		}
	})
	a, _ := f.Meta.GetAttr(bg, lin)
	g, _ := client.FileGeometry(a, "mirror:2", 0)
	if _, err := r.RelayoutFile(bg, lin, g); err != nil {
		t.Fatalf("relayout of a file moved on: %v", err)
	}
	clienttest.MustEqual(t, "file after moving on", f.ReadBack(lin), data)
}

// A relayout started just after drives moved into the file's new pool,
// on a node whose cached topology still has them in the old one, reads
// the topology again instead of failing the file for want of drives
// (set-pool right after drive move did fail that way).
func TestRelayoutIntoDrivesJustMoved(t *testing.T) {
	f := clienttest.New(t)
	f.Topo.SetPool("fast", erasure.Protection{Data: 1, Parity: 1})
	c := f.Client(testUnit)
	r := newRestriper(f, c)
	data := clienttest.RandBytes(2*testUnit+7, 9)
	lin := f.WriteClosed(c, "f", "mirror:2", data)

	// Pool fast: the drives the file has no unit on (at least 6 of 12,
	// on two nodes or more), so that every stripe moves.
	used := map[meta.DriveID]bool{}
	for _, s := range f.Stripes(lin) {
		for _, u := range s.Units {
			used[u.Drive] = true
		}
	}
	fast := map[meta.DriveID]bool{}
	for _, d := range f.Topo.States() {
		if !used[d.ID] {
			fast[d.ID] = true
		}
	}
	f.Topo.Cache()
	f.Topo.Set(func(d *client.DriveState) bool { return fast[d.ID] }, func(d *client.DriveState) { d.Pool = "fast" })
	if _, err := f.Meta.SetAttr(bg, lin, meta.SetPool, meta.Attr{Pool: "fast"}); err != nil {
		t.Fatal(err)
	}
	a, err := f.Meta.GetAttr(bg, lin)
	if err != nil {
		t.Fatal(err)
	}
	g, err := client.FileGeometry(a, "mirror:2", 0)
	if err != nil {
		t.Fatal(err)
	}
	before := f.Topo.Invalidations()
	res, err := r.RelayoutFile(bg, lin, g)
	if err != nil {
		t.Fatalf("relayout into drives the cached topology has elsewhere: %v", err)
	}
	if res.Rewritten != 3 || f.Topo.Invalidations() == before {
		t.Fatalf("relayout: %+v, %d invalidations", res, f.Topo.Invalidations()-before)
	}
	for _, s := range f.Stripes(lin) {
		for _, u := range s.Units {
			if !fast[u.Drive] {
				t.Fatalf("stripe %d has a unit on drive %d, not one of fast's", s.Index, u.Drive)
			}
		}
	}
	clienttest.MustEqual(t, "file", f.ReadBack(lin), data)
}
