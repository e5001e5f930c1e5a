package client_test

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
)

// TestDegradedRead damages a written file in several ways and checks that
// every read still returns the right bytes, reconstructing from parity or
// another copy, and notes the stripe for repair.
func TestDegradedRead(t *testing.T) {
	f := clienttest.New(t)
	const stripe = 4 * testUnit
	files := map[string]struct {
		lin  meta.LIN
		data []byte
	}{}
	w := f.Client(testUnit)
	for i, tc := range []struct {
		name, prot string
		size       int
	}{
		{"ec", "ec:4+2", 3*stripe + 100*kib + 5},
		{"mirror", "mirror:3", 3*testUnit + 77},
		{"small", "ec:4+2", 5000}, // one stripe of 3 copies
	} {
		lin := f.Create(tc.name, tc.prot)
		data := clienttest.RandBytes(tc.size, uint64(i+100))
		fh, _ := w.Open(bg, lin, true)
		clienttest.WriteAll(t, fh, data, 100*kib)
		if err := fh.Close(bg); err != nil {
			t.Fatal(err)
		}
		files[tc.name] = struct {
			lin  meta.LIN
			data []byte
		}{lin, data}
	}
	unit := func(file string, s, u int) meta.Unit { return f.Stripes(files[file].lin)[s].Units[u] }

	for _, tc := range []struct {
		name    string
		file    string
		damage  func() (undo func())
		wantErr error // else the read must succeed, degraded
	}{
		{"one drive down", "ec", func() func() {
			d := unit("ec", 0, 0).Drive
			f.SetDriveDown(d, true)
			return func() { f.SetDriveDown(d, false) }
		}, nil},
		{"two drives down", "ec", func() func() {
			d0, d1 := unit("ec", 1, 0).Drive, unit("ec", 1, 3).Drive
			f.SetDriveDown(d0, true)
			f.SetDriveDown(d1, true)
			return func() { f.SetDriveDown(d0, false); f.SetDriveDown(d1, false) }
		}, nil},
		{"node down", "ec", func() func() {
			n := f.Node(unit("ec", 0, 1).Drive).Name
			f.SetNodeDown(n, true)
			return func() { f.SetNodeDown(n, false) }
		}, nil},
		{"node unreachable, topology unaware", "ec", func() func() {
			n := f.Node(unit("ec", 2, 2).Drive)
			n.Down.Store(true)
			return func() { n.Down.Store(false) }
		}, nil},
		{"block deleted", "ec", func() func() {
			u := unit("ec", 3, 0)
			if err := f.Drive(u.Drive).Delete(drive.BlockID(u.Block)); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}, nil},
		{"byte flipped", "ec", func() func() {
			clienttest.FlipByte(t, f.BlockFile(unit("ec", 0, 2)), 1000)
			return func() {}
		}, nil},
		{"three drives down", "ec", func() func() {
			var ds []meta.DriveID
			for u := 0; u < 3; u++ {
				ds = append(ds, unit("ec", 0, u).Drive)
			}
			for _, d := range ds {
				f.SetDriveDown(d, true)
			}
			return func() {
				for _, d := range ds {
					f.SetDriveDown(d, false)
				}
			}
		}, client.ErrUnavailable},
		{"mirror two copies down", "mirror", func() func() {
			d0, d1 := unit("mirror", 0, 0).Drive, unit("mirror", 0, 1).Drive
			f.SetDriveDown(d0, true)
			f.SetDriveDown(d1, true)
			return func() { f.SetDriveDown(d0, false); f.SetDriveDown(d1, false) }
		}, nil},
		{"mirror copy corrupt", "mirror", func() func() {
			clienttest.FlipByte(t, f.BlockFile(unit("mirror", 1, 0)), 5)
			return func() {}
		}, nil},
		{"small stripe copy deleted", "small", func() func() {
			u := unit("small", 0, 0)
			if err := os.Remove(f.BlockFile(u)); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}, nil},
		{"mirror all copies down", "mirror", func() func() {
			var ds []meta.DriveID
			for u := 0; u < 3; u++ {
				ds = append(ds, unit("mirror", 2, u).Drive)
			}
			for _, d := range ds {
				f.SetDriveDown(d, true)
			}
			return func() {
				for _, d := range ds {
					f.SetDriveDown(d, false)
				}
			}
		}, client.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := files[tc.file]
			undo := tc.damage()
			defer undo()
			r := f.Client(testUnit, func(c *client.Config) { c.Readahead = -1 })
			fh, err := r.Open(bg, file.lin, false)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close(bg)
			if tc.wantErr != nil {
				_, err := fh.ReadAt(bg, make([]byte, len(file.data)), 0)
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("read: %v, want %v", err, tc.wantErr)
				}
				t.Logf("error as expected: %v", err)
				return
			}
			clienttest.MustEqual(t, "whole read", clienttest.ReadAll(t, fh, 48*kib), file.data)
			// Small reads at random offsets reconstruct column ranges.
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 40; i++ {
				off := rng.IntN(len(file.data))
				n := 1 + rng.IntN(min(70*kib, len(file.data)-off))
				buf := make([]byte, n)
				got, err := fh.ReadAt(bg, buf, int64(off))
				if err != nil && err != io.EOF || got != n {
					t.Fatalf("ReadAt(%d at %d) = %d, %v", n, off, got, err)
				}
				clienttest.MustEqual(t, "range read", buf, file.data[off:off+n])
			}
			if r.Stats().DegradedReads == 0 || len(r.NeedsRepair()) == 0 {
				t.Fatalf("no degraded read noted: %+v, repair %v", r.Stats(), r.NeedsRepair())
			}
		})
	}
	if f.Topo.Invalidations() == 0 {
		t.Errorf("an unreachable node never invalidated the topology")
	}
}

// TestStaleMap reads through a client whose cached stripe map is stale:
// another client rewrote the stripe and the old blocks were deleted. The
// reader gets "not found", re-reads the map and reads the new data —
// without a degraded read.
func TestStaleMap(t *testing.T) {
	f := clienttest.New(t)
	old := clienttest.RandBytes(4*testUnit, 1)
	lin, fh, err := f.WriteFile(f.Client(testUnit), "f", "ec:4+2", old)
	if err != nil {
		t.Fatal(err)
	}
	fh.Close(bg)
	r := f.Client(testUnit, func(c *client.Config) { c.Readahead = -1 })
	rh, _ := r.Open(bg, lin, false)
	defer rh.Close(bg)
	buf := make([]byte, 100)
	if _, err := rh.ReadAt(bg, buf, 0); err != nil {
		t.Fatal(err)
	}
	clienttest.MustEqual(t, "first read", buf, old[:100])

	w := f.Client(testUnit)
	wh, _ := w.Open(bg, lin, true)
	fresh := clienttest.RandBytes(4*testUnit, 2)
	clienttest.WriteAll(t, wh, fresh, len(fresh))
	if err := wh.Close(bg); err != nil {
		t.Fatal(err)
	}
	f.DrainDeletes()
	if _, err := rh.ReadAt(bg, buf, 0); err != nil {
		t.Fatal(err)
	}
	clienttest.MustEqual(t, "read with a stale map", buf, fresh[:100])
	if st := r.Stats(); st.DegradedReads != 0 || st.UnitErrors == 0 {
		t.Fatalf("stats %+v: want a not-found, then a clean read", st)
	}
}
