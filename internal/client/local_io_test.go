package client_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/meta"
)

// TestLocalReads reads units of drives on "this machine" straight from
// their directories: the data is the same, no block-service read happens,
// and a damaged local block is still detected and rebuilt from parity.
func TestLocalReads(t *testing.T) {
	f := clienttest.New(t)
	f.Topo.Set(func(*client.DriveState) bool { return true }, func(d *client.DriveState) {
		d.LocalPath = f.Drive(d.ID).Path()
	})
	w := f.Client(testUnit)
	data := clienttest.RandBytes(3*4*testUnit+5, 7)
	lin, _, err := f.WriteFile(w, "f", "ec:4+2", data)
	if err != nil {
		t.Fatal(err)
	}
	c := f.Client(testUnit, func(cfg *client.Config) { cfg.ClusterID = "c-test" })
	fh, err := c.Open(bg, lin, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := clienttest.ReadAll(t, fh, 100*kib); !bytes.Equal(got, data) {
		t.Fatal("local read differs")
	}
	fh.Close(bg)
	st := c.Stats()
	if st.LocalReads == 0 || st.DegradedReads != 0 {
		t.Fatalf("stats after a local read: %+v", st)
	}

	// A flipped byte in a local block: detected, rebuilt.
	u := f.Stripes(lin)[1].Units[0]
	path := f.BlockFile(u)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c2 := f.Client(testUnit, func(cfg *client.Config) { cfg.ClusterID = "c-test" })
	fh, _ = c2.Open(bg, lin, false)
	if got := clienttest.ReadAll(t, fh, 100*kib); !bytes.Equal(got, data) {
		t.Fatal("read with a damaged local block differs")
	}
	fh.Close(bg)
	if c2.Stats().DegradedReads == 0 || c2.Stats().CorruptUnits == 0 {
		t.Fatalf("damaged local block not noticed: %+v", c2.Stats())
	}

	// A path that is not this drive (a wrong cluster id) falls back to
	// the block services.
	c3 := f.Client(testUnit, func(cfg *client.Config) { cfg.ClusterID = "another-cluster" })
	fh, _ = c3.Open(bg, lin, false)
	if got := clienttest.ReadAll(t, fh, 100*kib); !bytes.Equal(got, data) {
		t.Fatal("fallback read differs")
	}
	fh.Close(bg)
	if c3.Stats().LocalReads != 0 {
		t.Fatalf("read a foreign drive locally: %+v", c3.Stats())
	}
}

// TestOwnDriveReads: a client given the drives its process serves
// (a node's job client) reads their units through those open drives, so
// the drives' own counters — the node's metrics and the load its impact
// throttle reads — count the reads; closing the client leaves them open;
// and with local I/O off (a QoS limit on its class) it goes through the
// block services instead.
func TestOwnDriveReads(t *testing.T) {
	f := clienttest.New(t)
	w := f.Client(testUnit)
	data := clienttest.RandBytes(4*testUnit, 9)
	lin, _, err := f.WriteFile(w, "f", "ec:4+2", data)
	if err != nil {
		t.Fatal(err)
	}
	readBytes := func() (n uint64) {
		for _, u := range f.Stripes(lin)[0].Units {
			n += f.Drive(u.Drive).Counters().Read.Bytes
		}
		return n
	}
	own := func(id meta.DriveID) *drive.Drive { return f.Drive(id) }
	for _, local := range []bool{true, false} {
		c := f.Client(testUnit, func(cfg *client.Config) {
			cfg.OwnDrive, cfg.LocalIO = own, func() bool { return local }
		})
		before := readBytes()
		fh, err := c.Open(bg, lin, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := clienttest.ReadAll(t, fh, testUnit); !bytes.Equal(got, data) {
			t.Fatal("read differs")
		}
		fh.Close(bg)
		if d := readBytes() - before; d < uint64(len(data)) {
			t.Fatalf("local I/O %v: the drives counted %d bytes read, want at least %d", local, d, len(data))
		}
		if n := c.Stats().LocalReads; (n > 0) != local {
			t.Fatalf("local I/O %v: %d short-circuit reads", local, n)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.ReadBack(lin); !bytes.Equal(got, data) {
		t.Fatal("the node's drives no longer read after the client closed")
	}
}

// TestLocalWrites writes units of drives on "this machine" into their
// directories and has the nodes adopt them: the blocks are stored and
// counted by their nodes, readable by a client that goes through the block
// services, with no staged file left; overwrites replace them the same way.
func TestLocalWrites(t *testing.T) {
	f := clienttest.New(t)
	f.Topo.Set(func(*client.DriveState) bool { return true }, func(d *client.DriveState) {
		d.LocalPath = f.Drive(d.ID).Path()
	})
	c := f.Client(testUnit, func(cfg *client.Config) { cfg.ClusterID = "c-test" })
	for _, prot := range []string{"ec:4+2", "mirror:3"} {
		data := clienttest.RandBytes(3*4*testUnit+5, 11)
		lin, _, err := f.WriteFile(c, "f-"+prot, prot, data)
		if err != nil {
			t.Fatal(err)
		}
		// Overwrite a range: copy-on-write stripes, staged again.
		fh, err := c.Open(bg, lin, true)
		if err != nil {
			t.Fatal(err)
		}
		patch := clienttest.RandBytes(testUnit+3, 12)
		if _, err := fh.WriteAt(bg, patch, int64(testUnit)); err != nil {
			t.Fatal(err)
		}
		if err := fh.Close(bg); err != nil {
			t.Fatal(err)
		}
		copy(data[testUnit:], patch)

		plain := f.Client(testUnit)
		fh, _ = plain.Open(bg, lin, false)
		if got := clienttest.ReadAll(t, fh, 100*kib); !bytes.Equal(got, data) {
			t.Fatalf("%s: data written locally differs when read through the nodes", prot)
		}
		fh.Close(bg)
		if plain.Stats().DegradedReads != 0 || plain.Stats().LocalReads != 0 {
			t.Fatalf("%s: reads through the nodes: %+v", prot, plain.Stats())
		}
		// Every unit is a block its node knows, with the right header.
		for _, s := range f.Stripes(lin) {
			for i, u := range s.Units {
				hdr, _, _, err := f.Drive(u.Drive).Stat(drive.BlockID(u.Block))
				if err != nil || hdr.Owner != uint64(lin) || hdr.Stripe != s.Index || hdr.Unit != uint32(i) {
					t.Fatalf("%s: stripe %d unit %d: %+v %v", prot, s.Index, i, hdr, err)
				}
			}
		}
	}
	st := c.Stats()
	if st.LocalWrites == 0 || st.LocalWrites*int64(testUnit) < st.UnitBytesWritten/2 {
		t.Fatalf("stats after local writes: %+v", st)
	}
	var blocks int64
	for _, n := range f.Nodes {
		for _, d := range n.Drives {
			assertNoStaged(t, d.Path())
			u, _ := d.Usage()
			blocks += u.Blocks
		}
	}
	if blocks == 0 {
		t.Fatal("the nodes count no blocks")
	}

	// A client that is told the wrong cluster writes through the nodes.
	c3 := f.Client(testUnit, func(cfg *client.Config) { cfg.ClusterID = "another-cluster" })
	if _, _, err := f.WriteFile(c3, "g", "ec:4+2", clienttest.RandBytes(5*testUnit, 13)); err != nil {
		t.Fatal(err)
	}
	if c3.Stats().LocalWrites != 0 {
		t.Fatalf("wrote a foreign drive locally: %+v", c3.Stats())
	}

	// A node that is down refuses the adoption: the put fails like a
	// remote one, and the staged file does not stay behind.
	n := f.Nodes[0]
	n.Down.Store(true)
	fh, err := c.Open(bg, f.Create("h", "ec:4+2"), true)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteAt(bg, clienttest.RandBytes(4*testUnit, 14), 0)
	fh.Close(bg) // under-protected or failed: either way no leftovers
	n.Down.Store(false)
	for _, d := range n.Drives {
		assertNoStaged(t, d.Path())
	}
}

// assertNoStaged fails if a drive directory holds temp (staged) files.
func assertNoStaged(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), ".tmp-") {
			t.Fatalf("staged file left: %s", path)
		}
		return nil
	})
}

