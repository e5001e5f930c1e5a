package drive

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// stageTest stages data as a new block through a read-only handle of d's
// directory, with its segment CRCs carried, and returns the header and the
// staged file's name.
func stageTest(t *testing.T, d *Drive, data []byte) (BlockHeader, string) {
	t.Helper()
	h := BlockHeader{ID: NewBlockID(), Owner: 100, Stripe: 2, Unit: 1, Generation: 5, SegmentSize: SegmentSize}
	h.SegmentCRCs, _ = AppendSegmentCRCs(nil, data)
	return h, stageAs(t, d, h, data)
}

// stageAs stages data as block h through a read-only handle of d's
// directory and returns the staged file's name.
func stageAs(t *testing.T, d *Drive, h BlockHeader, data []byte) string {
	t.Helper()
	r, err := OpenReadOnly(d.Path(), testCluster, d.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	name, err := r.Stage(context.Background(), h, data)
	if err != nil {
		t.Fatalf("Stage %d bytes: %v", len(data), err)
	}
	return name
}

func TestStageAdopt(t *testing.T) {
	ctx := context.Background()
	// Sizes with and without direct I/O; -1: 1 MiB from a buffer that is
	// not page-aligned in memory (copied through the drive's buffer).
	for _, n := range []int{0, 1, directAlign, 3*SegmentSize + 5, 1 << 20, -1} {
		d := openTest(t)
		var data []byte
		if n < 0 {
			n = 1 << 20
			data = payload(n+8, 8)[8:]
		} else {
			data = payload(n, uint64(n))
		}
		h, name := stageTest(t, d, data)
		// Staged is not stored: invisible to Get and not counted.
		if _, _, err := d.Get(ctx, h.ID, 0, -1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%d bytes: Get before Adopt = %v", n, err)
		}
		if err := d.Adopt(ctx, h, name, int64(n)); err != nil {
			t.Fatalf("%d bytes: Adopt: %v", n, err)
		}
		got, hdr, err := d.Get(ctx, h.ID, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: Get after Adopt: %v (equal %v)", n, err, bytes.Equal(got, data))
		}
		if hdr.Owner != 100 || hdr.Stripe != 2 || hdr.Unit != 1 || hdr.Generation != 5 || hdr.Version != BlockFormatVersion {
			t.Fatalf("%d bytes: header %+v", n, hdr)
		}
		if err := d.Verify(ctx, h.ID); err != nil {
			t.Fatalf("%d bytes: Verify: %v", n, err)
		}
		u, _ := d.Usage()
		if u.Blocks != 1 || u.UsedBytes != int64(hdr.HeaderLength())+int64(n) {
			t.Fatalf("%d bytes: usage %+v after Adopt", n, u)
		}
		assertNoTemps(t, d)
		// A retried Adopt of the same content (staged again) succeeds and
		// leaves nothing behind.
		if err := d.Adopt(ctx, h, stageAs(t, d, h, data), int64(n)); err != nil {
			t.Fatalf("%d bytes: retried Adopt: %v", n, err)
		}
		assertNoTemps(t, d)
		if u, _ := d.Usage(); u.Blocks != 1 {
			t.Fatalf("%d bytes: %d blocks after a retried Adopt", n, u.Blocks)
		}
	}
}

func TestAdoptRefuses(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	data := payload(2*SegmentSize, 3)

	// A header that does not match the announced block.
	h, name := stageTest(t, d, data)
	bad := h
	bad.Generation++
	if err := d.Adopt(ctx, bad, name, int64(len(data))); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "generation 5") {
		t.Fatalf("Adopt with another generation = %v, want ErrInvalid naming it", err)
	}
	assertNoTemps(t, d) // refused files are removed
	h, name = stageTest(t, d, data)
	if err := d.Adopt(ctx, h, name, int64(len(data))-1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Adopt with another length = %v", err)
	}
	h, name = stageTest(t, d, data)
	bad = h
	bad.SegmentCRCs = []uint32{1, 2}
	if err := d.Adopt(ctx, bad, name, int64(len(data))); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Adopt with other CRCs = %v", err)
	}

	// Names that are not a staged file of the block: nothing outside the
	// block's directory is touched.
	h, name = stageTest(t, d, data)
	outside := filepath.Join(d.Path(), "victim")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := NewBlockID()
	for _, n := range []string{"", "../../victim", "victim", tempPrefix + h.ID.String() + "-", tempPrefix + other.String() + "-1", "x/" + name} {
		if err := d.Adopt(ctx, h, n, int64(len(data))); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Adopt(%q) = %v, want ErrInvalid", n, err)
		}
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("a file outside the block directory: %v", err)
	}
	// Missing staged file.
	if err := d.Adopt(ctx, h, name+"x", int64(len(data))); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Adopt of a missing file = %v", err)
	}
	if err := d.Adopt(ctx, h, name, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	// A block stored with other content: ErrExists, the staged file goes.
	h2 := h
	other2 := payload(len(data), 99)
	h2.SegmentCRCs, _ = AppendSegmentCRCs(nil, other2)
	name2 := stageAs(t, d, h2, other2)
	if err := d.Adopt(ctx, h2, name2, int64(len(other2))); !errors.Is(err, ErrExists) {
		t.Fatalf("Adopt over other content = %v, want ErrExists", err)
	}
	assertNoTemps(t, d)
	if got, _, err := d.Get(ctx, h.ID, 0, -1); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the stored block changed: %v", err)
	}
	// Only the owner adopts.
	r, err := OpenReadOnly(d.Path(), testCluster, d.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Adopt(ctx, h2, name2, int64(len(other2))); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Adopt on a read-only handle = %v", err)
	}
}

