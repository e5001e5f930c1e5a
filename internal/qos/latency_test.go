package qos

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestLatencyBuckets(t *testing.T) {
	for _, d := range []time.Duration{0, 500 * time.Nanosecond, time.Microsecond, 37 * time.Microsecond,
		time.Millisecond, 4 * time.Millisecond, 5*time.Millisecond + 1, 80 * time.Millisecond, 2 * time.Second} {
		up := latUpper(latBucket(d))
		if up <= d && d < 29*time.Second {
			t.Errorf("%v: bucket %d's upper edge %v is not above it", d, latBucket(d), up)
		}
		if d >= time.Microsecond && float64(up) > 1.19*float64(d)+1 {
			t.Errorf("%v: bucket upper edge %v is more than 19%% above", d, up)
		}
	}
	if latBucket(time.Hour) != latBuckets-1 {
		t.Errorf("an hour is in bucket %d, want the last", latBucket(time.Hour))
	}
}

func TestStatsClientP99(t *testing.T) {
	s := NewStats()
	t0 := time.Unix(1000, 0)
	other := StatKey{Pool: "fast", Class: Other, Dir: Read}
	// Second 1000: 99 fast reads and writes of 1 ms, one slow of 50 ms;
	// a maintenance I/O of 1 s does not count, nor does QoS queueing.
	for i := 0; i < 99; i++ {
		k := other
		if i%2 == 1 {
			k.Dir = Write
		}
		s.Record(t0.Add(time.Duration(i)*time.Millisecond), k, 4096, time.Second, time.Millisecond)
	}
	s.Record(t0.Add(200*time.Millisecond), other, 4096, 0, 50*time.Millisecond)
	s.Record(t0.Add(300*time.Millisecond), StatKey{Pool: "fast", Class: Maintenance, Dir: Read}, 1<<20, 0, time.Second)
	// A pool with too few I/Os for a figure.
	for i := 0; i < MinLatencyOps-1; i++ {
		s.Record(t0, StatKey{Pool: "slow", Class: Other, Dir: Read}, 4096, 0, time.Second)
	}

	got := s.ClientP99(t0.Add(500 * time.Millisecond))
	if len(got) != 1 {
		t.Fatalf("ClientP99 = %v, want only pool fast", got)
	}
	l := got["fast"]
	if l.Ops != 100 || l.P99 < time.Millisecond || l.P99 > 1190*time.Microsecond {
		t.Errorf("fast = %+v, want 100 ops and a p99 of 1 ms (1 in 100 slow is the 100th percentile)", l)
	}

	// A spike: the next half second has 20 I/Os of 40 ms. Together with
	// the previous second (the window) they are 1/6 of the I/Os, so the
	// p99 is the spike's.
	t1 := t0.Add(time.Second)
	for i := 0; i < 20; i++ {
		s.Record(t1.Add(time.Duration(i)*10*time.Millisecond), other, 4096, 0, 40*time.Millisecond)
	}
	l = s.ClientP99(t1.Add(500 * time.Millisecond))["fast"]
	if l.Ops != 120 || l.P99 < 40*time.Millisecond || l.P99 > 48*time.Millisecond {
		t.Errorf("during the spike: %+v, want 120 ops and a p99 of 40 ms", l)
	}

	// Two seconds later the window holds only quiet I/O again.
	t3 := t0.Add(3 * time.Second)
	for i := 0; i < 50; i++ {
		s.Record(t3, other, 4096, 0, 2*time.Millisecond)
	}
	l = s.ClientP99(t3.Add(100 * time.Millisecond))["fast"]
	if l.Ops != 50 || l.P99 < 2*time.Millisecond || l.P99 > 2380*time.Microsecond {
		t.Errorf("after the spike: %+v, want 50 ops and a p99 of 2 ms", l)
	}
	// And with no I/O for the whole window there is no figure.
	if got := s.ClientP99(t0.Add(10 * time.Second)); len(got) != 0 {
		t.Errorf("idle: %v, want none", got)
	}
}

// TestCollectorClientP99: the gate's collector exports the client p99 of
// each pool with enough client I/O, in seconds.
func TestCollectorClientP99(t *testing.T) {
	now := time.Unix(2000, 0)
	g := NewGate(NewStats())
	g.now = func() time.Time { return now }
	for i := 0; i < 50; i++ {
		g.Stats().Record(now, StatKey{Pool: "fast", Class: Other, Dir: Read}, 4096, 0, 8*time.Millisecond)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(g)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		if mf.GetName() != "weft_qos_client_p99_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got = append(got, fmt.Sprintf("%s=%.4f", m.GetLabel()[0].GetValue(), m.GetGauge().GetValue()))
		}
	}
	// 8 ms falls in the bucket [2^51/4, 2^52/4) µs: its upper edge is 8.19 ms.
	if fmt.Sprint(got) != "[fast=0.0082]" {
		t.Errorf("weft_qos_client_p99_seconds = %v, want [fast=0.0082]", got)
	}
}
