package qos

import (
	"testing"
	"time"
)

// TestMeter: a Meter's p99 covers the LatencyWindow, needs MinLatencyOps
// calls, is recomputed at most every meterRefresh, and is per pool.
func TestMeter(t *testing.T) {
	m := NewMeter()
	t0 := time.Unix(1_000_000, 0)
	for i := range MinLatencyOps - 1 {
		m.Record(t0, "fast", time.Duration(i+1)*time.Millisecond)
	}
	if p := m.P99(t0, "fast"); p != 0 {
		t.Fatalf("p99 of %d calls = %v, want none", MinLatencyOps-1, p)
	}
	m.Record(t0, "fast", 40*time.Millisecond)
	if p := m.P99(t0.Add(100*time.Millisecond), "fast"); p != 0 {
		t.Fatalf("p99 recomputed %v after the last: %v, want the cached none", 100*time.Millisecond, p)
	}
	p := m.P99(t0.Add(meterRefresh), "fast")
	if p < 40*time.Millisecond || p > 48*time.Millisecond {
		t.Fatalf("p99 = %v, want the 40ms call's bucket", p)
	}
	if q := m.P99(t0.Add(meterRefresh), "slow"); q != 0 {
		t.Fatalf("p99 of a pool without calls = %v", q)
	}
	// Two seconds later the window has passed.
	if q := m.P99(t0.Add(LatencyWindow+time.Second), "fast"); q != 0 {
		t.Fatalf("p99 after the window = %v, want none", q)
	}
}

// TestStatsReportedP99: ClientP99 answers the highest figure the pool's
// clients reported within the LatencyWindow where it is above the
// drive's, marked Reported, and forgets it after.
func TestStatsReportedP99(t *testing.T) {
	s := NewStats()
	t0 := time.Unix(2_000_000, 0)
	for range MinLatencyOps {
		s.Record(t0, StatKey{Pool: "fast", Class: Other, Dir: Read}, 4096, 0, 2*time.Millisecond)
	}
	s.ReportP99(t0, "fast", "m1", time.Millisecond) // below the drive's
	if l := s.ClientP99(t0)["fast"]; l.Reported || l.P99 < 2*time.Millisecond {
		t.Fatalf("a report below the drive's figure: %+v", l)
	}
	s.ReportP99(t0, "fast", "m2", 30*time.Millisecond)
	s.ReportP99(t0, "slow", "m2", 9*time.Millisecond) // no drive figure there
	got := s.ClientP99(t0.Add(500 * time.Millisecond))
	if l := got["fast"]; !l.Reported || l.P99 != 30*time.Millisecond || l.Ops != MinLatencyOps {
		t.Fatalf("fast: %+v, want m2's 30ms", l)
	}
	if l := got["slow"]; !l.Reported || l.P99 != 9*time.Millisecond {
		t.Fatalf("slow: %+v, want m2's 9ms", l)
	}
	got = s.ClientP99(t0.Add(LatencyWindow + time.Second))
	if _, ok := got["slow"]; ok {
		t.Fatalf("a report older than the window still counts: %+v", got)
	}
	if len(s.reported) != 0 {
		t.Fatalf("reports not forgotten: %v", s.reported)
	}
}
