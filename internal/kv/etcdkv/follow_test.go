package etcdkv_test

import (
	"context"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
)

// TestFollow: changes come in order with their revisions, deletes
// included, only under the store's prefix; and on an idle store a
// progress request is answered with a report of the current revision
// (the cache relies on it to know it is not behind).
func TestFollow(t *testing.T) {
	cli := etcdtest.New(t)
	s, err := etcdkv.New(etcdkv.Config{Client: cli, Prefix: "follow/", Options: kv.Options{Limits: etcdkv.EmbeddedLimits}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rev0 := currentRev(t, s)
	got := make(chan kv.Changes, 100)
	go func() { _ = s.Follow(ctx, rev0, func(c kv.Changes) { got <- c }) }()
	// Idle since the watch began (no change after rev0 anywhere yet).
	progress(ctx, t, s, got, rev0)
	if _, err := cli.Put(ctx, "elsewhere", "x"); err != nil { // not under the prefix
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx kv.Tx) error { tx.Put([]byte("a"), []byte("1")); tx.Put([]byte("b"), []byte("2")); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx kv.Tx) error { tx.Delete([]byte("a")); return nil }); err != nil {
		t.Fatal(err)
	}
	var changes []kv.Change
	for len(changes) < 3 {
		select {
		case c := <-got:
			changes = append(changes, c.Changes...)
		case <-ctx.Done():
			t.Fatalf("changes so far %v: %v", changes, ctx.Err())
		}
	}
	if c := changes; string(c[0].Key) != "a" || string(c[1].Key) != "b" || c[0].Rev != c[1].Rev || !c[2].Delete || string(c[2].Key) != "a" || c[2].Rev <= c[1].Rev {
		t.Fatalf("changes %+v", c)
	}
	progress(ctx, t, s, got, currentRev(t, s))
}

// progress asks for progress until a report at revision want or later
// comes (it fails the test when ctx ends first).
func progress(ctx context.Context, t *testing.T, s *etcdkv.Store, got chan kv.Changes, want int64) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := s.Progress(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-got:
			if len(c.Changes) == 0 && c.Rev >= want {
				return
			}
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("no progress report at revision %d on an idle store: %v", want, ctx.Err())
		}
	}
}

func currentRev(t *testing.T, s *etcdkv.Store) int64 {
	t.Helper()
	snap, err := s.Backend(false).Begin(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snap.Get(context.Background(), [][]byte{[]byte("x")}); err != nil {
		t.Fatal(err)
	}
	return snap.Revision()
}
