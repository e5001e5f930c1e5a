package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/impact"
)

// TestPrintThrottle: `weft job status` shows why a job's workers last
// changed, a client latency back-off included, and the figures read.
func TestPrintThrottle(t *testing.T) {
	at := time.Date(2026, 3, 2, 10, 0, 30, 0, time.UTC)
	st := impact.ThrottleStatus{
		Tick: at, LatencyCheck: at,
		Latency: []impact.PoolLatency{{Pool: "fast", Class: "ssd", Node: "n2", P99: 15 * time.Millisecond}},
		Jobs: []impact.JobThrottle{{
			Job: "7", Policy: "low", Level: "low", MinWorkers: 0.25, MaxWorkers: 2, Target: 1, Workers: 1, Duty: 1,
			Pressure: "over: client p99 15ms > target 10ms on pool fast (node n2)", Changed: at,
			Reason:         "back off: client p99 15ms > target 10ms on pool fast (node n2)",
			ClientP99:      "nvme 5ms, ssd 10ms, hdd 50ms (level low)",
			LatencyBackoff: "client p99 15ms > target 10ms on pool fast (node n2)",
		}},
	}
	var b bytes.Buffer
	printThrottle(&b, st)
	for _, want := range []string{
		"7  policy low, level low (default) 0.25-2 workers, at 1 (1×100%)",
		"client p99 target  nvme 5ms, ssd 10ms, hdd 50ms (level low)",
		"held back          client p99 15ms > target 10ms on pool fast (node n2)",
		"back off: client p99 15ms > target 10ms on pool fast (node n2)",
		"pool fast (ssd, node n2) p99 15ms",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printThrottle output lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	printThrottle(&b, impact.ThrottleStatus{})
	if b.Len() != 0 {
		t.Errorf("no throttle: printed %q", b.String())
	}
}
