package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weftfs/weft/tests/harness"
)

// sparseRegion is a range of a sparse test file.
type sparseRegion struct{ off, n int64 }

// sparseFile is what a sparse test file holds: each of data's regions
// holds sparseData of it, except for the zeroed ranges; the rest is zeros.
type sparseFile struct {
	data, zeroed []sparseRegion
}

// expect returns the bytes [off, off+n) of the file.
func (sf sparseFile) expect(off, n int64) []byte {
	out := make([]byte, n)
	for _, r := range sf.data {
		lo, hi := max(off, r.off), min(off+n, r.off+r.n)
		if lo < hi {
			copy(out[lo-off:hi-off], sparseData(r)[lo-r.off:hi-r.off])
		}
	}
	for _, z := range sf.zeroed {
		lo, hi := max(off, z.off), min(off+n, z.off+z.n)
		if lo < hi {
			clear(out[lo-off : hi-off])
		}
	}
	return out
}

// sparseData is region r's data (its last byte is never zero).
func sparseData(r sparseRegion) []byte {
	d := randBytes(uint64(r.off)+1, int(r.n))
	d[len(d)-1] |= 1
	return d
}

// checkSparse reads path whole in 4 MiB pieces and compares it with sf
// and the size.
func checkSparse(t *testing.T, path string, sf sparseFile, size int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4<<20)
	var off int64
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			if want := sf.expect(off, int64(n)); !bytes.Equal(buf[:n], want) {
				i := 0
				for i < n && buf[i] == want[i] {
					i++
				}
				t.Fatalf("%s: byte %d reads %#x, want %#x", path, off+int64(i), buf[i], want[i])
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if off != size {
		t.Fatalf("%s: read %d bytes, want %d", path, off, size)
	}
}

// statBlocks returns the file's size and st_blocks × 512.
func statBlocks(t *testing.T, path string) (size, stored int64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size, st.Blocks * 512
}

// seekAll returns "whence(off)=result" for SEEK_DATA and SEEK_HOLE from
// every offset (ENXIO as such).
func seekAll(t *testing.T, path string, offs ...int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := ""
	for _, off := range offs {
		for _, w := range []struct {
			name   string
			whence int
		}{{"data", unix.SEEK_DATA}, {"hole", unix.SEEK_HOLE}} {
			got, err := unix.Seek(int(f.Fd()), off, w.whence)
			switch {
			case errors.Is(err, unix.ENXIO):
				s += fmt.Sprintf("%s(%d)=ENXIO ", w.name, off)
			case err != nil:
				t.Fatalf("lseek(%d, %s): %v", off, w.name, err)
			default:
				s += fmt.Sprintf("%s(%d)=%d ", w.name, off, got)
			}
		}
	}
	return s
}

// clusterBlocks is the number of blocks on every drive, read from the
// nodes now.
func clusterBlocks(t *testing.T, c *harness.Cluster) int64 {
	t.Helper()
	var n int64
	for _, u := range driveUsages(t, c) {
		n += u.Blocks
	}
	return n
}

