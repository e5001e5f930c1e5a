package client_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
)

// TestModel runs random writes, reads, truncates, flushes and re-opens
// through two handles of one file and compares every read with an
// in-memory reference; now and then it flushes and reads the file whole
// through a fresh client. Tiny units (4 KiB) make every operation cross
// unit and stripe boundaries, and a small MaxDirty forces write-outs of
// partial stripes (read-modify-write) in the middle of the run.
func TestModel(t *testing.T) {
	ops := 300
	if clienttest.RaceEnabled || testing.Short() {
		ops = 150
	}
	for _, prot := range []string{"ec:2+1", "ec:4+2", "mirror:2"} {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", prot, seed), func(t *testing.T) {
				runModel(t, prot, seed, ops)
			})
		}
	}
}

func runModel(t *testing.T, prot string, seed uint64, ops int) {
	const unit = 4 * kib
	f := clienttest.New(t)
	rng := rand.New(rand.NewPCG(seed, 99))
	c := f.Client(unit, func(cfg *client.Config) { cfg.MaxDirty = 40 * kib; cfg.Readahead = 2 })
	lin := f.Create("m", prot)
	stripe := c.MustStripeSize(t, lin)
	var ref []byte
	var hs [2]*client.File
	open := func(i int) {
		h, err := c.Open(bg, lin, true)
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	open(0)
	open(1)
	for op := 0; op < ops; op++ {
		h := hs[rng.IntN(2)]
		switch k := rng.IntN(100); {
		case k < 40: // write
			off := rng.IntN(len(ref) + 2*stripe + 1)
			n := 1 + rng.IntN(stripe/2)
			if rng.IntN(5) == 0 {
				n = 1 + rng.IntN(3*stripe)
			}
			p := clienttest.RandBytes(n, rng.Uint64())
			if got, err := h.WriteAt(bg, p, int64(off)); err != nil || got != n {
				t.Fatalf("op %d: WriteAt(%d at %d) = %d, %v", op, n, off, got, err)
			}
			if end := off + n; end > len(ref) {
				ref = append(ref, make([]byte, end-len(ref))...)
			}
			copy(ref[off:], p)
		case k < 70: // read
			off := rng.IntN(len(ref) + stripe + 1)
			p := make([]byte, 1+rng.IntN(2*stripe))
			n, err := h.ReadAt(bg, p, int64(off))
			want := max(0, min(len(p), len(ref)-off))
			if n != want || (n < len(p)) != (err == io.EOF) || (err != nil && err != io.EOF) {
				t.Fatalf("op %d: ReadAt(%d at %d) = %d, %v; want %d bytes (size %d)", op, len(p), off, n, err, want, len(ref))
			}
			if n > 0 {
				clienttest.MustEqual(t, fmt.Sprintf("op %d: read %d at %d", op, len(p), off), p[:n], ref[off:off+n])
			}
		case k < 75: // sequential read of everything
			clienttest.MustEqual(t, fmt.Sprintf("op %d: sequential read", op), clienttest.ReadAll(t, h, 1+rng.IntN(stripe)), ref)
		case k < 83: // truncate
			size := rng.IntN(len(ref) + 2*stripe + 1)
			if err := h.Truncate(bg, int64(size)); err != nil {
				t.Fatalf("op %d: Truncate(%d): %v", op, size, err)
			}
			if size < len(ref) {
				ref = ref[:size]
			} else {
				ref = append(ref, make([]byte, size-len(ref))...)
			}
		case k < 90:
			if err := h.Flush(bg); err != nil {
				t.Fatalf("op %d: Flush: %v", op, err)
			}
		case k < 95: // close and reopen one handle
			i := rng.IntN(2)
			if err := hs[i].Close(bg); err != nil {
				t.Fatalf("op %d: Close: %v", op, err)
			}
			open(i)
		default: // another client sees the flushed file
			for _, h := range hs {
				if err := h.Flush(bg); err != nil {
					t.Fatalf("op %d: Flush: %v", op, err)
				}
			}
			clienttest.MustEqual(t, fmt.Sprintf("op %d: fresh client", op), f.ReadBack(lin), ref)
		}
		if s := h.Size(); s != int64(len(ref)) {
			t.Fatalf("op %d: Size = %d, want %d", op, s, len(ref))
		}
	}
	for _, h := range hs {
		if err := h.Close(bg); err != nil {
			t.Fatal(err)
		}
	}
	clienttest.MustEqual(t, "final", f.ReadBack(lin), ref)
	a, err := f.Meta.GetAttr(bg, lin)
	if err != nil || a.Size != uint64(len(ref)) {
		t.Fatalf("meta size %d, %v; want %d", a.Size, err, len(ref))
	}
}
