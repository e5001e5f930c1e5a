package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/meta"
)

// TestWriteNodeDown writes while a whole node is down: every unit is still
// placed (8 drives up for 6 units), but two nodes hold them, so the layout
// shows a node tolerance below the wanted one; the data reads back.
func TestWriteNodeDown(t *testing.T) {
	f := clienttest.New(t)
	f.SetNodeDown("n1", true)
	c := f.Client(testUnit)
	data := clienttest.RandBytes(5*4*testUnit+3, 1)
	lin, fh, err := f.WriteFile(c, "f", "ec:4+2", data)
	if err != nil {
		t.Fatal(err)
	}
	fh.Close(bg)
	l, err := c.Layout(bg, lin)
	if err != nil {
		t.Fatal(err)
	}
	if l.Achieved == nil || l.Achieved.Drives != 2 || l.Achieved.Nodes != 0 || l.Wanted.Nodes != 1 || l.Wanted.Drives != 2 {
		t.Fatalf("achieved %+v wanted %+v, want drives=2 nodes=0 of drives=2 nodes=1", l.Achieved, l.Wanted)
	}
	if l.UnderProtected != 0 || l.Requested != "ec:4+2" || l.RequestedFrom != "file" || l.Size != int64(len(data)) {
		t.Fatalf("layout %+v", l)
	}
	for _, s := range l.Stripes {
		for _, u := range s.Units {
			if u.Node == "n1" {
				t.Fatalf("stripe %d unit %d placed on down node n1", s.Index, u.Unit)
			}
		}
	}
	clienttest.MustEqual(t, "with n1 down", f.ReadBack(lin), data)
	f.SetNodeDown("n1", false)
	clienttest.MustEqual(t, "with n1 up", f.ReadBack(lin), data)
}

// TestWriteUnderProtected writes with only five drives up: ec:4+2 stripes
// get five units, are flagged under-protected in meta for repair, report
// an achieved tolerance of one drive, and read back — also with one more
// drive down.
func TestWriteUnderProtected(t *testing.T) {
	f := clienttest.New(t)
	f.SetNodeDown("n1", true)
	for _, d := range []meta.DriveID{5, 6, 7} { // three of n2's four drives
		f.SetDriveDown(d, true)
	}
	c := f.Client(testUnit)
	data := clienttest.RandBytes(3*4*testUnit+70*kib, 2) // the last stripe is erasure coded too
	lin, fh, err := f.WriteFile(c, "f", "", data)
	if err != nil {
		t.Fatal(err)
	}
	fh.Close(bg)
	l, err := c.Layout(bg, lin)
	if err != nil {
		t.Fatal(err)
	}
	if l.RequestedFrom != "pool" || l.UnderProtected != len(l.Stripes) || l.Achieved.Drives != 1 {
		t.Fatalf("layout: from %s, %d of %d stripes under-protected, achieved %+v", l.RequestedFrom, l.UnderProtected, len(l.Stripes), l.Achieved)
	}
	for _, s := range l.Stripes {
		if s.Placed != 5 || !s.UnderProtected || s.Tolerance.Drives != 1 {
			t.Fatalf("stripe %+v", s)
		}
	}
	refs, err := f.Meta.ListUnderProtected(bg, meta.StripeRef{}, 100)
	if err != nil || len(refs) != len(l.Stripes) {
		t.Fatalf("ListUnderProtected = %v, %v", refs, err)
	}
	if st := c.Stats(); st.UnderProtectedWrites != int64(len(l.Stripes)) {
		t.Fatalf("UnderProtectedWrites = %d", st.UnderProtectedWrites)
	}
	clienttest.MustEqual(t, "under-protected", f.ReadBack(lin), data)
	f.SetDriveDown(l.Stripes[0].Units[0].Drive, true)
	clienttest.MustEqual(t, "under-protected, one more drive down", f.ReadBack(lin), data)
}

// TestWriteTooFewDrives fails a write that cannot place K+1 units (2
// copies for mirrors) with ErrUnavailable, keeps the data buffered, and
// writes it once drives are back.
func TestWriteTooFewDrives(t *testing.T) {
	f := clienttest.New(t)
	f.SetNodeDown("n1", true)
	f.SetNodeDown("n2", true) // 4 drives up
	c := f.Client(testUnit)
	data := clienttest.RandBytes(2*4*testUnit+10, 3)
	lin, fh, err := f.WriteFile(c, "ec", "ec:4+2", data)
	if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "not enough drives") {
		t.Fatalf("flush with 4 drives up: %v", err)
	}
	t.Logf("flush error: %v", err)
	if fh.Size() != int64(len(data)) {
		t.Fatalf("size after failed flush = %d", fh.Size())
	}
	clienttest.MustEqual(t, "buffered after failure", clienttest.ReadAll(t, fh, 64*kib), data)
	// n2 comes back with three of its drives: 7 drives up.
	f.Nodes[1].Down.Store(false)
	f.Topo.Set(func(d *client.DriveState) bool { return d.ID >= 6 && d.ID <= 8 }, func(d *client.DriveState) { d.Up = true })
	if err := fh.Close(bg); err != nil {
		t.Fatalf("close once 7 drives are up: %v", err)
	}
	clienttest.MustEqual(t, "after retry", f.ReadBack(lin), data)

	// mirror:3 needs 2 drives.
	f.SetNodeDown("n2", true)
	f.SetNodeDown("n3", true)
	_, mh, err := f.WriteFile(c, "m", "mirror:3", []byte("x"))
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("mirror with no drive up: %v", err)
	}
	if err := mh.Close(bg); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("close drops the data with the error: %v", err)
	}
}

