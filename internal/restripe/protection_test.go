package restripe_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// The case: ec:4+2 written while n3 is down lands 3+3 on n1 and
// n2, every unit placed, and survives no node loss. Each stripe is in the
// protection index; RepairFile finds it there, cannot spread it while n3
// is down (the index keeps it, BelowTarget), and once n3 is back moves one
// unit of each of n1 and n2 there: 2+2+2, out of the index.
func TestRepairSpreadsStripesWrittenWhileANodeWasDown(t *testing.T) {
	f := clienttest.New(t)
	f.SetNodeDown("n3", true)
	c := f.Client(testUnit)
	rs := newRestriper(f, c)
	data := clienttest.RandBytes(3*4*testUnit, 3)
	lin := f.WriteClosed(c, "f", "ec:4+2", data)
	us, err := f.Meta.UnderProtectedStripes(bg, lin)
	if err != nil || len(us) != 3 {
		t.Fatalf("index: %+v, %v; want the 3 stripes", us, err)
	}
	for _, u := range us {
		want := meta.StripeTolerance{Achieved: meta.Tolerance{Drives: 2, Nodes: 0}, Target: meta.Tolerance{Drives: 2, Nodes: 1}}
		if u.Missing != 0 || u.Tolerance != want {
			t.Fatalf("entry %+v, want every unit placed and %+v", u, want)
		}
	}
	res, err := rs.RepairFile(bg, lin, nil)
	if err != nil || res.Repaired != 0 || res.BelowTarget != 3 || res.Skipped != 0 {
		t.Fatalf("repair with n3 down: %+v, %v", res, err)
	}
	if us, _ := f.Meta.UnderProtectedStripes(bg, lin); len(us) != 3 {
		t.Fatalf("the index lost entries the repair could not fix: %+v", us)
	}

	f.SetNodeDown("n3", false)
	res, err = rs.RepairFile(bg, lin, nil)
	if err != nil || res.Repaired != 3 || res.Moved != 6 || res.Rebuilt != 0 || res.BelowTarget != 0 {
		t.Fatalf("repair with n3 up: %+v, %v", res, err)
	}
	if us, _ := f.Meta.UnderProtectedStripes(bg, lin); len(us) != 0 {
		t.Fatalf("index after the repair: %+v", us)
	}
	l, err := c.Layout(bg, lin)
	if err != nil || l.BelowTarget != 0 || l.Achieved == nil || *l.Achieved != l.Wanted {
		t.Fatalf("layout after the repair: %+v, %v", l, err)
	}
	f.DrainDeletes()
	f.SetNodeDown("n2", true) // the failure the stripes could not survive before
	clienttest.MustEqual(t, "with n2 down", f.ReadBack(lin), data)
}

