package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/impact"
	"github.com/weftfs/weft/internal/qos"
)

// TestLatencyView: the throttle sees the node's own client p99 as measured
// now, and the other nodes' as last published until they go stale on this
// node's clock (whatever the publishers' clocks say), with each pool's
// drive class.
func TestLatencyView(t *testing.T) {
	stats := qos.NewStats()
	now := time.Unix(5000, 0)
	v := newLatencyView("n1", stats)
	v.now = func() time.Time { return now }
	v.setClasses(map[string]string{"fast": "nvme", "slow": "hdd"})
	for i := 0; i < 20; i++ {
		stats.Record(now, qos.StatKey{Pool: "fast", Class: qos.Other, Dir: qos.Read}, 4096, 0, 3*time.Millisecond)
	}
	skewed := now.Add(-time.Hour) // n2's clock is an hour behind
	records := []qos.NodeDemand{
		{Node: "n1", At: now, ClientP99: []qos.PoolLatency{{Pool: "fast", P99: time.Second, Ops: 99}}}, // own: ignored
		{Node: "n2", At: skewed, ClientP99: []qos.PoolLatency{{Pool: "slow", P99: 80 * time.Millisecond, Ops: 40}}},
		{Node: "n3", At: now, Pools: []string{"fast"}}, // no client I/O there
	}
	v.update(records)
	show := func() string { return fmt.Sprint(v.ClientLatency()) }
	p99 := stats.ClientP99(now)["fast"].P99
	want := fmt.Sprint([]impact.PoolLatency{{Pool: "fast", Class: "nvme", Node: "n1", P99: p99}, {Pool: "slow", Class: "hdd", Node: "n2", P99: 80 * time.Millisecond}})
	if got := show(); got != want {
		t.Fatalf("ClientLatency = %s, want %s", got, want)
	}

	// n2 keeps publishing: its figures stay, however far its clock is.
	for i := 1; i <= 5; i++ {
		now = now.Add(time.Second)
		records[1].At = skewed.Add(time.Duration(i) * time.Second)
		v.update(records)
	}
	// Our own I/O is out of the window by now.
	if got, want := show(), fmt.Sprint([]impact.PoolLatency{{Pool: "slow", Class: "hdd", Node: "n2", P99: 80 * time.Millisecond}}); got != want {
		t.Fatalf("n2 publishing: %s, want %s", got, want)
	}
	// n2 stops publishing (its record stays until its lease ends): its
	// figures go after latencyStale.
	now = now.Add(latencyStale)
	v.update(records)
	if got := show(); got == "[]" {
		t.Fatalf("n2 silent for exactly latencyStale: dropped already")
	}
	now = now.Add(time.Millisecond)
	v.update(records)
	if got := show(); got != "[]" {
		t.Fatalf("n2 silent past latencyStale: %s, want none", got)
	}
	// A node whose record is gone is forgotten.
	v.update(nil)
	if len(v.remote) != 0 {
		t.Fatalf("remote after no records: %v", v.remote)
	}
}
