package client_test

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/meta"
)

// TestWriteReadSizes writes files of sizes around the unit and stripe
// boundaries, flushes, and reads them back through a fresh client, for
// ec:4+2 and mirror:3, checking the stripe maps' protection and lengths.
func TestWriteReadSizes(t *testing.T) {
	const u = testUnit
	f := clienttest.New(t)
	for _, prot := range []string{"ec:4+2", "mirror:3"} {
		stripe := 4 * u
		if prot == "mirror:3" {
			stripe = u
		}
		sizes := []int{0, 1, 4 * kib, u - 1, u, u + 1, stripe - 1, stripe, stripe + 1, 3*stripe + 5}
		slices.Sort(sizes)
		for _, size := range slices.Compact(sizes) {
			t.Run(fmt.Sprintf("%s/%d", prot, size), func(t *testing.T) {
				lin := f.Create(fmt.Sprintf("%s-%d", prot, size), prot)
				data := clienttest.RandBytes(size, uint64(size))
				w := f.Client(u)
				fh, err := w.Open(bg, lin, true)
				if err != nil {
					t.Fatal(err)
				}
				clienttest.WriteAll(t, fh, data, 7*kib+3)
				if fh.Size() != int64(size) {
					t.Fatalf("Size before flush = %d, want %d", fh.Size(), size)
				}
				if s, ok := w.Size(lin); size > 0 && (!ok || s != int64(size)) {
					t.Fatalf("Client.Size = %d, %v", s, ok)
				}
				// Buffered data reads back before the flush.
				clienttest.MustEqual(t, "buffered read", clienttest.ReadAll(t, fh, 5*kib), data)
				if err := fh.Close(bg); err != nil {
					t.Fatal(err)
				}
				a, err := f.Meta.GetAttr(bg, lin)
				if err != nil || a.Size != uint64(size) {
					t.Fatalf("meta size = %d, %v; want %d", a.Size, err, size)
				}
				for _, s := range f.Stripes(lin) {
					if s.Missing() != 0 {
						t.Fatalf("stripe %d has %d units missing", s.Index, s.Missing())
					}
					want := prot
					if prot == "ec:4+2" && s.DataLen < u {
						want = "mirror:3"
					}
					if s.Protection.String() != want {
						t.Fatalf("stripe %d (%d bytes) stored as %v, want %s", s.Index, s.DataLen, s.Protection, want)
					}
				}
				r := f.Client(u)
				rh, err := r.Open(bg, lin, false)
				if err != nil {
					t.Fatal(err)
				}
				defer rh.Close(bg)
				clienttest.MustEqual(t, "read back", clienttest.ReadAll(t, rh, 64*kib+1), data)
				// Past EOF.
				if n, err := rh.ReadAt(bg, make([]byte, 10), int64(size)); n != 0 || err != io.EOF {
					t.Fatalf("ReadAt at EOF = %d, %v", n, err)
				}
			})
		}
	}
}

// TestLargeFile writes and reads 100 MiB with the default 1 MiB units
// (25 full ec:4+2 stripes; 100 mirror:3 stripes), 1 MiB at a time. Under
// the race detector (or -short) the file is 24 MiB plus a partial stripe.
func TestLargeFile(t *testing.T) {
	size := 100 * mib
	if clienttest.RaceEnabled || testing.Short() {
		size = 24*mib + 123
	}
	f := clienttest.New(t)
	data := clienttest.RandBytes(size, 42)
	for _, prot := range []string{"ec:4+2", "mirror:3"} {
		t.Run(prot, func(t *testing.T) {
			lin := f.Create("big-"+prot, prot)
			c := f.Client(0)
			fh, err := c.Open(bg, lin, true)
			if err != nil {
				t.Fatal(err)
			}
			clienttest.WriteAll(t, fh, data, mib)
			if err := fh.Close(bg); err != nil {
				t.Fatal(err)
			}
			r := f.Client(0)
			rh, _ := r.Open(bg, lin, false)
			clienttest.MustEqual(t, "read back", clienttest.ReadAll(t, rh, 1*mib), data)
			rh.Close(bg)
			st := r.Stats()
			if st.DegradedReads != 0 || st.ReadaheadStripes == 0 {
				t.Fatalf("stats %+v: want readahead and no degraded reads", st)
			}
		})
	}
}

