package drive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestPutDirect: with SyncAlways on a file system that takes O_DIRECT,
// blocks of whole 4 KiB pages are written directly and read back intact,
// others through the page cache; after a direct write fails with EINVAL
// the drive writes everything through the page cache.
func TestPutDirect(t *testing.T) {
	d := openTest(t)
	if !d.direct.Load() {
		t.Skipf("the file system of %s refuses O_DIRECT", d.Path())
	}
	if nd := openTest(t, func(o *Options) { o.Sync = SyncNever }); nd.direct.Load() {
		t.Error("direct writes on a drive with SyncNever")
	}
	check := func(n int, wantDirect bool) {
		t.Helper()
		if got := d.useDirect(int64(n)); got != wantDirect {
			t.Errorf("%d bytes: direct %v, want %v", n, got, wantDirect)
		}
		data := payload(n, uint64(n))
		id := putTest(t, d, data)
		got, _, err := d.Get(context.Background(), id, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: Get = %v, same data %v", n, err, bytes.Equal(got, data))
		}
		if err := d.Verify(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{directAlign, 3 * directAlign, 1 << 20, 5<<20 + directAlign} {
		check(n, true)
	}
	check(directAlign+1, false)
	check(0, true) // nothing to write but the header

	d.directFailed(&os.PathError{Op: "write", Path: "x", Err: syscall.EINVAL})
	if d.direct.Load() {
		t.Fatal("direct writes still on after EINVAL")
	}
	check(1<<20, false)
}

// TestReadDirect: a read of whole units (directReadMin or more, aligned)
// and a scan's Verify go around the page cache, on the owner's drive and
// on a read-only handle, and read the right bytes; a small read and one
// into an unaligned buffer go through it; a corrupt segment written
// through the cache and not yet on the disk is still found. Residency is
// what mincore reports for the block file's data pages after the read.
func TestReadDirect(t *testing.T) {
	d := openTest(t)
	if !d.direct.Load() {
		t.Skipf("the file system of %s refuses O_DIRECT", d.Path())
	}
	ro, err := OpenReadOnly(d.Path(), d.ident.ClusterID, d.ID())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := payload(1<<20+5000, 7) // a tail that is not a whole page
	get := func(dr *Drive, off, n int64, dst []byte) func(BlockID) error {
		return func(id BlockID) error {
			var got []byte
			var err error
			if dst != nil {
				got, _, err = dr.GetInto(ctx, id, off, dst)
			} else {
				got, _, err = dr.Get(ctx, id, off, n)
			}
			if err == nil && !bytes.Equal(got, data[off:off+int64(len(got))]) || int64(len(got)) != n {
				err = fmt.Errorf("read %d bytes, want %d, or other bytes", len(got), n)
			}
			return err
		}
	}
	seg := int64(SegmentSize)
	for _, tc := range []struct {
		name     string
		read     func(BlockID) error
		off, n   int64
		resident bool
	}{
		{"whole block", get(d, 0, int64(len(data)), nil), 0, int64(len(data)), false},
		{"whole block, read-only handle", get(ro, 0, int64(len(data)), nil), 0, int64(len(data)), false},
		{"whole segments into an aligned buffer", get(ro, 4*seg, 8*seg, alignedBuf(8*int(seg))), 4 * seg, 8 * seg, false},
		{"whole segments into an unaligned buffer", get(ro, 4*seg, 8*seg, alignedBuf(8*int(seg) + 1)[1:]), 4 * seg, 8 * seg, true},
		{"4 KiB", get(d, 4096, 4096, nil), 4096, 4096, true},
		{"Verify", func(id BlockID) error { return d.Verify(ctx, id) }, 0, int64(len(data)), false},
		{"Verify, read-only handle", func(id BlockID) error { return ro.Verify(ctx, id) }, 0, int64(len(data)), false},
	} {
		id := putTest(t, d, data)
		_, path := d.blockPath(id)
		evict(t, path)
		if err := tc.read(id); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The header's read (through the page cache) may read a few
		// pages ahead, and a tail that is not a whole page is read
		// through the cache: "around the page cache" is fewer than a
		// quarter of the pages read resident, "through it" all of them.
		r, pages := residentData(t, path, tc.off, tc.n)
		if got := r == pages; got != tc.resident || !tc.resident && r > pages/4 {
			t.Errorf("%s: %d of the %d data pages read are in the page cache, want all %v", tc.name, r, pages, tc.resident)
		}
	}

	// A flipped byte written through the page cache (not yet on the
	// disk) is seen by direct reads: the kernel writes dirty pages back
	// before a direct read of them.
	id := putTest(t, d, data)
	_, path := d.blockPath(id)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{data[300000] ^ 0xff}, HeaderAlign+300000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := ro.Verify(ctx, id); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify of a corrupt block: %v, want ErrCorrupt", err)
	}
	if _, _, err := ro.Get(ctx, id, 0, -1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Get of a corrupt block: %v, want ErrCorrupt", err)
	}
}

// evict drops the page cache of the file at path.
func evict(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// residentData counts the pages of block file path's data range [off,
// off+n) that are in the page cache, and the range's pages.
func residentData(t *testing.T, path string, off, n int64) (resident, pages int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(info.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (int64(len(m))+page-1)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	// Data starts after the header, HeaderAlign bytes for these blocks.
	for _, v := range vec[(HeaderAlign+off)/page : (HeaderAlign+off+n+page-1)/page] {
		resident += int(v & 1)
		pages++
	}
	return resident, pages
}
