package vfs_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/vfs"
	"github.com/weftfs/weft/internal/vfs/vfstest"
)

// TestMtimeAfterWrite: an mtime set on an open file after writes to it
// (tar sets it with futimens before close) is the one the
// file keeps: the commit of the buffered writes, which sets mtime, happens
// before the change, not at close after it. An mtime set before writes is
// replaced by the writes' as usual.
func TestMtimeAfterWrite(t *testing.T) {
	fs := vfstest.New(t).NewFS()
	ctx := vfs.WithCaller(context.Background(), vfs.Caller{})
	then := time.Unix(1_685_030_075, 0)
	for _, tc := range []struct {
		name      string
		setBefore bool // the mtime is set before the write, not after
	}{{"set after the write", false}, {"set before the write", true}} {
		t.Run(tc.name, func(t *testing.T) {
			a, h, err := fs.Create(ctx, vfs.RootLIN, tc.name, vfs.CreateArgs{Type: vfs.TypeFile, Mode: 0o600}, true, os.O_RDWR)
			if err != nil {
				t.Fatal(err)
			}
			setMtime := func() {
				if _, err := fs.SetAttr(ctx, a.LIN, vfs.SetMtime, vfs.Attr{Mtime: then}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.setBefore {
				setMtime()
			}
			if _, err := h.Write(ctx, []byte("some bytes of an archived file"), 0); err != nil {
				t.Fatal(err)
			}
			if !tc.setBefore {
				setMtime()
			}
			if err := fs.Release(ctx, h.ID); err != nil {
				t.Fatal(err)
			}
			got, err := fs.GetAttr(ctx, a.LIN)
			if err != nil {
				t.Fatal(err)
			}
			if tc.setBefore == got.Mtime.Equal(then) {
				t.Fatalf("mtime %v after close (set to %v %s)", got.Mtime, then, tc.name)
			}
			if got.Size != 30 {
				t.Fatalf("size %d, want 30", got.Size)
			}
		})
	}
}
