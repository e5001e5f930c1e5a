package mount

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/kvcache"
	"github.com/weftfs/weft/internal/kv/memkv"
	"github.com/weftfs/weft/internal/meta"
)

// TestMetaCollector: the mount's metrics count what its write-back did.
func TestMetaCollector(t *testing.T) {
	ctx := context.Background()
	inner := memkv.New(kv.Options{})
	preload, presume := meta.CacheRanges()
	c, err := kvcache.New(kvcache.Config{Inner: inner, Preload: preload, Presume: presume})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if err := meta.Format(ctx, c, meta.FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := meta.Open(ctx, meta.Config{Store: c, Session: 1, WriteBack: true})
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.Mkdir(ctx, meta.RootLIN, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	// The first create takes d's delegation, which becomes ready in the
	// background once the cache has caught up with its commit: poll until
	// a create is deferred; every later one is.
	for i := 0; i < 200 || c.Stats().Deferred == 0; i++ {
		if i == 5000 {
			t.Fatalf("no create of %d deferred in a directory the mount made: %s", i, c)
		}
		if _, err := m.Create(ctx, d.LIN, fmt.Sprintf("f%04d", i), meta.NewInode{Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		if c.Stats().Deferred == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Locks: one granted, one refused (a second owner), one unlock.
	lk := meta.Lock{Owner: meta.LockOwner{Session: 1, Owner: 1}, Type: meta.LockWrite, Start: 0, End: 9}
	if err := m.SetLock(ctx, d.LIN, lk, false); err != nil {
		t.Fatal(err)
	}
	other := lk
	other.Owner.Owner = 2
	if err := m.SetLock(ctx, d.LIN, other, false); !errors.Is(err, meta.ErrLocked) {
		t.Fatalf("a second owner's lock: %v, want ErrLocked", err)
	}
	if err := m.UnlockOwner(ctx, d.LIN, 1, false); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newMetaCollector(m, c))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range mt.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		}
	}
	if got["weft_mount_writeback_total/deferred"] == 0 || got["weft_mount_writeback_total/deferred"] != got["weft_mount_writeback_total/committed"] ||
		got["weft_mount_writeback_waiting"] != 0 || got["weft_mount_delegations"] != 1 || got["weft_mount_meta_cache_serving"] != 1 {
		t.Fatalf("metrics: %v", got)
	}
	if got["weft_mount_locks_total/granted"] != 1 || got["weft_mount_locks_total/refused"] != 1 || got["weft_mount_locks_total/interrupted"] != 0 ||
		got["weft_mount_unlocks_total"] != 1 || got["weft_mount_lock_waits_total"] != 0 || got["weft_mount_lock_waiters"] != 0 {
		t.Fatalf("lock metrics: %v", got)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// The mount's metrics, served without authentication, listen on loopback
// only.
func TestMetricsLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:9101": true, "[::1]:9101": true, "localhost:9101": true, "127.4.5.6:0": true,
		"0.0.0.0:9101": false, ":9101": false, "10.0.0.1:9101": false, "[::]:9101": false, "metrics.example:9101": false, "9101": false,
	} {
		err := loopback(addr)
		if ok != (err == nil) {
			t.Errorf("--metrics %s: %v", addr, err)
		}
		if err != nil && !strings.Contains(err.Error(), addr) {
			t.Errorf("--metrics %s: the error does not name it: %v", addr, err)
		}
	}
}
