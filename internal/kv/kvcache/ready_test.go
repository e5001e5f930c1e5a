package kvcache_test

import (
	"context"
	"errors"
	"testing"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/kvcache"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// TestReady: once Ready returns the cache serves, and holds every change
// committed before the call, including those committed by another client
// after the cache started (a key of a preload range it did not get would
// read as absent).
func TestReady(t *testing.T) {
	ctx := context.Background()
	inner := memkv.New(kv.Options{})
	t.Cleanup(func() { inner.Close() })
	put := func(k, v string) {
		t.Helper()
		if err := inner.Update(ctx, func(tx kv.Tx) error { tx.Put([]byte(k), []byte(v)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	put("u1", "before")
	s := cached(t, inner, kv.Options{}) // Ready, through waitReady
	if !s.Stats().Serving {
		t.Fatalf("ready and not serving: %s", s)
	}
	put("u2", "after") // another client's commit
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	hits := s.Stats().Hits
	for k, want := range map[string]string{"u1": "before", "u2": "after"} {
		var got []byte
		if err := s.View(ctx, func(tx kv.Tx) error {
			var err error
			got, err = tx.Get([]byte(k))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("%s = %q after Ready, want %q", k, got, want)
		}
	}
	if s.Stats().Hits != hits+2 {
		t.Fatalf("reads after Ready: %d cache hits, want 2 (%s)", s.Stats().Hits-hits, s)
	}
}

// TestReadyEndsWithContext: a cache that cannot follow its store never
// serves; Ready returns the context's error.
func TestReadyEndsWithContext(t *testing.T) {
	inner := memkv.New(kv.Options{})
	inner.Close() // Follow fails: the cache never starts
	s, err := kvcache.New(kvcache.Config{Inner: inner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Ready(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ready on a cache that cannot follow: %v, want context.Canceled", err)
	}
}
