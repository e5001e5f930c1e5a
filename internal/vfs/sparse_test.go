package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/vfs"
)

// TestAllocate drives fallocate's modes and the seeks through vfs: sizes,
// allocated bytes and contents after each, and the error classes a
// gateway turns into errno.
func TestAllocate(t *testing.T) {
	const ss = 4 * clienttest.Unit // a stripe of ec:4+2
	f := clienttest.New(t)
	fs := vfs.New(vfs.Config{Meta: f.Meta, Client: f.Client(clienttest.Unit)})
	bg := context.Background()
	t.Cleanup(func() { fs.Close(bg) })
	a, h, err := fs.Create(bg, vfs.RootLIN, "f", vfs.CreateArgs{Type: vfs.TypeFile, Mode: 0o644}, true, os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	ref := clienttest.RandBytes(4*ss, 1)
	for i := range ref {
		ref[i] |= 0x80
	}
	if _, err := h.Write(bg, ref, 0); err != nil {
		t.Fatal(err)
	}
	if err := h.Fsync(bg); err != nil {
		t.Fatal(err)
	}
	attr := func() vfs.Attr {
		t.Helper()
		a, err := fs.GetAttr(bg, a.LIN)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	full := attr().Allocated
	if full != 4*6*clienttest.Unit {
		t.Fatalf("4 stripes of ec:4+2 allocate %d bytes, want %d", full, 4*6*clienttest.Unit)
	}
	check := func(what string, size int64, allocated uint64) {
		t.Helper()
		if err := h.Fsync(bg); err != nil {
			t.Fatal(err)
		}
		if a := attr(); a.Size != uint64(size) || a.Allocated != allocated {
			t.Fatalf("%s: size %d allocated %d, want %d and %d", what, a.Size, a.Allocated, size, allocated)
		}
		got := make([]byte, size+10)
		n, _ := h.Read(bg, got, 0)
		want := append(append([]byte(nil), ref...), make([]byte, size-int64(len(ref)))...)
		if n != int(size) || !bytes.Equal(got[:n], want) {
			t.Fatalf("%s: read %d bytes, not the %d expected", what, n, size)
		}
	}
	for _, bad := range []vfs.AllocMode{vfs.AllocPunchHole, 0x08 /* collapse */, 0x20 /* insert */, 0x40 /* unshare */} {
		if err := h.Allocate(bg, 0, ss, bad); !errors.Is(err, vfs.ErrNotSupported) {
			t.Fatalf("mode %#x: %v, want ErrNotSupported", bad, err)
		}
	}
	if err := h.Allocate(bg, -1, ss, 0); !errors.Is(err, vfs.ErrInvalid) {
		t.Fatalf("offset -1: %v, want ErrInvalid", err)
	}
	// Punch stripe 1 and half of stripe 2: one stripe dropped, half of
	// the next zeroed (still stored: its data goes on after).
	if err := h.Allocate(bg, ss, ss+ss/2, vfs.AllocPunchHole|vfs.AllocKeepSize); err != nil {
		t.Fatal(err)
	}
	clear(ref[ss : 2*ss+ss/2])
	check("punch", 4*ss, full-6*clienttest.Unit)
	if off, err := h.SeekData(bg, ss); err != nil || off != 2*ss {
		t.Fatalf("SEEK_DATA from %d: %d, %v; want %d", ss, off, err, 2*ss)
	}
	if off, err := h.SeekHole(bg, 0); err != nil || off != ss {
		t.Fatalf("SEEK_HOLE from 0: %d, %v; want %d", off, err, ss)
	}
	if _, err := h.SeekHole(bg, 4*ss); !errors.Is(err, vfs.ErrNoData) {
		t.Fatalf("SEEK_HOLE at the end: %v, want ErrNoData", err)
	}
	// Mode 0 and KEEP_SIZE past the end; ZERO_RANGE of the last stripe
	// and past the end.
	if err := h.Allocate(bg, 4*ss, ss, vfs.AllocKeepSize); err != nil {
		t.Fatal(err)
	}
	check("keep size", 4*ss, full-6*clienttest.Unit)
	if err := h.Allocate(bg, 4*ss, ss, 0); err != nil {
		t.Fatal(err)
	}
	check("allocate", 5*ss, full-6*clienttest.Unit)
	if err := h.Allocate(bg, 3*ss, 3*ss, vfs.AllocZeroRange); err != nil {
		t.Fatal(err)
	}
	clear(ref[3*ss:])
	check("zero range", 6*ss, full-2*6*clienttest.Unit)
	if _, err := h.SeekData(bg, 3*ss); !errors.Is(err, vfs.ErrNoData) {
		t.Fatalf("SEEK_DATA in the trailing hole: %v, want ErrNoData", err)
	}
	if err := h.Allocate(bg, 0, 8*ss, vfs.AllocZeroRange|vfs.AllocKeepSize); err != nil {
		t.Fatal(err)
	}
	ref = ref[:0]
	check("zero all", 6*ss, 0)
	fs.Release(bg, h.ID)
	ro, err := fs.Open(bg, a.LIN, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.Allocate(bg, 0, 1, 0); !errors.Is(err, vfs.ErrBadHandle) {
		t.Fatalf("fallocate through a read-only handle: %v, want ErrBadHandle", err)
	}
	fs.Release(bg, ro.ID)
}