// TestWriteNoSpace fails with ErrNoSpace when drives are up but full.
func TestWriteNoSpace(t *testing.T) {
	f := clienttest.New(t)
	f.Topo.Set(func(d *client.DriveState) bool { return d.ID > 3 }, func(d *client.DriveState) { d.FreeBytes = 1000 })
	c := f.Client(testUnit)
	_, fh, err := f.WriteFile(c, "f", "ec:4+2", clienttest.RandBytes(4*testUnit, 4))
	if !errors.Is(err, client.ErrNoSpace) {
		t.Fatalf("flush with 3 drives with room: %v", err)
	}
	t.Logf("flush error: %v", err)
	fh.Close(bg)
}

// TestWriteWaitsForSpace: a flush refused for want of space tries again
// for a while (blocks replaced by copy-on-write are freed by the drainers
// a second later), and succeeds once space is back.
func TestWriteWaitsForSpace(t *testing.T) {
	f := clienttest.New(t)
	full := func(d *client.DriveState) bool { return d.ID > 3 }
	f.Topo.Set(full, func(d *client.DriveState) { d.FreeBytes = 1000 })
	c := f.Client(testUnit)
	freed := time.AfterFunc(600*time.Millisecond, func() {
		f.Topo.Set(full, func(d *client.DriveState) { d.FreeBytes = 1 << 40 })
	})
	defer freed.Stop()
	data := clienttest.RandBytes(4*testUnit, 4)
	lin, fh, err := f.WriteFile(c, "f", "ec:4+2", data)
	if err != nil {
		t.Fatalf("flush while space came back: %v", err)
	}
	fh.Close(bg)
	clienttest.MustEqual(t, "file", f.ReadBack(lin), data)
}

// TestWritePutFailover writes while a node refuses RPCs but the topology
// still says it is up: the failed units are re-placed on other drives,
// the topology is invalidated, and the orphaned block ids are queued for
// deletion.
func TestWritePutFailover(t *testing.T) {
	f := clienttest.New(t)
	f.Nodes[2].Down.Store(true)
	c := f.Client(testUnit)
	data := clienttest.RandBytes(2*4*testUnit, 5)
	lin, fh, err := f.WriteFile(c, "f", "ec:4+2", data)
	if err != nil {
		t.Fatal(err)
	}
	fh.Close(bg)
	st := c.Stats()
	if st.PutRetries == 0 || st.OrphansEnqueued == 0 || f.Topo.Invalidations() == 0 {
		t.Fatalf("stats %+v, invalidations %d", st, f.Topo.Invalidations())
	}
	for _, s := range f.Stripes(lin) {
		if s.Missing() != 0 {
			t.Fatalf("stripe %d: %d units missing", s.Index, s.Missing())
		}
		for _, u := range s.Units {
			if f.Node(u.Drive).Name == "n3" {
				t.Fatalf("stripe %d committed a unit on unreachable n3", s.Index)
			}
		}
	}
	var queued int
	for d := meta.DriveID(9); d <= 12; d++ {
		es, err := f.Meta.ListDeletes(bg, d, meta.BlockID{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		queued += len(es)
	}
	if queued == 0 {
		t.Fatalf("no failed put of n3 queued for deletion")
	}
	clienttest.MustEqual(t, "read back", f.ReadBack(lin), data)
}

// TestWriteCommitReplyLost fails a write after its stripe map committed
// (failpoint client/after-commit, as a lost reply): the data stays
// buffered, the next flush writes it again copy-on-write over the commit
// nobody acknowledged, and it reads back.
func TestWriteCommitReplyLost(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	if err := failpoint.Enable("client/after-commit", "1*error"); err != nil {
		t.Fatal(err)
	}
	defer failpoint.Disable("client/after-commit")
	data := clienttest.RandBytes(3*testUnit+5, 9)
	lin, fh, err := f.WriteFile(c, "f", "ec:4+2", data)
	if err != nil && !errors.Is(err, failpoint.ErrInjected) {
		t.Fatal(err)
	}
	if err := fh.Close(bg); err != nil {
		t.Fatalf("close after the lost reply: %v", err)
	}
	s := f.Stripes(lin)
	if len(s) != 1 || s[0].Gen != 2 {
		t.Fatalf("stripes %+v, want one at generation 2 (the unacknowledged commit, then the rewrite)", s)
	}
	clienttest.MustEqual(t, "read back", f.ReadBack(lin), data)
}
