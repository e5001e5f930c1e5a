package vfs_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/vfs"
	"github.com/weftfs/weft/internal/vfs/vfstest"
)

// TestLazyAtime: a read's access time (relatime) shows at once in the
// mount that read, reaches the others within a few AtimeDelays without the
// read waiting for it, keeps ctime, is committed by Close, and never
// overrides an atime set explicitly after the read.
func TestLazyAtime(t *testing.T) {
	c := vfstest.New(t)
	reader, other := c.NewFS(), c.NewFS()
	ctx := vfs.WithCaller(context.Background(), vfs.Caller{})

	a, h, err := reader.Create(ctx, vfs.RootLIN, "f", vfs.CreateArgs{Type: vfs.TypeFile, Mode: 0o644}, true, os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	write := func() {
		t.Helper()
		if _, err := h.Write(ctx, []byte("data read later"), 0); err != nil {
			t.Fatal(err)
		}
		if err := reader.Release(ctx, h.ID); err != nil {
			t.Fatal(err)
		}
	}
	read := func(fs *vfs.FS) {
		t.Helper()
		rh, err := fs.Open(ctx, a.LIN, os.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rh.Read(ctx, make([]byte, 64), 0); err != nil && err.Error() != "EOF" {
			t.Fatal(err)
		}
		if err := fs.Release(ctx, rh.ID); err != nil {
			t.Fatal(err)
		}
	}
	attr := func(fs *vfs.FS) vfs.Attr {
		t.Helper()
		got, err := fs.GetAttr(ctx, a.LIN)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// committed waits until the other mount sees atime want.
	committed := func(want time.Time) vfs.Attr {
		t.Helper()
		deadline := time.Now().Add(5 * vfs.AtimeDelay)
		for {
			got := attr(other)
			if got.Atime.Equal(want) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("the other mount sees atime %v %v after the read, want %v", got.Atime, 5*vfs.AtimeDelay, want)
			}
			time.Sleep(vfs.AtimeDelay / 10)
		}
	}

	write()
	before := attr(other)
	read(reader)
	noted := attr(reader)
	if !noted.Atime.After(before.Atime) {
		t.Fatalf("the reading mount shows atime %v after the read, not later than %v", noted.Atime, before.Atime)
	}
	got := committed(noted.Atime)
	if !got.Ctime.Equal(before.Ctime) {
		t.Fatalf("ctime moved from %v to %v by a read", before.Ctime, got.Ctime)
	}

	// A newer mtime makes the next read due again; an atime set right
	// after it wins over the noted one.
	if h, err = reader.Open(ctx, a.LIN, os.O_RDWR); err != nil {
		t.Fatal(err)
	}
	write()
	read(reader)
	then := time.Unix(1_500_000_000, 0)
	if _, err := reader.SetAttr(ctx, a.LIN, vfs.SetAtime, vfs.Attr{Atime: then}); err != nil {
		t.Fatal(err)
	}
	if got := attr(reader); !got.Atime.Equal(then) {
		t.Fatalf("the reading mount shows atime %v after an explicit set to %v", got.Atime, then)
	}
	// Closing commits what the reading mount still has noted: nothing
	// for f, whose noted time the explicit set dropped.
	if err := reader.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := attr(other); !got.Atime.Equal(then) {
		t.Fatalf("atime %v after an explicit set to %v following a read", got.Atime, then)
	}

	// Close commits what is noted.
	closing := c.NewFS()
	read(closing)
	noted = attr(closing)
	if err := closing.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := attr(other); !got.Atime.Equal(noted.Atime) || got.Atime.Equal(then) {
		t.Fatalf("atime %v after the reading mount closed, want %v", got.Atime, noted.Atime)
	}
}
