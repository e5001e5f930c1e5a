package qos

import (
	"sync"
	"time"
)

// The clients' own latency. A block service measures the drive's time of
// the clients' I/O (Stats.ClientP99), which misses what a client waits
// for besides the drive: the network, the node's CPU, its own. On a
// machine whose CPU a job's work competes for, that is where a client's
// latency grows while the drives stay fast. So a client also measures its
// own block calls per pool (Meter), and each of its calls to a pool
// carries its p99 of the last LatencyWindow (Tag.P99); the block service
// keeps the latest figure per client (Stats.ReportP99), and ClientP99
// answers for a pool the higher of its drive figure and its clients'
// figures — what the job throttle compares with its targets. A client
// that makes no call to a pool reports nothing about it, and its figure
// is forgotten a LatencyWindow after its last call.

// meterRefresh is how often a Meter recomputes its figures: a call reads
// the cached one, so that a client making thousands of calls a second
// does not merge histograms for each.
const meterRefresh = 200 * time.Millisecond

// Meter measures one client's block calls per pool over the
// LatencyWindow and says their p99 (Tag.P99). The zero value is not
// usable: NewMeter.
//
// Locking: one mutex; Record is a map operation and a histogram add
// under it, P99 a map read (and, every meterRefresh, the figures
// recomputed).
type Meter struct {
	mu   sync.Mutex
	ring [int(LatencyWindow/time.Second) + 1]meterSecond
	at   time.Time                // when p99 was computed
	p99  map[string]time.Duration // by pool
}

type meterSecond struct {
	at  int64
	lat map[string]*latHist
}

// NewMeter returns an empty Meter.
func NewMeter() *Meter { return &Meter{p99: map[string]time.Duration{}} }

// Record counts one call to pool that took d, completed at now.
func (m *Meter) Record(now time.Time, pool string, d time.Duration) {
	sec := now.Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	slot := &m.ring[sec%int64(len(m.ring))]
	if slot.at != sec || slot.lat == nil {
		*slot = meterSecond{at: sec, lat: map[string]*latHist{}}
	}
	h := slot.lat[pool]
	if h == nil {
		h = &latHist{}
		slot.lat[pool] = h
	}
	h.add(d)
}

// P99 returns the 99th percentile of the calls to pool over the
// LatencyWindow ending at now (as of at most meterRefresh ago), 0 if
// fewer than MinLatencyOps calls were made.
func (m *Meter) P99(now time.Time, pool string) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := now.Sub(m.at); d >= meterRefresh || d < 0 {
		m.at = now
		clear(m.p99)
		for p, h := range windowHists(now, func(sec int64) map[string]*latHist {
			if slot := &m.ring[sec%int64(len(m.ring))]; slot.at == sec {
				return slot.lat
			}
			return nil
		}) {
			m.p99[p] = h.quantile(0.99)
		}
	}
	return m.p99[pool]
}

// reportedP99 is one client's figure for a pool and when it came.
type reportedP99 struct {
	p99 time.Duration
	at  time.Time
}

// ReportP99 keeps client's own p99 of its calls to pool (Tag.P99), as
// its call completed at now said it; ClientP99 counts it for a
// LatencyWindow.
func (s *Stats) ReportP99(now time.Time, pool, client string, p99 time.Duration) {
	if p99 <= 0 || client == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reported == nil {
		s.reported = map[string]map[string]reportedP99{}
	}
	if s.reported[pool] == nil {
		s.reported[pool] = map[string]reportedP99{}
	}
	s.reported[pool][client] = reportedP99{p99: p99, at: now}
}

// reportedLocked returns, per pool, the highest figure its clients
// reported within the LatencyWindow before now, and forgets older ones.
// Locking: s.mu held.
func (s *Stats) reportedLocked(now time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	for pool, cs := range s.reported {
		for c, r := range cs {
			if now.Sub(r.at) > LatencyWindow {
				delete(cs, c)
				continue
			}
			out[pool] = max(out[pool], r.p99)
		}
		if len(cs) == 0 {
			delete(s.reported, pool)
		}
	}
	return out
}