// TestTwoHandles checks that two handles of one LIN see each other's
// buffered writes and size.
func TestTwoHandles(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	lin := f.Create("two", "")
	a, _ := c.Open(bg, lin, true)
	b, _ := c.Open(bg, lin, true)
	if _, err := a.WriteAt(bg, []byte("hello"), 0); err != nil {
		t.Fatal(err)
	}
	if b.Size() != 5 {
		t.Fatalf("b.Size = %d", b.Size())
	}
	buf := make([]byte, 5)
	if n, err := b.ReadAt(bg, buf, 0); n != 5 || err != nil || string(buf) != "hello" {
		t.Fatalf("b read %q, %d, %v", buf, n, err)
	}
	if _, err := b.WriteAt(bg, []byte("J"), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(bg); err != nil {
		t.Fatal(err)
	}
	if n, err := a.ReadAt(bg, buf, 0); n != 5 || err != nil || string(buf) != "Jello" {
		t.Fatalf("a read %q, %d, %v", buf, n, err)
	}
	if err := a.Close(bg); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(bg); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := a.ReadAt(bg, buf, 0); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("ReadAt after Close: %v", err)
	}
}

// TestHandleErrors covers argument and mode errors.
func TestHandleErrors(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	lin := f.Create("e", "")
	ro, err := c.Open(bg, lin, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.WriteAt(bg, []byte("x"), 0); !errors.Is(err, client.ErrReadOnly) {
		t.Fatalf("write on read-only handle: %v", err)
	}
	if err := ro.Truncate(bg, 0); !errors.Is(err, client.ErrReadOnly) {
		t.Fatalf("truncate on read-only handle: %v", err)
	}
	if _, err := ro.ReadAt(bg, make([]byte, 1), -1); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("negative offset: %v", err)
	}
	if _, err := c.Open(bg, meta.RootLIN, false); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("open a directory: %v", err)
	}
	if _, err := c.Open(bg, 999999, false); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("open a missing LIN: %v", err)
	}
	ro.Close(bg)
	c.Close()
	if _, err := c.Open(bg, lin, false); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("open after Close: %v", err)
	}
}

// TestReadahead reads a file sequentially with small reads: stripes are
// read ahead into the cache and later reads hit it; with a cache budget
// below one stripe, reads go direct and stay correct; closing the file
// releases the cached bytes.
func TestReadahead(t *testing.T) {
	f := clienttest.New(t)
	data := clienttest.RandBytes(10*4*testUnit, 3)
	lin, fh, err := f.WriteFile(f.Client(testUnit), "f", "ec:4+2", data)
	if err != nil {
		t.Fatal(err)
	}
	fh.Close(bg)
	for _, budget := range []int64{0, 4*testUnit - 1} {
		c := f.Client(testUnit, func(cfg *client.Config) { cfg.CacheBytes = budget })
		rh, _ := c.Open(bg, lin, false)
		clienttest.MustEqual(t, "sequential read", clienttest.ReadAll(t, rh, 16*kib), data)
		st := c.Stats()
		if budget == 0 && (st.ReadaheadStripes == 0 || st.CacheHits == 0) {
			t.Fatalf("default budget: stats %+v", st)
		}
		if budget > 0 && (st.ReadaheadStripes != 0 || st.CacheHits != 0) {
			t.Fatalf("budget below a stripe: stats %+v", st)
		}
		rh.Close(bg)
		c.Close() // waits for readahead still running
		if n := c.CachedBytes(); n != 0 {
			t.Fatalf("%d cached bytes after close", n)
		}
	}
}
