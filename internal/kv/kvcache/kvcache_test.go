package kvcache_test

import (
	"context"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/kvcache"
	"github.com/weftfs/weft/internal/kv/kvtest"
	"github.com/weftfs/weft/internal/kv/memkv"
)

var etcdDefaults = kv.Limits{MaxOps: 128, MaxBytes: 1536 * 1024}

func cached(tb testing.TB, inner kv.Follower, o kv.Options) *kvcache.Store {
	s, err := kvcache.New(kvcache.Config{Inner: inner, Options: o,
		Preload: []kv.Range{{Start: []byte("u"), End: []byte("v")}},
		Presume: []kv.Range{{Start: []byte("p"), End: []byte("q")}}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	waitReady(tb, s)
	return s
}

// waitReady waits until the cache serves and is caught up (a preload and
// a watch): tests then exercise the cache, not the fallback.
func waitReady(tb testing.TB, s *kvcache.Store) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Ready(ctx); err != nil {
		tb.Fatalf("kvcache never became ready: %v (%s)", err, s)
	}
}

func TestConformanceMem(t *testing.T) {
	kvtest.RunWith(t, func(tb testing.TB, o kv.Options) kv.Store {
		if o.Limits == (kv.Limits{}) {
			o.Limits = etcdDefaults
		}
		inner := memkv.New(o)
		tb.Cleanup(func() { inner.Close() })
		return cached(tb, inner, o)
	}, kvtest.Options{ViewsNotSnapshots: true})
}

func TestConformanceEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	cli := etcdtest.NewCluster(t, 3).Client(t)
	kvtest.RunWith(t, func(tb testing.TB, o kv.Options) kv.Store {
		if o.Limits == (kv.Limits{}) {
			o.Limits = etcdkv.EmbeddedLimits
		}
		inner, err := etcdkv.New(etcdkv.Config{Client: cli, Prefix: "kvcache/" + tb.Name() + "/", Options: o, SessionReads: true})
		if err != nil {
			tb.Fatal(err)
		}
		return cached(tb, inner, o)
	}, kvtest.Options{ViewsNotSnapshots: true})
}
