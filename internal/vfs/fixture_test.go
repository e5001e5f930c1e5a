package vfs

import (
	"context"
	"testing"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
	"github.com/weftfs/weft/internal/meta"
)

// newTestFS returns an FS over a fresh in-memory namespace, without a data
// path: enough for namespace operations (no regular file's attributes
// through vfs, no opens).
func newTestFS(t *testing.T) (*FS, *meta.Meta) {
	t.Helper()
	ctx := context.Background()
	store := memkv.New(kv.Options{})
	if err := meta.Format(ctx, store, meta.FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := meta.Open(ctx, meta.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	fs := New(Config{Meta: m})
	t.Cleanup(func() {
		if err := fs.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return fs, m
}