// RepairFile keeps the index right for stripes it checks without
// committing: a stripe below its target that no commit indexed (written
// by format 1) and that cannot be spread now gets an entry, and an entry
// that no longer holds goes.
func TestRepairFileSetsTheIndex(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	rs := newRestriper(f, c)
	lin := f.WriteClosed(c, "f", "ec:4+2", clienttest.RandBytes(2*4*testUnit, 4))
	ss := f.Stripes(lin)
	// Stripe 0 moved by hand onto n1 and n2, committed without tolerance,
	// as format 1 did; stripe 1 at its target but indexed.
	var onTwo []meta.DriveID
	for _, n := range f.Nodes[:2] { // n1 and n2
		for _, d := range n.Drives[:3] {
			onTwo = append(onTwo, meta.DriveID(d.ID()))
		}
	}
	ns := ss[0]
	ns.Units = append([]meta.Unit(nil), ss[0].Units...)
	for i := range ns.Units {
		old := ns.Units[i]
		b, _, err := f.Drive(old.Drive).Get(bg, drive.BlockID(old.Block), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		ns.Units[i] = putCopy(t, f, lin, ss[0], i, onTwo[i], b)
	}
	if _, err := f.Meta.CommitStripe(bg, lin, ns, ss[0].Gen, meta.CommitOptions{Restripe: true}); err != nil {
		t.Fatal(err)
	}
	stale := meta.StripeTolerance{Achieved: meta.Tolerance{Drives: 2, Nodes: 0}, Target: meta.Tolerance{Drives: 2, Nodes: 1}}
	if _, err := f.Meta.SetStripeTolerance(bg, lin, 1, ss[1].Gen, stale); err != nil {
		t.Fatal(err)
	}
	// n3's drives are full: stripe 0 cannot be spread (its target does
	// not depend on free space).
	f.Topo.Set(func(d *client.DriveState) bool { return d.Node == "n3" }, func(d *client.DriveState) { d.FreeBytes = 0 })
	res, err := rs.RepairFile(bg, lin, nil)
	if err != nil || res.Repaired != 0 || res.BelowTarget != 1 {
		t.Fatalf("repair with n3 full: %+v, %v", res, err)
	}
	us, err := f.Meta.UnderProtectedStripes(bg, lin)
	if err != nil || len(us) != 1 || us[0].Index != 0 || us[0].Tolerance.Achieved.Nodes != 0 || us[0].Tolerance.Target.Nodes != 1 {
		t.Fatalf("index after a repair with n3 full: %+v, %v; want stripe 0 only", us, err)
	}
}

// putCopy stores data as unit i of stripe s of lin on drive d, as a new
// block of generation s.Gen+1, and returns its unit.
func putCopy(t *testing.T, f *clienttest.Fixture, lin meta.LIN, s meta.Stripe, i int, d meta.DriveID, data []byte) meta.Unit {
	t.Helper()
	id := drive.NewBlockID()
	hdr := drive.BlockHeader{ID: id, Owner: uint64(lin), Stripe: s.Index, Unit: uint32(i), Generation: s.Gen + 1}
	if err := f.Drive(d).Put(bg, hdr, strings.NewReader(string(data)), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	u := s.Units[i]
	return meta.Unit{Drive: d, Block: meta.BlockID(id), Length: u.Length, CRC: u.CRC}
}

// A stripe with three of its six units gone for good is lost: VerifyFile
// with repair says so (a *LostError, with the units left and why each of
// the others is gone — never an empty reason), goes on with the other
// stripes (a damaged unit of stripe 1 is rebuilt), and lists the lost
// stripe for the lost-data list. A dry run finds it lost as well;
// RepairDamaged and RepairStripe report it the same way. A stripe whose
// missing units are on a down node is not lost: it may come back.
func TestLostStripe(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	rs := newRestriper(f, c)
	data := clienttest.RandBytes(2*4*testUnit, 5)
	lin := f.WriteClosed(c, "f", "ec:4+2", data)
	ss := f.Stripes(lin)
	for _, i := range []int{0, 2, 5} {
		if err := f.Drive(ss[0].Units[i].Drive).Delete(drive.BlockID(ss[0].Units[i].Block)); err != nil {
			t.Fatal(err)
		}
	}
	clienttest.FlipByte(t, f.BlockFile(ss[1].Units[3]), 10)

	dry, err := rs.VerifyFile(bg, lin, false)
	if err != nil || len(dry.Lost) != 1 || dry.Lost[0].Index != 0 || dry.Repaired != 0 {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	res, err := rs.VerifyFile(bg, lin, true)
	if !errors.Is(err, restripe.ErrLost) || !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("verify with repair: %v, want a lost stripe", err)
	}
	var lost *restripe.LostError
	if !errors.As(err, &lost) || lost.LIN != lin || strings.Contains(err.Error(), "()") {
		t.Fatalf("error %v: want a *LostError with its reasons", err)
	}
	t.Log(err)
	if res.Repaired != 1 || res.Failed != 1 || len(res.Lost) != 1 {
		t.Fatalf("verify with repair: %+v", res)
	}
	l := res.Lost[0]
	if l.Index != 0 || l.Gen != ss[0].Gen || l.Readable != 3 || l.Needed != 4 || l.DataLen != ss[0].DataLen ||
		!strings.Contains(l.Reason, "unit 0:") || !strings.Contains(l.Reason, "unit 5:") || strings.Contains(l.Reason, "unit 1:") {
		t.Fatalf("lost stripe %+v", l)
	}
	if _, err := rs.RepairDamaged(bg, lin, 0, ss[0].Units[0].Drive, ss[0].Units[0].Block, "test"); !errors.Is(err, restripe.ErrLost) {
		t.Fatalf("RepairDamaged of a lost stripe: %v", err)
	}

	// Three units on a down node (and one more gone) are not lost.
	lin2 := f.WriteClosed(c, "g", "ec:4+2", data)
	s := f.Stripes(lin2)[0]
	f.SetNodeDown(f.Node(s.Units[0].Drive).Name, true)
	if _, err := rs.RepairStripe(bg, lin2, 0, nil); err != nil && errors.Is(err, restripe.ErrLost) {
		t.Fatalf("a stripe with units on a down node is reported lost: %v", err)
	}
}
