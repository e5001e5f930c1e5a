package drive

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestNoSpaceReserve(t *testing.T) {
	d := openTest(t)
	u, err := d.Usage()
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	d = openAt(t, d.Path(), func(o *Options) { o.Reserve = u.FreeBytes + 1<<40 })
	if u, _ := d.Usage(); u.FreeBytes != 0 {
		t.Fatalf("FreeBytes with a huge reserve = %d", u.FreeBytes)
	}
	h := BlockHeader{ID: NewBlockID()}
	err = d.Put(context.Background(), h, bytes.NewReader(make([]byte, 10)), 10)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put = %v, want ErrNoSpace", err)
	}
	for _, s := range []string{d.ID().String(), "4106 bytes"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

// fillReader fills the file system with a filler file on its first read,
// so that the write of the block itself hits ENOSPC.
type fillReader struct {
	r      io.Reader
	filler string
	done   bool
}

func (f *fillReader) Read(p []byte) (int, error) {
	if !f.done {
		f.done = true
		w, err := os.Create(f.filler)
		if err == nil {
			buf := make([]byte, 64<<10)
			for {
				if _, err := w.Write(buf); err != nil {
					break
				}
			}
			w.Close()
		}
	}
	return f.r.Read(p)
}

func TestNoSpaceTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	dir := filepath.Join(mnt, "drive")
	d := openAt(t, dir)
	ctx := context.Background()

	// The statfs check refuses a block larger than the file system.
	big := BlockHeader{ID: NewBlockID()}
	if err := d.Put(ctx, big, bytes.NewReader(make([]byte, 5<<20)), 5<<20); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put 5 MiB on a 4 MiB tmpfs = %v, want ErrNoSpace", err)
	}
	// ENOSPC while writing (space taken by someone else after the check)
	// maps to ErrNoSpace and leaves nothing behind.
	data := payload(1<<20, 1)
	h := BlockHeader{ID: NewBlockID()}
	fr := &fillReader{r: bytes.NewReader(data), filler: filepath.Join(mnt, "filler")}
	if err := d.Put(ctx, h, fr, int64(len(data))); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put while the disk fills = %v, want ErrNoSpace", err)
	}
	assertNoTemps(t, d)
	if _, _, err := d.Get(ctx, h.ID, 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after failed Put = %v", err)
	}
	// Space returns: puts work again.
	os.Remove(filepath.Join(mnt, "filler"))
	putTest(t, d, data)
}
