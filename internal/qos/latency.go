package qos

import (
	"math"
	"time"
)

// LatencyClass is the class whose latency Stats measures per pool: the
// clients', which the job throttle protects.
const LatencyClass = Other

// LatencyWindow is the stretch of I/O a P99 figure covers: the second in
// progress and the one before it, so that a figure is at most two seconds
// old and reflects a spike within a fraction of a second (a spike that
// fills a third of the window already owns its top percent).
const LatencyWindow = 2 * time.Second

// MinLatencyOps is the fewest I/Os a P99 figure needs: below it the 99th
// percentile is merely the slowest I/O, one outlier, and ClientP99
// reports no figure.
const MinLatencyOps = 10

// Latency histogram buckets: bucket i holds drive times in
// [2^(i/4), 2^((i+1)/4)) microseconds (four per octave, so a reported
// percentile, the bucket's upper edge, is at most 19 % above the true one);
// the first holds everything under 1 µs, the last everything from
// 2^(latBuckets-1)/4 µs (about 29 s) up.
const latBuckets = 100

// latHist counts I/Os by drive time. The zero value is empty.
type latHist struct {
	n      int64
	counts [latBuckets]int64
}

func latBucket(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	return min(int(4*math.Log2(us)), latBuckets-1)
}

// latUpper is the upper edge of bucket i.
func latUpper(i int) time.Duration {
	return time.Duration(math.Pow(2, float64(i+1)/4) * float64(time.Microsecond))
}

func (h *latHist) add(d time.Duration) {
	h.n++
	h.counts[latBucket(d)]++
}

func (h *latHist) merge(o *latHist) {
	h.n += o.n
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// quantile returns the upper edge of the bucket holding the q-th quantile
// (0 < q ≤ 1), 0 for an empty histogram.
func (h *latHist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return latUpper(i)
		}
	}
	return latUpper(latBuckets - 1)
}

// PoolLatency is the latency of one pool's LatencyClass I/O on one node
// over the LatencyWindow ending at At.
type PoolLatency struct {
	Pool string `json:"pool"`
	// P99 is the 99th percentile of the I/Os' time at the drive (after
	// any QoS queueing: the part maintenance I/O competing for the drive
	// adds to), rounded up to a histogram bucket edge.
	P99 time.Duration `json:"p99"`
	// Ops is the number of I/Os it was measured over (at least
	// MinLatencyOps).
	Ops int64 `json:"ops"`
	// Reported is set when P99 is a client's own figure of its calls
	// (Stats.ReportP99), higher than the drive's.
	Reported bool `json:"reported,omitempty"`
}

// ClientP99 returns the 99th percentile of the drive time of each pool's
// LatencyClass I/O over the LatencyWindow ending at now (the current
// second so far and the one before), for the pools with at least
// MinLatencyOps such I/Os in it, by pool name — or, where higher, the
// highest p99 a client reported of its own calls to the pool within the
// window (ReportP99; Reported is then set).
func (s *Stats) ClientP99(now time.Time) map[string]PoolLatency {
	s.mu.Lock()
	sum := windowHists(now, func(sec int64) map[string]*latHist {
		if slot := &s.ring[sec%int64(len(s.ring))]; slot.at == sec {
			return slot.lat
		}
		return nil
	})
	reported := s.reportedLocked(now)
	s.mu.Unlock()
	out := map[string]PoolLatency{}
	for pool, h := range sum {
		out[pool] = PoolLatency{Pool: pool, P99: h.quantile(0.99), Ops: h.n}
	}
	// The clients' own figures (meter.go): the higher one counts.
	for pool, p99 := range reported {
		if l := out[pool]; p99 > l.P99 {
			out[pool] = PoolLatency{Pool: pool, P99: p99, Ops: max(l.Ops, MinLatencyOps), Reported: true}
		}
	}
	return out
}

// windowHists merges, per pool, the histograms of the seconds of the
// LatencyWindow ending at now (of returns a second's, nil if its ring no
// longer holds it) and returns those of at least MinLatencyOps I/Os.
func windowHists(now time.Time, of func(sec int64) map[string]*latHist) map[string]*latHist {
	cur := now.Unix()
	sum := map[string]*latHist{}
	for sec := cur - int64(LatencyWindow/time.Second) + 1; sec <= cur; sec++ {
		for pool, h := range of(sec) {
			if sum[pool] == nil {
				sum[pool] = &latHist{}
			}
			sum[pool].merge(h)
		}
	}
	for pool, h := range sum {
		if h.n < MinLatencyOps {
			delete(sum, pool)
		}
	}
	return sum
}
