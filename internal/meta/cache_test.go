package meta

import (
	"errors"
	"testing"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// cachedPairs returns two Metas with their own kvcache over one store, as
// two mounts run: on memkv, and (unless -short) on a 3-member etcd with
// an etcd client each.
func cachedPairs(t *testing.T) map[string][2]*Meta {
	mem := memkv.New(kv.Options{Limits: etcdDefaultLimits})
	a := newMeta(t, newCached(t, mem))
	b, err := Open(bg, Config{Store: newCached(t, mem), LINBatch: 64})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]*Meta{"mem": {a, b}}
	if testing.Short() {
		return out
	}
	c := etcdtest.NewCluster(t, 3)
	var two [2]*Meta
	for i := range two {
		inner, err := etcdkv.New(etcdkv.Config{Client: c.Client(t), Prefix: "cached/", Options: kv.Options{Limits: etcdkv.EmbeddedLimits}, SessionReads: true})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			two[i] = newMeta(t, newCached(t, inner))
		} else if two[i], err = Open(bg, Config{Store: newCached(t, inner), LINBatch: 64}); err != nil {
			t.Fatal(err)
		}
	}
	out["etcd"] = two
	return out
}

// TestCacheCoherence: what one client changes, the other sees once its
// cache has caught up (Sync: the watch's progress, no sleeping); and
// changes decided on a stale cache are still decided on current data.
func TestCacheCoherence(t *testing.T) {
	for name, p := range cachedPairs(t) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			sync := func() {
				t.Helper()
				if err := b.Sync(bg); err != nil {
					t.Fatal(err)
				}
			}
			// b caches "f" as absent, a creates it.
			if _, err := b.Lookup(bg, RootLIN, "f"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("lookup before create: %v", err)
			}
			fa, err := a.Create(bg, RootLIN, "f", NewInode{Mode: 0o644})
			if err != nil {
				t.Fatal(err)
			}
			// Without waiting, a create by b of the same name is refused
			// (its commit checks the name), whatever b's cache says.
			if _, err := b.Create(bg, RootLIN, "f", NewInode{Mode: 0o600}); !errors.Is(err, ErrExists) {
				t.Fatalf("create of a name another client took: %v, want ErrExists", err)
			}
			sync()
			fb, err := b.Lookup(bg, RootLIN, "f")
			if err != nil || fb.LIN != fa.LIN {
				t.Fatalf("b's lookup after sync: %+v %v, want LIN %d", fb, err, fa.LIN)
			}
			// An attribute change by a shows in b's getattr.
			if _, err := a.SetAttr(bg, fa.LIN, SetMode, Attr{Mode: 0o600}); err != nil {
				t.Fatal(err)
			}
			sync()
			if got, err := b.GetAttr(bg, fa.LIN); err != nil || got.Mode != 0o600 {
				t.Fatalf("b's getattr after a's chmod: mode %o %v, want 600", got.Mode, err)
			}
			// b unlinks with its cache; a's cached entry goes away once a syncs.
			if err := b.Unlink(bg, RootLIN, "f"); err != nil {
				t.Fatal(err)
			}
			if err := a.Sync(bg); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Lookup(bg, RootLIN, "f"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a's lookup after b's unlink: %v, want ErrNotFound", err)
			}
			if _, err := a.GetAttr(bg, fa.LIN); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a's getattr of the unlinked inode: %v, want ErrNotFound", err)
			}
			// An unlink of a name a's cache still holds as absent... and
			// the reverse: a creates in a directory b made, b lists it.
			d, err := b.Mkdir(bg, RootLIN, "d", 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Sync(bg); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Create(bg, d.LIN, "x", NewInode{Mode: 0o644}); err != nil {
				t.Fatal(err)
			}
			sync()
			ents, _, err := b.ReadDir(bg, d.LIN, "", 10)
			if err != nil || len(ents) != 1 || ents[0].Name != "x" {
				t.Fatalf("b lists its directory after a's create: %v %v", ents, err)
			}
			// b's rmdir of a directory its cache may think empty is refused.
			if err := b.Rmdir(bg, RootLIN, "d"); !errors.Is(err, ErrNotEmpty) {
				t.Fatalf("rmdir of a non-empty directory: %v, want ErrNotEmpty", err)
			}
			check(t, a)
		})
	}
}
