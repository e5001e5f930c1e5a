package memkv_test

import (
	"testing"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/kvtest"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// etcdDefaults are the limits of an etcd started with its own defaults, so
// the suite checks limits on memkv exactly as on etcd.
var etcdDefaults = kv.Limits{MaxOps: 128, MaxBytes: 1536 * 1024}

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(tb testing.TB, o kv.Options) kv.Store {
		if o.Limits == (kv.Limits{}) {
			o.Limits = etcdDefaults
		}
		s := memkv.New(o)
		tb.Cleanup(func() { s.Close() })
		return s
	})
}
