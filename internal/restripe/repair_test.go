package restripe_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// repairCases are the protections every repair test runs: several ec
// stripes with a small tail (stored as 3 copies), a mirror, and a small
// ec file (one stripe of 3 copies).
var repairCases = []struct {
	name, prot string
	size       int
}{
	{"ec", "ec:4+2", 3*4*testUnit + 5000},
	{"mirror", "mirror:3", 2*testUnit + 77},
	{"small", "ec:4+2", 5000},
}

// TestRepairDriveDown takes a drive down and repairs the file: each unit
// on it is rebuilt on another drive (on the same node, the least loaded),
// the other units keep their blocks, the old blocks are queued for
// deletion, the layout shows the wanted tolerance again, the data reads
// back the same, and a second repair has nothing to do.
func TestRepairDriveDown(t *testing.T) {
	for _, tc := range repairCases {
		t.Run(tc.name, func(t *testing.T) {
			f := clienttest.New(t)
			c := f.Client(testUnit)
			rs := newRestriper(f, c)
			data := clienttest.RandBytes(tc.size, 1)
			lin := f.WriteClosed(c, "f", tc.prot, data)
			before := f.Stripes(lin)
			d := before[0].Units[0].Drive
			f.SetDriveDown(d, true)

			a, err := f.Meta.GetAttr(bg, lin)
			if err != nil {
				t.Fatal(err)
			}
			isBad, err := rs.BadDrives(bg, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !restripe.FileMayNeedRepair(a, isBad) {
				t.Fatalf("FileMayNeedRepair false with drive %d down, WDL %v", d, a.WDL)
			}
			affected := 0
			for _, s := range before {
				if restripe.StripeNeedsRepair(s, isBad) {
					affected++
				}
			}
			res, err := rs.RepairFile(bg, lin, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := restripe.FileRepairResult{LIN: lin, Stripes: len(before), Skipped: len(before) - affected, Repaired: affected, Rebuilt: affected}
			if res.BytesWritten <= 0 || res.BytesRead <= 0 {
				t.Fatalf("result %+v: no bytes moved", res)
			}
			res.BytesRead, res.BytesWritten = 0, 0
			if !reflect.DeepEqual(res, want) {
				t.Fatalf("result %+v, want %+v", res, want)
			}
			after := f.Stripes(lin)
			for k, s := range after {
				old := before[k]
				for i, u := range s.Units {
					switch {
					case u.Drive == d:
						t.Fatalf("stripe %d unit %d still on down drive %d", s.Index, i, d)
					case old.Units[i].Drive == d:
						if !f.Queued(old.Units[i]) {
							t.Fatalf("stripe %d unit %d: old block %v not queued for deletion", s.Index, i, old.Units[i].Block)
						}
						if s.Gen != old.Gen+1 || u.CRC != old.Units[i].CRC || u.Length != old.Units[i].Length {
							t.Fatalf("stripe %d unit %d: %+v gen %d, was %+v gen %d", s.Index, i, u, s.Gen, old.Units[i], old.Gen)
						}
					case u != old.Units[i]:
						t.Fatalf("stripe %d unit %d changed (%+v → %+v) though its drive is fine", s.Index, i, old.Units[i], u)
					}
				}
			}
			l, err := c.Layout(bg, lin)
			if err != nil {
				t.Fatal(err)
			}
			if l.Achieved.Drives < l.Wanted.Drives || l.Achieved.Nodes < l.Wanted.Nodes || l.UnderProtected != 0 {
				t.Fatalf("after repair: achieved %+v, wanted %+v, %d under-protected", *l.Achieved, l.Wanted, l.UnderProtected)
			}
			for _, s := range l.Stripes {
				if s.Unavailable != 0 {
					t.Fatalf("stripe %d has %d units on down drives", s.Index, s.Unavailable)
				}
			}
			clienttest.MustEqual(t, "after repair, drive down", f.ReadBack(lin), data)
			f.DrainDeletes()
			f.SetDriveDown(d, false)
			clienttest.MustEqual(t, "after repair, drive up", f.ReadBack(lin), data)

			again, err := rs.RepairFile(bg, lin, nil)
			if err != nil || again.Repaired != 0 || again.Skipped != len(before) {
				t.Fatalf("second repair: %+v, %v", again, err)
			}
			r, err := rs.RepairStripe(bg, lin, 0, nil)
			if err != nil || !r.NothingToDo || r.Committed {
				t.Fatalf("RepairStripe of a healthy stripe: %+v, %v", r, err)
			}
		})
	}
}

// TestRepairUnderProtected writes ec:6+3 while a node is down: 8 drives
// are up for 9 units, so the two ec stripes are under-protected, and the
// small tail (4 copies) sits on two nodes, below the tolerance three nodes
// give it: all three are in the protection index. A repair while the node
// is still down cannot place the missing unit nor spread the copies and
// changes nothing; once the node is back it completes every stripe and
// spreads it over the three nodes (3+3+3, and the 4 copies 2+1+1), and
// the index is empty.
func TestRepairUnderProtected(t *testing.T) {
	f := clienttest.New(t)
	f.SetNodeDown("n3", true)
	c := f.Client(testUnit)
	rs := newRestriper(f, c)
	data := clienttest.RandBytes(2*6*testUnit+100, 2)
	lin := f.WriteClosed(c, "f", "ec:6+3", data)
	us, err := f.Meta.UnderProtectedStripes(bg, lin)
	if err != nil || len(us) != 3 || us[0].Missing != 1 || us[1].Missing != 1 || us[2].Missing != 0 {
		t.Fatalf("UnderProtectedStripes = %+v, %v; want the 2 ec stripes (a unit not placed) and the tail", us, err)
	}
	for _, u := range us {
		wantNodes := 1 // ec:6+3, 3+3+3
		if u.Index == 2 {
			wantNodes = 2 // four copies, 2+1+1
		}
		if !u.Known || u.Tolerance.Target.Nodes != wantNodes || u.Tolerance.Achieved.Nodes >= wantNodes {
			t.Fatalf("entry %+v: want a target of %d nodes and less achieved", u, wantNodes)
		}
	}
	before := f.Stripes(lin)
	for _, u := range us {
		r, err := rs.RepairStripe(bg, lin, u.Index, nil)
		if err != nil {
			t.Fatal(err)
		}
		if u.Index == 2 {
			if r.Committed || !r.NothingToDo || !r.BelowTarget || r.Target.Nodes != 2 || !strings.Contains(r.Reason, "no eligible drive") {
				t.Fatalf("repair of the tail with n3 down: %+v", r)
			}
			continue
		}
		if r.Committed || !r.StillUnderProtected || r.Left != 1 || !strings.Contains(r.Reason, "no eligible drive") || r.Tolerance.Drives != 2 ||
			len(r.Units) != 1 || r.Units[0].From != 0 || r.Units[0].To != 0 || r.BytesRead != 0 || !r.BelowTarget {
			t.Fatalf("repair with n3 down: %+v", r)
		}
	}
	if after := f.Stripes(lin); !reflect.DeepEqual(after, before) {
		t.Fatalf("stripe maps changed by a repair that could not place anything:\n%+v\n%+v", before, after)
	}

	f.SetNodeDown("n3", false)
	res, err := rs.RepairFile(bg, lin, nil)
	if err != nil || res.Repaired != 3 || res.Rebuilt != 2 || res.Moved != 2+2+1 || res.BelowTarget != 0 || res.UnderProtected != 0 {
		t.Fatalf("repair with n3 up: %+v, %v", res, err)
	}
	if refs, err := f.Meta.ListUnderProtected(bg, meta.StripeRef{}, 100); err != nil || len(refs) != 0 {
		t.Fatalf("ListUnderProtected after repair = %v, %v", refs, err)
	}
	l, err := c.Layout(bg, lin)
	if err != nil {
		t.Fatal(err)
	}
	if l.UnderProtected != 0 || l.BelowTarget != 0 {
		t.Fatalf("layout: %d stripes under-protected, %d below target", l.UnderProtected, l.BelowTarget)
	}
	for _, s := range l.Stripes {
		perNode := map[string]int{}
		for _, u := range s.Units {
			perNode[u.Node]++
		}
		ok := perNode["n1"] == 3 && perNode["n2"] == 3 && perNode["n3"] == 3
		if s.Index == 2 { // 4 copies: 2+1+1
			ok = perNode["n1"] >= 1 && perNode["n2"] >= 1 && perNode["n3"] >= 1
		}
		if s.Placed != s.Width || !ok {
			t.Fatalf("stripe %d: %d of %d units placed, per node %v", s.Index, s.Placed, s.Width, perNode)
		}
	}
	clienttest.MustEqual(t, "after repair", f.ReadBack(lin), data)
	again, err := rs.RepairFile(bg, lin, nil)
	if err != nil || again.Repaired != 0 || again.Skipped != 3 {
		t.Fatalf("second repair: %+v, %v", again, err)
	}
}

// TestRepairPartial has two units of a stripe on down drives and one
// eligible drive left: the repair rebuilds one unit there, keeps the other
// entry as it was (its drive may come back), commits, and reports the
// stripe still under-protected.
func TestRepairPartial(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	rs := newRestriper(f, c)
	data := clienttest.RandBytes(4*testUnit, 9)
	lin := f.WriteClosed(c, "f", "ec:4+2", data)
	s := f.Stripes(lin)[0]
	used := map[meta.DriveID]bool{}
	for _, u := range s.Units {
		used[u.Drive] = true
	}
	var spare meta.DriveID
	for _, d := range f.Topo.States() {
		if !used[d.ID] && spare == 0 {
			spare = d.ID
		}
	}
	f.Topo.Set(func(d *client.DriveState) bool { return !used[d.ID] && d.ID != spare }, func(d *client.DriveState) { d.Usable = false })
	f.SetDriveDown(s.Units[0].Drive, true)
	f.SetDriveDown(s.Units[1].Drive, true)

	r, err := rs.RepairStripe(bg, lin, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Committed || r.Rebuilt != 1 || r.Left != 1 || !r.StillUnderProtected || r.Tolerance.Drives != 1 ||
		!strings.Contains(r.Reason, "1 of 2 units found no eligible drive") {
		t.Fatalf("result %+v", r)
	}
	after := f.Stripes(lin)[0]
	if after.Units[0].Drive != spare || after.Units[1] != s.Units[1] || !slices.Equal(after.Units[2:], s.Units[2:]) {
		t.Fatalf("units %+v → %+v, want unit 0 on drive %d and the rest unchanged", s.Units, after.Units, spare)
	}
	clienttest.MustEqual(t, "partly repaired", f.ReadBack(lin), data)
}

// TestRepairDrain moves every unit off a drive that is up (a drain): each
// unit is copied as it is (no reconstruction), the drive leaves the files'
// WDL, reads go on during the move, and a reader holding the old maps
// still reads after the old blocks are deleted.
func TestRepairDrain(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	rs := newRestriper(f, c)
	type file struct {
		lin  meta.LIN
		data []byte
	}
	var files []file
	for i, tc := range repairCases {
		data := clienttest.RandBytes(tc.size, uint64(10+i))
		files = append(files, file{f.WriteClosed(c, tc.name, tc.prot, data), data})
	}
	d := f.Stripes(files[0].lin)[0].Units[2].Drive
	bad := func(x meta.DriveID) bool { return x == d }
	isBad, err := rs.BadDrives(bg, bad)
	if err != nil {
		t.Fatal(err)
	}
	// A reader that cached the old maps.
	r := f.Client(testUnit)
	old, err := r.Open(bg, files[0].lin, false)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(bg)
	clienttest.MustEqual(t, "before the drain", clienttest.ReadAll(t, old, 100*kib), files[0].data)

	// Readers run during the move.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, fl := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rh, err := r.Open(bg, fl.lin, false)
			if err != nil {
				t.Error(err)
				return
			}
			defer rh.Close(bg)
			buf := make([]byte, len(fl.data))
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := rh.ReadAt(bg, buf, 0)
				if n != len(buf) || !slices.Equal(buf, fl.data) {
					t.Errorf("read during the drain: %d bytes, %v, equal %v", n, err, slices.Equal(buf[:n], fl.data[:n]))
					return
				}
			}
		}()
	}
	total := 0
	for _, fl := range files {
		a, err := f.Meta.GetAttr(bg, fl.lin)
		if err != nil {
			t.Fatal(err)
		}
		on := f.UnitsOn(fl.lin, d)
		if restripe.FileMayNeedRepair(a, isBad) != (on > 0) {
			t.Fatalf("FileMayNeedRepair = %v with %d units on drive %d", !(on > 0), on, d)
		}
		res, err := rs.RepairFile(bg, fl.lin, bad)
		if err != nil {
			t.Fatal(err)
		}
		if res.Moved != on || res.Rebuilt != 0 || res.UnderProtected != 0 {
			t.Fatalf("drain of LIN %d: %+v, want %d units moved", fl.lin, res, on)
		}
		total += on
		if n := f.UnitsOn(fl.lin, d); n != 0 {
			t.Fatalf("%d units still on drained drive %d", n, d)
		}
		if a, _ := f.Meta.GetAttr(bg, fl.lin); slices.Contains(a.WDL, d) || restripe.FileMayNeedRepair(a, isBad) {
			t.Fatalf("drive %d still in WDL %v", d, a.WDL)
		}
	}
	close(stop)
	wg.Wait()
	if total == 0 {
		t.Fatal("no unit was on the drained drive")
	}
	f.DrainDeletes()
	clienttest.MustEqual(t, "stale maps, old blocks deleted", clienttest.ReadAll(t, old, 100*kib), files[0].data)
	for _, fl := range files {
		clienttest.MustEqual(t, "after the drain", f.ReadBack(fl.lin), fl.data)
	}
}

