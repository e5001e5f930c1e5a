package client_test

import (
	"testing"

	"github.com/weftfs/weft/internal/client/clienttest"
)

// TestTruncate shrinks a file into the middle of a stripe, grows it again
// and writes past the old end: every byte between the shrink point and
// new data must read as zeros — through the same client, and through a
// fresh one — although the stripe's units still hold the old bytes.
func TestTruncate(t *testing.T) {
	const stripe = 4 * testUnit
	for _, tc := range []struct {
		name  string
		prot  string
		flush bool // flush before truncating (else the data is still buffered)
	}{
		{"ec committed", "ec:4+2", true},
		{"ec buffered", "ec:4+2", false},
		{"mirror committed", "mirror:3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clienttest.New(t)
			c := f.Client(testUnit)
			lin := f.Create("t", tc.prot)
			fh, _ := c.Open(bg, lin, true)
			ref := clienttest.RandBytes(3*stripe+1234, 5)
			clienttest.WriteAll(t, fh, ref, 100*kib)
			if tc.flush {
				if err := fh.Flush(bg); err != nil {
					t.Fatal(err)
				}
			}
			check := func(what string) {
				t.Helper()
				if fh.Size() != int64(len(ref)) {
					t.Fatalf("%s: Size %d, want %d", what, fh.Size(), len(ref))
				}
				clienttest.MustEqual(t, what, clienttest.ReadAll(t, fh, 33*kib), ref)
			}
			// Shrink into the middle of stripe 1.
			cut := stripe + testUnit + 100
			if err := fh.Truncate(bg, int64(cut)); err != nil {
				t.Fatal(err)
			}
			ref = ref[:cut]
			check("after shrink")
			// Grow: a hole.
			if err := fh.Truncate(bg, int64(cut+50*kib)); err != nil {
				t.Fatal(err)
			}
			ref = append(ref, make([]byte, 50*kib)...)
			check("after grow")
			// Write a little past the cut in the same stripe, and in a far one.
			for _, at := range []int{cut + 60*kib, 6*stripe + 3} {
				p := []byte("new data")
				if _, err := fh.WriteAt(bg, p, int64(at)); err != nil {
					t.Fatal(err)
				}
				if end := at + len(p); end > len(ref) {
					ref = append(ref, make([]byte, end-len(ref))...)
				}
				copy(ref[at:], p)
			}
			check("after writes")
			if err := fh.Close(bg); err != nil {
				t.Fatal(err)
			}
			clienttest.MustEqual(t, "fresh client", f.ReadBack(lin), ref)
			// Shrink to zero and rewrite.
			fh, _ = c.Open(bg, lin, true)
			if err := fh.Truncate(bg, 0); err != nil {
				t.Fatal(err)
			}
			if len(f.Stripes(lin)) != 0 {
				t.Fatalf("stripes left after truncate to 0: %v", f.Stripes(lin))
			}
			ref = []byte("again")
			clienttest.WriteAll(t, fh, ref, 10)
			check("rewritten")
			fh.Close(bg)
			clienttest.MustEqual(t, "fresh client after rewrite", f.ReadBack(lin), ref)
		})
	}
}
