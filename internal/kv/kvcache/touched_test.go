package kvcache_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weftfs/weft/internal/kv"
)

// TestTouchedKeys: the keys under the watched prefix that the stream
// changes (another client's commits here) are listed, each call those
// since the last; the first call after WatchPrefix, and one after more
// changes than the list keeps, say the list is incomplete.
func TestTouchedKeys(t *testing.T) {
	for name, p := range pairs(t) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			a.WatchPrefix([]byte("d/"))
			if _, complete := a.TouchedKeys(); complete {
				t.Fatal("the first call after WatchPrefix says its list is complete")
			}
			set(t, b, "d/1", "x")
			set(t, b, "e/1", "x")
			set(t, b, "d/2", "x")
			set(t, b, "d/1", "") // a delete is a change too
			if err := a.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			keys, complete := a.TouchedKeys()
			var got []string
			for _, k := range keys {
				got = append(got, string(k))
			}
			if !complete || !slices.Equal(got, []string{"d/1", "d/2", "d/1"}) {
				t.Fatalf("TouchedKeys = %q, complete %v; want [d/1 d/2 d/1], complete", got, complete)
			}
			if keys, complete := a.TouchedKeys(); !complete || len(keys) != 0 {
				t.Fatalf("TouchedKeys again = %q, complete %v; want none, complete", keys, complete)
			}

			// More changes than the list keeps (1024), in transactions
			// of at most the store's MaxOps.
			per := max(1, min(100, b.Limits().MaxOps))
			for i := 0; i < 1100; i += per {
				if err := b.Update(ctx, func(tx kv.Tx) error {
					for j := i; j < min(i+per, 1100); j++ {
						tx.Put([]byte(fmt.Sprintf("d/x%04d", j)), []byte("y"))
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if keys, complete := a.TouchedKeys(); complete {
				t.Fatalf("TouchedKeys after 1100 changes: %d keys, complete; want incomplete", len(keys))
			}
			set(t, b, "d/3", "x")
			if err := a.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if keys, complete := a.TouchedKeys(); !complete || len(keys) != 1 {
				t.Fatalf("TouchedKeys after one more change = %q, complete %v; want [d/3], complete", keys, complete)
			}
		})
	}
}
