package drive

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	d := openAt(t, dir)
	data := payload(3*SegmentSize+5, 9)
	id := putTest(t, d, data)

	r, err := OpenReadOnly(dir, testCluster, d.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, _, err := r.Get(context.Background(), id, SegmentSize-1, 2*SegmentSize)
	if err != nil || !bytes.Equal(got, data[SegmentSize-1:3*SegmentSize-1]) {
		t.Fatalf("read-only get: %v", err)
	}
	if err := r.Put(context.Background(), BlockHeader{ID: NewBlockID()}, bytes.NewReader(data), int64(len(data))); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only put: %v", err)
	}
	if err := r.Delete(id); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only delete: %v", err)
	}
	// The owner keeps its lock and its writes: a read-only open does not
	// interfere.
	if _, _, err := d.Get(context.Background(), id, 0, -1); err != nil {
		t.Fatal(err)
	}
	// Damage shows as corrupt through the read-only drive too.
	hdr, _, _, err := d.Stat(id)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, d, id, int64(hdr.HeaderLength())+10)
	if _, _, err := r.Get(context.Background(), id, 0, 100); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), id.String()) {
		t.Fatalf("damaged block through a read-only drive: %v", err)
	}
	if _, err := OpenReadOnly(dir, "other", d.ID()); !errors.Is(err, ErrOtherCluster) {
		t.Fatalf("wrong cluster: %v", err)
	}
	if _, err := OpenReadOnly(dir, testCluster, d.ID()+1); !errors.Is(err, ErrBadIdentity) {
		t.Fatalf("wrong drive id: %v", err)
	}
	if _, err := OpenReadOnly(t.TempDir(), testCluster, d.ID()); !errors.Is(err, ErrBadIdentity) {
		t.Fatalf("not a drive: %v", err)
	}
}

// A read-only drive keeps the headers of blocks it read: later reads of
// any range are still right and checked, GetInto fills the caller's
// buffer (straight for whole segments, through scratch for parts), and a
// block deleted since reads as not found.
func TestReadOnlyHeaderCacheAndGetInto(t *testing.T) {
	dir := t.TempDir()
	d := openAt(t, dir)
	data := payload(5*SegmentSize+77, 3)
	id := putTest(t, d, data)
	r, err := OpenReadOnly(dir, testCluster, d.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for _, rg := range [][2]int{{0, 4096}, {SegmentSize + 100, 4096}, {0, 2 * SegmentSize}, {SegmentSize, 4*SegmentSize + 77}, {3*SegmentSize - 1, 2}} {
		off, n := rg[0], rg[1]
		got, _, err := r.Get(ctx, id, int64(off), int64(n))
		if err != nil || !bytes.Equal(got, data[off:off+n]) {
			t.Fatalf("get [%d, +%d): %v", off, n, err)
		}
		dst := make([]byte, n)
		got, _, err = r.GetInto(ctx, id, int64(off), dst)
		if err != nil || !bytes.Equal(got, data[off:off+n]) || &got[0] != &dst[0] {
			t.Fatalf("get into [%d, +%d): %v (into the buffer given: %v)", off, n, err, err == nil && &got[0] == &dst[0])
		}
	}
	if _, ok := r.headers.get(id); !ok {
		t.Fatal("header not kept by the read-only drive")
	}
	if err := d.Delete(id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Get(ctx, id, 0, 4096); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted block with its header kept: %v, want not found", err)
	}
}
