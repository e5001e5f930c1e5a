package client_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
)

// smallWriteFile is the file of the small-write tests: 32 stripes of
// ec:4+2 with 16 KiB units (64 KiB stripes), written sequentially first.
const (
	smallUnit   = 16 * kib
	smallStripe = 4 * smallUnit
	smallFile   = 32 * smallStripe
)

// randomSmallWrite makes one write of the small-write tests: 1 byte to
// 9 KiB at any offset of the file (crossing chunk, unit and stripe
// boundaries), or 4 KiB aligned.
func randomSmallWrite(rng *rand.Rand) (int64, []byte) {
	if rng.IntN(2) == 0 {
		return rng.Int64N(smallFile/(4*kib)) * 4 * kib, clienttest.RandBytes(4*kib, rng.Uint64())
	}
	n := 1 + rng.IntN(9*kib)
	return rng.Int64N(smallFile - int64(n)), clienttest.RandBytes(n, rng.Uint64())
}

// TestRandomSmallWrites writes thousands of small writes at random
// offsets of a file much larger than MaxDirty, reads random ranges and
// the whole file back between them (buffered, in flight and committed
// bytes together), and compares everything with an in-memory model, also
// through a fresh client after the sync. MaxDirty holds 8 of its 32
// stripes' worth of bytes: with sparse buffers and write-behind of the
// dirtiest stripes, a stripe's read-modify-write carries many writes; a
// whole stripe buffer per touched stripe would write a stripe out every
// write or two.
func TestRandomSmallWrites(t *testing.T) {
	writes := 3000
	if clienttest.RaceEnabled || testing.Short() {
		writes = 1000
	}
	f := clienttest.New(t)
	c := f.Client(smallUnit, func(cfg *client.Config) { cfg.MaxDirty = 8 * smallStripe })
	ref := clienttest.RandBytes(smallFile, 1)
	lin, fh, err := f.WriteFile(c, "f", "ec:4+2", ref)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close(bg)
	rng := rand.New(rand.NewPCG(7, 7))
	before := c.Stats().StripesWritten
	for i := range writes {
		off, p := randomSmallWrite(rng)
		if n, err := fh.WriteAt(bg, p, off); err != nil || n != len(p) {
			t.Fatalf("write %d: WriteAt(%d bytes at %d) = %d, %v", i, len(p), off, n, err)
		}
		copy(ref[off:], p)
		// MaxDirty is kept before a write buffers its bytes: past it by
		// at most what one write allocates — a dense stripe's buffer
		// growing to a whole stripe, or the chunks a write starts and
		// ends in and a chunk table.
		if got := c.DirtyBytes(); got > 9*smallStripe+16*kib {
			t.Fatalf("write %d: %d bytes buffered, MaxDirty is %d", i, got, 8*smallStripe)
		}
		if i%50 == 0 {
			off := rng.Int64N(smallFile)
			got := make([]byte, 1+rng.Int64N(min(3*smallStripe, smallFile-off)))
			if _, err := fh.ReadAt(bg, got, off); err != nil {
				t.Fatalf("write %d: ReadAt(%d at %d): %v", i, len(got), off, err)
			}
			clienttest.MustEqual(t, fmt.Sprintf("after write %d: read %d at %d", i, len(got), off), got, ref[off:off+int64(len(got))])
		}
		if i%1000 == 999 {
			clienttest.MustEqual(t, fmt.Sprintf("after write %d: whole file", i), clienttest.ReadAll(t, fh, 100*kib), ref)
		}
	}
	if err := fh.Sync(bg); err != nil {
		t.Fatal(err)
	}
	if got := c.DirtyBytes(); got != 0 {
		t.Errorf("%d bytes still counted as buffered after the sync", got)
	}
	stripes := c.Stats().StripesWritten - before
	t.Logf("%d writes, %d stripes written (%.1f writes a stripe)", writes, stripes, float64(writes)/float64(stripes))
	// 8 stripes' worth of buffer over 32 stripes, written out from three
	// quarters of it: a stripe carries about 6 writes (a stripe buffer
	// per touched stripe wrote one out every write or two).
	if float64(writes)/float64(stripes) < 4 {
		t.Errorf("%d stripes written for %d writes: want at least 4 writes a stripe", stripes, writes)
	}
	clienttest.MustEqual(t, "synced, fresh client", f.ReadBack(lin), ref)
}

// TestSmallWritesDenseAndSparse writes stripes that start dense (a write
// at the stripe's start) and turn sparse (a write past the dense buffer's
// capacity), stripes that stay sparse and then fill completely (written
// out without a read), and overwrites of both, and checks the data and
// that a complete sparse stripe is written out as soon as it is complete.
func TestSmallWritesDenseAndSparse(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(smallUnit)
	ref := make([]byte, 4*smallStripe)
	size := smallStripe / 2
	lin, fh, err := f.WriteFile(c, "f", "ec:4+2", ref[:smallStripe/2])
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close(bg)
	write := func(off int, p []byte) {
		t.Helper()
		if _, err := fh.WriteAt(bg, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(ref[off:], p)
		size = max(size, off+len(p))
	}
	rng := rand.New(rand.NewPCG(3, 3))
	// Stripe 0: committed half, a dense write at its start, then one past
	// the dense buffer (sparse from then on), then more small ones.
	write(0, clienttest.RandBytes(100, 1))
	write(smallStripe-300, clienttest.RandBytes(300, 2))
	write(5000, clienttest.RandBytes(7000, 3))
	// Stripe 1: sparse from the first write, filled back to front in
	// pieces that cross chunks, then complete: written out at once.
	before := c.Stats().StripesWritten
	for hi := 2 * smallStripe; hi > smallStripe; {
		lo := max(smallStripe, hi-1-rng.IntN(6000))
		write(lo, clienttest.RandBytes(hi-lo, rng.Uint64()))
		hi = lo
	}
	// Stripe 2 and 3: scattered bytes, never complete.
	for range 200 {
		off := 2*smallStripe + rng.IntN(2*smallStripe-10)
		write(off, clienttest.RandBytes(1+rng.IntN(10), rng.Uint64()))
	}
	ref = ref[:size]
	if got := fh.Size(); got != int64(size) {
		t.Fatalf("Size = %d, want %d", got, size)
	}
	clienttest.MustEqual(t, "buffered", clienttest.ReadAll(t, fh, 7*kib), ref)
	if err := fh.Flush(bg); err != nil {
		t.Fatal(err)
	}
	if n := c.Stats().StripesWritten - before; n != 4 {
		t.Errorf("%d stripes written, want 4 (the complete one once, then the flush's three others)", n)
	}
	clienttest.MustEqual(t, "flushed", f.ReadBack(lin), ref)
}
