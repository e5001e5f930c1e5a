package kvcache_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/kvcache"
	"github.com/weftfs/weft/internal/kv/memkv"
)

var ctx = context.Background()

// pair returns two caching clients of one store: on memkv, and (unless
// -short) on a 3-member etcd with one etcd client each.
func pairs(t *testing.T) map[string][2]*kvcache.Store {
	mem := memkv.New(kv.Options{})
	t.Cleanup(func() { mem.Close() })
	out := map[string][2]*kvcache.Store{"mem": {cached(t, mem, kv.Options{}), cached(t, mem, kv.Options{})}}
	if testing.Short() {
		return out
	}
	c := etcdtest.NewCluster(t, 3)
	var two [2]*kvcache.Store
	for i := range two {
		inner, err := etcdkv.New(etcdkv.Config{Client: c.Client(t), Prefix: "pair/", Options: kv.Options{Limits: etcdkv.EmbeddedLimits}, SessionReads: true})
		if err != nil {
			t.Fatal(err)
		}
		two[i] = cached(t, inner, kv.Options{})
	}
	out["etcd"] = two
	return out
}

func view(t *testing.T, s kv.Store, key string) string {
	t.Helper()
	var v []byte
	if err := s.View(ctx, func(tx kv.Tx) error { var err error; v, err = tx.Get([]byte(key)); return err }); err != nil {
		t.Fatal(err)
	}
	if v == nil {
		return "<absent>"
	}
	return string(v)
}

func set(t *testing.T, s kv.Store, key, val string) {
	t.Helper()
	if err := s.Update(ctx, func(tx kv.Tx) error {
		if val == "" {
			tx.Delete([]byte(key))
		} else {
			tx.Put([]byte(key), []byte(val))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestCoherence: a change by one client is served by the other's cache
// once the other has seen the change go by (Sync waits for the stream's
// progress, no sleeping); the other's reads then come from its cache.
func TestCoherence(t *testing.T) {
	for name, p := range pairs(t) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			set(t, a, "k", "1")
			if err := b.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if got := view(t, b, "k"); got != "1" {
				t.Fatalf("b reads %s, want 1", got)
			}
			for i := 2; i < 20; i++ {
				want := strconv.Itoa(i)
				if i%5 == 0 {
					want = "" // deletes too
				}
				set(t, a, "k", want)
				if err := b.Sync(ctx); err != nil {
					t.Fatal(err)
				}
				before := b.Stats()
				got := view(t, b, "k")
				if want == "" {
					want = "<absent>"
				}
				if got != want {
					t.Fatalf("after change %d, b reads %s, want %s", i, got, want)
				}
				if after := b.Stats(); after.Misses != before.Misses {
					t.Fatalf("b read k from the store (%d misses before, %d after): the change should have come by the stream", before.Misses, after.Misses)
				}
			}
			// Read-your-writes without waiting.
			set(t, b, "k", "mine")
			if got := view(t, b, "k"); got != "mine" {
				t.Fatalf("b reads %s right after writing mine", got)
			}
		})
	}
}

// TestStaleCacheUpdates: Updates decided on a stale cache still commit
// correctly: two clients increment one counter, each with a cache that
// may lag the other's increments; no increment is lost.
func TestStaleCacheUpdates(t *testing.T) {
	for name, p := range pairs(t) {
		t.Run(name, func(t *testing.T) {
			const per = 100
			var wg sync.WaitGroup
			for _, s := range p {
				wg.Add(1)
				go func(s *kvcache.Store) {
					defer wg.Done()
					for i := 0; i < per; i++ {
						if err := s.Update(ctx, func(tx kv.Tx) error {
							v, err := tx.Get([]byte("n"))
							if err != nil {
								return err
							}
							n, _ := strconv.Atoi(string(v))
							tx.Put([]byte("n"), []byte(strconv.Itoa(n+1)))
							return nil
						}); err != nil {
							t.Error(err)
							return
						}
					}
				}(s)
			}
			wg.Wait()
			if err := p[0].Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if got := view(t, p[0], "n"); got != strconv.Itoa(2*per) {
				t.Fatalf("counter = %s, want %d", got, 2*per)
			}
		})
	}
}

var errTaken = errors.New("taken")

// TestPresumedAbsent: keys in Presume ranges are taken for absent by an
// optimistic attempt; when one exists (created by the other client, not
// yet known here), the commit refuses it and the Update decides again on
// the store.
func TestPresumedAbsent(t *testing.T) {
	for name, p := range pairs(t) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			create := func(s kv.Store, key string) error {
				return s.Update(ctx, func(tx kv.Tx) error {
					v, err := tx.Get([]byte(key))
					if err != nil {
						return err
					}
					if v != nil {
						return fmt.Errorf("%w: %s", errTaken, key)
					}
					tx.Put([]byte(key), []byte("x"))
					return nil
				})
			}
			for i := 0; i < 20; i++ {
				k := fmt.Sprintf("p%02d", i)
				if err := create(a, k); err != nil {
					t.Fatal(err)
				}
				// b has not synced: it may not know k yet.
				if err := create(b, k); !errors.Is(err, errTaken) {
					t.Fatalf("second create of %s: %v, want taken", k, err)
				}
			}
		})
	}
}

// TestKnownEmpty: a range declared empty is answered from the cache,
// scans included, and an insert by another client is seen by the commit
// of a transaction that scanned it.
func TestKnownEmpty(t *testing.T) {
	for name, p := range pairs(t) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			r := kv.Range{Start: []byte("r/"), End: []byte("r0")}
			a.KnownEmpty(a.Epoch(), r)
			set(t, a, "r/1", "x")
			before := a.Stats()
			var n int
			insertOnce := sync.Once{}
			err := a.Update(ctx, func(tx kv.Tx) error {
				kvs, _, err := tx.Scan(r.Start, r.End, 0)
				if err != nil {
					return err
				}
				n = len(kvs)
				// Another client inserts into the range after the scan,
				// before the commit: the commit must fail and retry.
				insertOnce.Do(func() { set(t, b, "r/2", "y") })
				tx.Put([]byte("count"), []byte(strconv.Itoa(n)))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != 2 {
				t.Fatalf("the committed attempt scanned %d keys, want 2 (the insert must make the first attempt conflict)", n)
			}
			if err := a.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			before = a.Stats()
			if err := a.View(ctx, func(tx kv.Tx) error {
				kvs, _, err := tx.Scan(r.Start, r.End, 0)
				n = len(kvs)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if after := a.Stats(); n != 2 || after.Misses != before.Misses {
				t.Fatalf("view scanned %d keys with %d misses, want 2 from the cache", n, after.Misses-before.Misses)
			}
		})
	}
}