// TestRepairConcurrentWrite has a client commit the stripe between the
// repair's read and its commit: the repair loses the compare-and-swap,
// queues its new block for deletion and re-reads the stripe. If the writer
// placed around the down drive, there is nothing left to do; if the
// stripe only changed generation, the repair commits on retry. The
// writer's bytes survive either way. Through RepairFile, the first attempt
// works from the map of the page RepairFile read, older still: the same
// compare-and-swap catches it.
func TestRepairConcurrentWrite(t *testing.T) {
	for _, c := range []struct {
		rewrite, file bool
	}{{true, false}, {false, false}, {true, true}, {false, true}} {
		rewrite := c.rewrite
		name := "writer rewrites"
		if !rewrite {
			name = "generation moves"
		}
		if c.file {
			name += " under RepairFile"
		}
		t.Run(name, func(t *testing.T) {
			f := clienttest.New(t)
			w := f.Client(testUnit)
			want := clienttest.RandBytes(4*testUnit, 3)
			lin := f.WriteClosed(w, "f", "ec:4+2", want)
			d := f.Stripes(lin)[0].Units[1].Drive
			f.SetDriveDown(d, true)

			rep := f.Client(testUnit)
			hook := &hookedData{DataPath: rep}
			rs := newRestriper(f, hook)
			other := f.Client(testUnit)
			oh, err := other.Open(bg, lin, true)
			if err != nil {
				t.Fatal(err)
			}
			defer oh.Close(bg)
			patch := clienttest.RandBytes(3000, 4)
			if rewrite {
				copy(want[100:], patch)
				if _, err := oh.WriteAt(bg, patch, 100); err != nil {
					t.Fatal(err)
				}
			}
			var once sync.Once
			hook.setBefore(func(l meta.LIN, _ meta.Stripe) {
				once.Do(func() {
					if rewrite {
						if err := oh.Flush(bg); err != nil {
							t.Errorf("writer's flush: %v", err)
						}
						return
					}
					cur := f.Stripes(l)[0]
					if _, err := f.Meta.CommitStripe(bg, l, cur, cur.Gen, meta.CommitOptions{}); err != nil {
						t.Errorf("moving the generation: %v", err)
					}
				})
			})
			if c.file {
				fr, err := rs.RepairFile(bg, lin, nil)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Stats().OrphansEnqueued != 1 || fr.Stripes != 1 || fr.Repaired != map[bool]int{true: 0, false: 1}[rewrite] {
					t.Fatalf("result %+v, stats %+v: want the first attempt's block queued and the stripe repaired unless rewritten", fr, rep.Stats())
				}
				if n := f.UnitsOn(lin, d); n != 0 {
					t.Fatalf("%d units on the down drive", n)
				}
				clienttest.MustEqual(t, "after the race", f.ReadBack(lin), want)
				return
			}
			res, err := rs.RepairStripe(bg, lin, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Attempts != 2 || rep.Stats().OrphansEnqueued != 1 {
				t.Fatalf("result %+v, stats %+v: want a second attempt and the first one's block queued", res, rep.Stats())
			}
			if rewrite && (!res.NothingToDo || res.Committed) {
				t.Fatalf("after the writer's rewrite: %+v, want nothing to do", res)
			}
			if !rewrite && (!res.Committed || res.Rebuilt != 1 || res.Gen != 3 || len(res.Units) != 1 ||
				res.Units[0] != restripe.UnitRepair{Unit: 1, From: d, To: f.Stripes(lin)[0].Units[1].Drive, Why: fmt.Sprintf("drive %d is down", d)}) {
				t.Fatalf("after a generation bump: %+v, want the repair committed at gen 3", res)
			}
			if n := f.UnitsOn(lin, d); n != 0 {
				t.Fatalf("%d units on the down drive", n)
			}
			clienttest.MustEqual(t, "after the race", f.ReadBack(lin), want)
		})
	}
}

// TestRepairUnavailable takes three drives of an ec:4+2 stripe down:
// fewer than K units are readable, so the repair fails with
// ErrUnavailable, writes nothing and leaves the map as it was.
func TestRepairUnavailable(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	lin := f.WriteClosed(c, "f", "ec:4+2", clienttest.RandBytes(4*testUnit, 5))
	before := f.Stripes(lin)
	for _, u := range before[0].Units[:3] {
		f.SetDriveDown(u.Drive, true)
	}
	c2 := f.Client(testUnit)
	rs2 := newRestriper(f, c2)
	r, err := rs2.RepairStripe(bg, lin, 0, nil)
	if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "3 units readable, 4 needed") {
		t.Fatalf("RepairStripe = %+v, %v; want ErrUnavailable", r, err)
	}
	fr, err := rs2.RepairFile(bg, lin, nil)
	if !errors.Is(err, client.ErrUnavailable) || fr.Failed != 1 || fr.Repaired != 0 {
		t.Fatalf("RepairFile = %+v, %v", fr, err)
	}
	if st := c2.Stats(); st.UnitBytesWritten != 0 || st.OrphansEnqueued != 0 {
		t.Fatalf("a failed repair wrote: %+v", st)
	}
	if after := f.Stripes(lin); !reflect.DeepEqual(after, before) {
		t.Fatalf("map changed:\n%+v\n%+v", before, after)
	}
}