// TestSparseFiles writes a sparse file through a FUSE mount (3 MiB of data
// at 0, 100 MiB and 300 MiB in ec:4+2), checks what it stores (st_blocks),
// its holes (contents, SEEK_DATA, SEEK_HOLE), fallocate's modes, that a
// punched hole frees its blocks, and that the file keeps its holes across
// a restart of the mount.
func TestSparseFiles(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.ProcessOnly("restarts a weft mount process"), func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4})
		mnt := filepath.Join(filepath.Dir(c.Dir), "sparse-mnt")
		mp := c.StartMount(mnt, nil)
		const mib = 1 << 20
		p := filepath.Join(mnt, "sparse")
		sf := sparseFile{data: []sparseRegion{{0, 3 * mib}, {100 * mib, 3 * mib}, {300 * mib, 3 * mib}}}
		size := int64(303 * mib)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sf.data {
			if _, err := f.WriteAt(sparseData(r), r.off); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()

		// Each region is 3 MiB of one 4 MiB stripe: 4 data units of 768 KiB
		// and 2 of parity.
		const regionStored = 6 * 768 << 10
		if gotSize, stored := statBlocks(t, p); gotSize != size || stored != 3*regionStored {
			t.Fatalf("size %d, st_blocks×512 %d; want %d and %d (9 MiB written × 1.5)", gotSize, stored, size, 3*regionStored)
		}
		checkSparse(t, p, sf, size)
		seeks := []int64{0, 3*mib - 1, 3 * mib, 99 * mib, 100 * mib, 104 * mib, 300*mib + 5, size - 1, size}
		wantSeeks := fmt.Sprintf("data(0)=0 hole(0)=%d data(%d)=%d hole(%d)=%d data(%d)=%d hole(%d)=%d data(%d)=%d hole(%d)=%d "+
			"data(%d)=%d hole(%d)=%d data(%d)=%d hole(%d)=%d data(%d)=%d hole(%d)=%d data(%d)=%d hole(%d)=%d data(%d)=ENXIO hole(%d)=ENXIO ",
			3*mib, 3*mib-1, 3*mib-1, 3*mib-1, 3*mib, 3*mib, 100*mib, 3*mib, 3*mib, 99*mib, 100*mib, 99*mib, 99*mib,
			100*mib, 100*mib, 100*mib, 103*mib, 104*mib, 300*mib, 104*mib, 104*mib, 300*mib+5, 300*mib+5, 300*mib+5, size,
			size-1, size-1, size-1, size, size, size)
		if got := seekAll(t, p, seeks...); got != wantSeeks {
			t.Fatalf("seeks:\n got %s\nwant %s", got, wantSeeks)
		}

		// fallocate mode 0 and KEEP_SIZE on a new file: sizes, nothing stored.
		q := filepath.Join(mnt, "allocated")
		qf, err := os.Create(q)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Fallocate(int(qf.Fd()), 0, 0, 50*mib); err != nil {
			t.Fatalf("fallocate mode 0: %v", err)
		}
		if s, stored := statBlocks(t, q); s != 50*mib || stored != 0 {
			t.Fatalf("after fallocate(0, 50 MiB): size %d, stored %d; want 50 MiB and 0", s, stored)
		}
		if err := unix.Fallocate(int(qf.Fd()), unix.FALLOC_FL_KEEP_SIZE, 40*mib, 20*mib); err != nil {
			t.Fatalf("fallocate KEEP_SIZE: %v", err)
		}
		if s, stored := statBlocks(t, q); s != 50*mib || stored != 0 {
			t.Fatalf("after fallocate(KEEP_SIZE, 40 MiB, 20 MiB): size %d, stored %d; want 50 MiB and 0", s, stored)
		}
		if err := unix.Fallocate(int(qf.Fd()), unix.FALLOC_FL_COLLAPSE_RANGE, 0, 4*mib); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Fatalf("fallocate COLLAPSE_RANGE: %v, want EOPNOTSUPP", err)
		}
		qf.Close()
		checkSparse(t, q, sparseFile{}, 50*mib)

		// Punch the stripe of the region at 100 MiB: its 6 blocks are freed.
		blocks := clusterBlocks(t, c)
		f, err = os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 100*mib, 4*mib); err != nil {
			t.Fatalf("fallocate PUNCH_HOLE: %v", err)
		}
		sf.zeroed = append(sf.zeroed, sparseRegion{100 * mib, 4 * mib})
		if s, stored := statBlocks(t, p); s != size || stored != 2*regionStored {
			t.Fatalf("after punching [100 MiB, 104 MiB): size %d, stored %d; want %d and %d", s, stored, size, 2*regionStored)
		}
		checkSparse(t, p, sf, size)
		deadline := time.Now().Add(time.Minute)
		for clusterBlocks(t, c) > blocks-6 {
			if time.Now().After(deadline) {
				t.Fatalf("%d blocks a minute after punching a stripe, %d before", clusterBlocks(t, c), blocks)
			}
			time.Sleep(200 * time.Millisecond)
		}

		// ZERO_RANGE keeping the size over the first MiB (part of a stripe:
		// zeros written over it), then from the last MiB to past the end
		// (the file grows; the stripe is stored up to its last data).
		zr := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, 0, mib)
		if errors.Is(zr, unix.EOPNOTSUPP) {
			// Kernels that do not pass ZERO_RANGE to FUSE refuse it
			// themselves; the vfs tests cover the mode.
			t.Logf("this kernel does not pass FALLOC_FL_ZERO_RANGE to FUSE: %v", zr)
		} else {
			if zr != nil {
				t.Fatalf("fallocate ZERO_RANGE|KEEP_SIZE: %v", zr)
			}
			if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_ZERO_RANGE, size-mib, 10*mib); err != nil {
				t.Fatalf("fallocate ZERO_RANGE past the end: %v", err)
			}
			sf.zeroed = append(sf.zeroed, sparseRegion{0, mib}, sparseRegion{size - mib, mib})
			size += 9 * mib
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			// Stripe 0 keeps its 3 MiB (zeros first), the one at 300 MiB
			// holds 2 MiB now: 4 units of 512 KiB and 2 of parity.
			if s, stored := statBlocks(t, p); s != size || stored != regionStored+6*512<<10 {
				t.Fatalf("after ZERO_RANGE: size %d, stored %d; want %d and %d", s, stored, size, regionStored+6*512<<10)
			}
			checkSparse(t, p, sf, size)
		}
		f.Close()
		_, stored := statBlocks(t, p)

		// A restart of the mount: the holes are still holes.
		mp.Stop(t)
		c.StartMount(mnt, nil)
		if s, st := statBlocks(t, p); s != size || st != stored {
			t.Fatalf("after a mount restart: size %d stored %d, want %d and %d", s, st, size, stored)
		}
		want := fmt.Sprintf("data(0)=0 hole(0)=%d data(%d)=%d hole(%d)=%d data(%d)=%d hole(%d)=%d ",
			3*mib, 50*mib, 300*mib, 50*mib, 50*mib, 200*mib, 300*mib, 200*mib, 200*mib)
		if got := seekAll(t, p, 0, 50*mib, 200*mib); got != want {
			t.Fatalf("seeks after a mount restart:\n got %s\nwant %s", got, want)
		}
		checkSparse(t, p, sf, size)
		checkSparse(t, q, sparseFile{}, 50*mib)
	})
}