func TestAdoptCapacity(t *testing.T) {
	ctx := context.Background()
	data := payload(1<<20, 4)
	d := openTest(t, func(o *Options) { o.Capacity = 3 << 19 }) // room for one block
	h, name := stageTest(t, d, data)
	if err := d.Adopt(ctx, h, name, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	before, _ := d.Usage()
	h, name = stageTest(t, d, data)
	if err := d.Adopt(ctx, h, name, int64(len(data))); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Adopt over capacity = %v, want ErrNoSpace", err)
	}
	assertNoTemps(t, d)
	if after, _ := d.Usage(); after.UsedBytes != before.UsedBytes || after.Blocks != 1 {
		t.Fatalf("usage moved on a refused Adopt: %+v → %+v", before, after)
	}
	// The reserve: a staged block that leaves less than it free is refused.
	d.Close()
	u, _ := openTest(t).Usage()
	d = openAt(t, d.Path(), func(o *Options) { o.Reserve = u.FreeBytes + 1<<40 })
	h.ID = NewBlockID()
	name = stageAs(t, d, h, data)
	if err := d.Adopt(ctx, h, name, int64(len(data))); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Adopt into the reserve = %v, want ErrNoSpace", err)
	}
	assertNoTemps(t, d)
}

func TestStagedLeftoverRemovedByOpen(t *testing.T) {
	d := openTest(t)
	h, name := stageTest(t, d, payload(5000, 5))
	dir, _ := d.blockPath(h.ID)
	if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
		t.Fatalf("staged file: %v", err)
	}
	// The client dies before Adopt; the owner's next Open removes the file.
	d.Close()
	d = openAt(t, d.Path())
	assertNoTemps(t, d)
	if u, _ := d.Usage(); u.Blocks != 0 {
		t.Fatalf("%d blocks", u.Blocks)
	}
	// Unstage removes a staged file, and is fine with a missing one.
	h, name = stageTest(t, d, payload(10, 6))
	if err := d.Unstage(h.ID, name); err != nil {
		t.Fatal(err)
	}
	assertNoTemps(t, d)
	if err := d.Unstage(h.ID, name); err != nil {
		t.Fatalf("Unstage of a missing file: %v", err)
	}
	if err := d.Unstage(h.ID, "../x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Unstage(../x) = %v", err)
	}
}

// TestStageAdoptUnsynced: a block staged and adopted without its syncs
// is stored as Stage and Adopt store it, and FS opens the directory whose
// file system the client then syncs.
func TestStageAdoptUnsynced(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	r, err := OpenReadOnly(d.Path(), testCluster, d.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fs, err := r.FS()
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	for _, n := range []int{1, 3*SegmentSize + 5} {
		data := payload(n, uint64(n))
		h := BlockHeader{ID: NewBlockID(), Owner: 100, Stripe: 2, Unit: 1, Generation: 5}
		name, err := r.StageUnsynced(ctx, h, data)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.AdoptUnsynced(ctx, h, name, int64(n)); err != nil {
			t.Fatalf("%d bytes: AdoptUnsynced: %v", n, err)
		}
		if err := unix.Syncfs(int(fs.Fd())); err != nil {
			t.Fatal(err)
		}
		got, _, err := d.Get(ctx, h.ID, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: Get after AdoptUnsynced: %v (equal %v)", n, err, bytes.Equal(got, data))
		}
		if err := d.Verify(ctx, h.ID); err != nil {
			t.Fatal(err)
		}
	}
	assertNoTemps(t, d)
}