// TestRepairCorruptSurvivor repairs a stripe with a drive down whose
// first surviving unit turns out corrupt when read: that unit is rebuilt
// too, from the next ones.
func TestRepairCorruptSurvivor(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	rs := newRestriper(f, c)
	data := clienttest.RandBytes(4*testUnit, 6)
	lin := f.WriteClosed(c, "f", "ec:4+2", data)
	s := f.Stripes(lin)[0]
	f.SetDriveDown(s.Units[5].Drive, true)
	clienttest.FlipByte(t, f.BlockFile(s.Units[0]), 1000)
	r, err := rs.RepairStripe(bg, lin, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Committed || r.Rebuilt != 2 || r.StillUnderProtected {
		t.Fatalf("result %+v, want units 0 and 5 rebuilt", r)
	}
	after := f.Stripes(lin)[0]
	if after.Units[0].Block == s.Units[0].Block || after.Units[5].Block == s.Units[5].Block || after.Units[1] != s.Units[1] {
		t.Fatalf("units before %+v after %+v", s.Units, after.Units)
	}
	f.SetDriveDown(s.Units[5].Drive, false)
	clienttest.MustEqual(t, "after repair", f.ReadBack(lin), data)
}

// TestMoveUnits moves chosen units of a healthy stripe to allowed drives
// only: the others keep their blocks, the old blocks are queued, a unit
// the map no longer names is ignored, and a move no allowed drive can take
// leaves the stripe as it was.
func TestMoveUnits(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	rs := newRestriper(f, c)
	data := clienttest.RandBytes(3*4*testUnit+5000, 77)
	lin := f.WriteClosed(c, "ec", "ec:4+2", data)
	s := f.Stripes(lin)[0]
	src := s.Units[1]
	used := map[meta.DriveID]bool{}
	for _, u := range s.Units {
		used[u.Drive] = true
	}
	// Allowed: the drives of the source's node the stripe does not use.
	var allowed []meta.DriveID
	for _, d := range f.Topo.States() {
		if d.Node == f.Node(src.Drive).Name && !used[d.ID] {
			allowed = append(allowed, d.ID)
		}
	}
	if len(allowed) == 0 {
		t.Fatal("no free drive on the source's node")
	}
	allow := func(d meta.DriveID) bool { return slices.Contains(allowed, d) }
	moves := []restripe.UnitMove{
		{Drive: src.Drive, Block: src.Block, Why: "rebalance"},
		{Drive: s.Units[2].Drive, Block: meta.BlockID{1}, Why: "a block the map does not name"},
	}
	res, err := rs.MoveUnits(bg, lin, s.Index, moves, allow)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Committed || res.Moved != 1 || res.Rebuilt != 0 || len(res.Units) != 1 || !allow(res.Units[0].To) {
		t.Fatalf("move: %+v", res)
	}
	ns := f.Stripes(lin)[0]
	for i, u := range ns.Units {
		if i == 1 {
			if u.Drive != res.Units[0].To || u.Block == src.Block {
				t.Fatalf("unit 1 now %+v", u)
			}
			continue
		}
		if u != s.Units[i] {
			t.Fatalf("unit %d changed: %+v -> %+v", i, s.Units[i], u)
		}
	}
	if !f.Queued(src) {
		t.Fatal("the moved unit's old block is not queued for deletion")
	}
	// Nowhere allowed: nothing moves.
	cur := ns.Units[3]
	res, err = rs.MoveUnits(bg, lin, s.Index, []restripe.UnitMove{{Drive: cur.Drive, Block: cur.Block, Why: "x"}}, func(meta.DriveID) bool { return false })
	if err != nil || res.Committed {
		t.Fatalf("move with no allowed drive: %+v %v", res, err)
	}
	if f.Stripes(lin)[0].Gen != ns.Gen {
		t.Fatal("a move with no allowed drive committed")
	}
	// Only drives of another node allowed: that node would hold 3 of the 6
	// units and the stripe would no longer survive a node loss.
	other := map[meta.DriveID]bool{}
	for _, d := range f.Topo.States() {
		if d.Node != f.Node(cur.Drive).Name && !slices.ContainsFunc(ns.Units, func(u meta.Unit) bool { return u.Drive == d.ID }) {
			other[d.ID] = true
		}
	}
	res, err = rs.MoveUnits(bg, lin, s.Index, []restripe.UnitMove{{Drive: cur.Drive, Block: cur.Block, Why: "x"}}, func(d meta.DriveID) bool { return other[d] })
	if err != nil || res.Committed || !strings.Contains(res.Reason, "would survive") {
		t.Fatalf("move that lowers tolerance: %+v %v", res, err)
	}
	if f.Stripes(lin)[0].Gen != ns.Gen {
		t.Fatal("a move that lowers tolerance committed")
	}
	f.DrainDeletes()
	clienttest.MustEqual(t, "after the move", f.ReadBack(lin), data)
}

// TestRepairFileBatches: RepairFile commits a file's repaired stripes
// commitBatch at a time, one transaction each; a batch in which one
// stripe's generation moved meanwhile commits none of them, its fresh
// blocks are queued for deletion, and each of its stripes is repaired
// again alone — every stripe ends repaired, the data intact.
func TestRepairFileBatches(t *testing.T) {
	for _, race := range []bool{false, true} {
		t.Run(map[bool]string{false: "quiet", true: "a stripe changes before the first batch commits"}[race], func(t *testing.T) {
			f := clienttest.New(t)
			w := f.Client(testUnit)
			const stripes = 40
			want := clienttest.RandBytes(stripes*4*testUnit, 5)
			lin := f.WriteClosed(w, "f", "ec:4+2", want)
			d := f.Stripes(lin)[0].Units[0].Drive
			need := 0
			for _, s := range f.Stripes(lin) {
				for _, u := range s.Units {
					if u.Drive == d {
						need++
					}
				}
			}
			if need <= 8 {
				t.Fatalf("%d stripes on drive %d: want more than a batch", need, d)
			}
			f.SetDriveDown(d, true)

			rep := f.Client(testUnit)
			var mu sync.Mutex
			commits, batched := 0, 0
			hook := &hookedData{DataPath: countingData{DataPath: rep, commits: &commits, mu: &mu}}
			rs := newRestriper(f, hook)
			hook.setBefore(func(l meta.LIN, s meta.Stripe) {
				mu.Lock()
				defer mu.Unlock()
				batched++
				if batched == 2 && race { // the second stripe of the first batch
					cur := f.Stripes(l)
					for _, c := range cur {
						if c.Index == s.Index {
							if _, err := f.Meta.CommitStripe(bg, l, c, c.Gen, meta.CommitOptions{}); err != nil {
								t.Errorf("moving the generation: %v", err)
							}
						}
					}
				}
			})
			fr, err := rs.RepairFile(bg, lin, nil)
			if err != nil {
				t.Fatal(err)
			}
			if fr.Repaired != need || fr.Failed != 0 {
				t.Fatalf("result %+v: want %d stripes repaired, none failed", fr, need)
			}
			wantCommits := (need + 7) / 8
			if race {
				wantCommits += 8 // the first batch's eight again, alone
			}
			if commits != wantCommits {
				t.Fatalf("%d commits for %d stripes, want %d", commits, need, wantCommits)
			}
			if race && rep.Stats().OrphansEnqueued != 8 {
				t.Fatalf("%d orphans queued, want the first batch's 8 fresh blocks", rep.Stats().OrphansEnqueued)
			}
			if n := f.UnitsOn(lin, d); n != 0 {
				t.Fatalf("%d units still on the down drive", n)
			}
			clienttest.MustEqual(t, "after the repair", f.ReadBack(lin), want)
		})
	}
}

// countingData counts CommitStripes calls.
type countingData struct {
	restripe.DataPath
	commits *int
	mu      *sync.Mutex
}

func (c countingData) CommitStripes(ctx context.Context, lin meta.LIN, ups []meta.StripeUpdate, fresh [][]meta.Unit, co meta.CommitOptions) ([]meta.Stripe, error) {
	c.mu.Lock()
	*c.commits++
	c.mu.Unlock()
	return c.DataPath.CommitStripes(ctx, lin, ups, fresh, co)
}