// deferringMeta is a namespace that says every file's data commit is
// deferred (as a mount's write-back says of a file born under a
// delegation), so that the client writes the first data unsynced; its
// commits are still made at once, after the data barrier.
type deferringMeta struct{ *meta.Meta }

func (deferringMeta) DefersData(meta.LIN) bool { return true }

// TestUnsyncedWrites: units staged for a file whose data commit is
// deferred skip their syncs, and the client's data barrier syncs the
// drives' file systems before the commit naming them; an overwrite, and
// units over 256 KiB, are synced as before. A barrier that fails (failpoint
// client/before-data-sync) fails the commit, with nothing committed, and
// every later one: the client no longer knows which data was lost.
func TestUnsyncedWrites(t *testing.T) {
	f := clienttest.New(t)
	f.Topo.Set(func(*client.DriveState) bool { return true }, func(d *client.DriveState) {
		d.LocalPath = f.Drive(d.ID).Path()
	})
	c, err := client.NewOver(deferringMeta{f.Meta}, client.Config{Meta: f.Meta, Topology: f.Topo, UnitSize: testUnit, InlineMax: -1, ClusterID: "c-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	data := clienttest.RandBytes(2*testUnit+5, 21)
	lin := f.WriteClosed(c, "u", "mirror:3", data)
	st := c.Stats()
	if st.UnsyncedWrites != 9 || st.DataSyncs == 0 {
		t.Fatalf("first write of a deferred file: %d units unsynced (want 9), %d data syncs", st.UnsyncedWrites, st.DataSyncs)
	}
	if got := f.ReadBack(lin); !bytes.Equal(got, data) {
		t.Fatal("data written unsynced reads back different")
	}
	// An overwrite replaces committed stripes: synced at put.
	fh, err := c.Open(bg, lin, true)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteAt(bg, []byte("patch"), 3)
	if err := fh.Close(bg); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().UnsyncedWrites; n != st.UnsyncedWrites {
		t.Fatalf("an overwrite wrote %d units unsynced", n-st.UnsyncedWrites)
	}
	// Large units are synced at the put.
	big, err := client.NewOver(deferringMeta{f.Meta}, client.Config{Meta: f.Meta, Topology: f.Topo, UnitSize: 512 * kib, InlineMax: -1, ClusterID: "c-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { big.Close() })
	f.WriteClosed(big, "large", "mirror:3", clienttest.RandBytes(400*kib, 22))
	if st := big.Stats(); st.UnsyncedWrites != 0 || st.LocalWrites != 3 {
		t.Fatalf("400 KiB units: %d written unsynced of %d staged, want 0 of 3", st.UnsyncedWrites, st.LocalWrites)
	}

	if err := failpoint.Enable("client/before-data-sync", "error"); err != nil {
		t.Fatal(err)
	}
	defer failpoint.Disable("client/before-data-sync")
	bad, fh, err := f.WriteFile(c, "v", "mirror:3", data)
	if err == nil {
		t.Fatal("a commit after a failed data barrier succeeded")
	}
	fh.Close(bg)
	if ss := f.Stripes(bad); len(ss) != 0 {
		t.Fatalf("a commit after a failed data barrier left %d stripes", len(ss))
	}
	failpoint.Disable("client/before-data-sync")
	before := c.Stats().UnsyncedWrites
	if _, fh, err = f.WriteFile(c, "w", "mirror:3", data); err == nil || !strings.Contains(err.Error(), "remount") {
		t.Fatalf("a commit after the barrier failed once: %v, want the failure again", err)
	}
	fh.Close(bg)
	if n := c.Stats().UnsyncedWrites; n != before {
		t.Fatalf("after a failed barrier %d more units were written unsynced", n-before)
	}
}
