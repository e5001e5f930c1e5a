package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
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

// TestClientLatencyAcrossNodes: client I/O slow on n2's drives holds back
// a job on n1 (through n2's published figures and n1's throttle-latency
// worker), and lets it go once n2's clients are quiet again. The I/O is
// recorded into n2's statistics directly, as its block service would.
func TestClientLatencyAcrossNodes(t *testing.T) {
	etcd := etcdtest.NewTLSCluster(t, 1)
	root := t.TempDir()
	cfg1, cfg2 := nodeConfig(t, "n1", etcd, root), nodeConfig(t, "n2", etcd, root)
	n1 := startTestNode(t, cfg1)
	n2 := startTestNode(t, cfg2)
	n1.s.throttle.Allowance("probe", impact.PolicyLow) // n1 now runs a job: it reads the others' figures

	backoff := func() string {
		for _, j := range n1.s.throttle.Status().Jobs {
			if j.Job == "probe" {
				return j.LatencyBackoff
			}
		}
		t.Fatal("n1's throttle forgot the probe job")
		return ""
	}
	slow := qos.StatKey{Pool: DefaultPool, Class: qos.Other, Dir: qos.Read}
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	for backoff() == "" {
		if time.Now().After(deadline) {
			t.Fatalf("n1's job not held back 20 s into slow client I/O on n2: %+v", n1.s.throttle.Status())
		}
		for range 10 {
			n2.s.qos.gate.Stats().Record(time.Now(), slow, 4096, 0, 400*time.Millisecond)
		}
		n1.s.throttle.Allowance("probe", impact.PolicyLow)
		time.Sleep(100 * time.Millisecond)
	}
	if b := backoff(); !strings.Contains(b, "on pool "+DefaultPool+" (node n2)") {
		t.Errorf("back-off %q does not name the pool and node n2", b)
	}
	t.Logf("held back %v after n2's clients slowed down", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	deadline = start.Add(20 * time.Second)
	for backoff() != "" {
		if time.Now().After(deadline) {
			t.Fatalf("n1's job still held back 20 s after n2's clients went quiet: %+v", n1.s.throttle.Status())
		}
		n1.s.throttle.Allowance("probe", impact.PolicyLow)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("released %v after they went quiet", time.Since(start).Round(time.Millisecond))
}
