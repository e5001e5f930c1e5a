package qos

import (
	"slices"
	"sync"
	"time"
)

// StatsSeconds is how many past seconds Stats keeps.
const StatsSeconds = 60

// StatKey is what the statistics are kept by: the pool, the class and the
// direction. The fine statistics refine it (FineKey).
type StatKey struct {
	Pool  string
	Class Class
	Dir   Dir
}

// Counts are the I/O of one StatKey in one period. QueueNanos is the time
// the I/Os spent queued by QoS and DriveNanos the time they spent at the
// drive (pending outside QoS), both summed over the I/Os: divided by the
// period they are the average number of I/Os queued and pending (Little's
// law).
type Counts struct {
	Ops        int64 `json:"ops"`
	Bytes      int64 `json:"bytes"`
	QueueNanos int64 `json:"queue_nanos"`
	DriveNanos int64 `json:"drive_nanos"`
}

func (c *Counts) add(o Counts) {
	c.Ops += o.Ops
	c.Bytes += o.Bytes
	c.QueueNanos += o.QueueNanos
	c.DriveNanos += o.DriveNanos
}

// Sample is one second of one StatKey's I/O on one node: the second
// starting at Unix second At.
type Sample struct {
	At    int64  `json:"at"`
	Pool  string `json:"pool"`
	Class Class  `json:"class"`
	Dir   Dir    `json:"dir"`
	Counts
}

// Stats keeps a node's block I/O by StatKey: per second for the last
// StatsSeconds seconds, and in total since the start (for Prometheus).
// Per second it keeps the fine statistics, by FineKey (at most
// MaxFineKeys a second, fine.go); Seconds sums them by StatKey. An I/O
// counts in the second it completes. For LatencyClass it also
// keeps, per second and pool, a histogram of the I/Os' drive times, which
// ClientP99 reads (latency.go).
//
// Locking: one mutex; Record is a few map operations under it.
type Stats struct {
	mu    sync.Mutex
	ring  [StatsSeconds + 1]second
	total map[StatKey]*Counts
	// reported holds the clients' own figures (ReportP99), by pool and
	// client; nil until one.
	reported map[string]map[string]reportedP99
}

type second struct {
	at  int64
	lat map[string]*latHist // LatencyClass I/O by pool; nil until one
	// fine is the I/O by FineKey (Seconds sums it by StatKey); others
	// counts its Other keys and overflow the I/Os counted under them.
	fine     map[FineKey]*FineCounts
	others   int
	overflow int64
}

// NewStats returns empty statistics.
func NewStats() *Stats { return &Stats{total: map[StatKey]*Counts{}} }

// Record counts one I/O of k of bytes completed at now, after queued
// time in QoS and drive time at the drive: RecordFine with no job,
// client or pid, and the size class of a part of a block.
func (s *Stats) Record(now time.Time, k StatKey, bytes int64, queued, drive time.Duration) {
	s.RecordFine(now, FineKey{StatKey: k, Size: SizeOf(bytes, false)}, bytes, queued, drive)
}

// RecordFine counts one I/O of k of bytes completed at now, after queued
// time in QoS and drive time at the drive, under k's StatKey and, in
// the fine statistics, under k (or its Other key, past MaxFineKeys).
func (s *Stats) RecordFine(now time.Time, fk FineKey, bytes int64, queued, drive time.Duration) {
	k := fk.StatKey
	c := Counts{Ops: 1, Bytes: bytes, QueueNanos: int64(queued), DriveNanos: int64(drive)}
	sec := now.Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := &s.ring[sec%int64(len(s.ring))]
	if slot.at != sec || slot.fine == nil {
		*slot = second{at: sec, fine: map[FineKey]*FineCounts{}}
	}
	fk.Other = false
	slot.recordFine(fk, bytes, int64(queued), int64(drive))
	if k.Class == LatencyClass {
		if slot.lat == nil {
			slot.lat = map[string]*latHist{}
		}
		if slot.lat[k.Pool] == nil {
			slot.lat[k.Pool] = &latHist{}
		}
		slot.lat[k.Pool].add(drive)
	}
	if s.total[k] == nil {
		s.total[k] = &Counts{}
	}
	s.total[k].add(c)
}

// Seconds returns the samples of the last n complete seconds before now
// (at most StatsSeconds), oldest first, then by pool, class and
// direction: the fine statistics summed by StatKey. A second without I/O
// of a key has no sample.
func (s *Stats) Seconds(now time.Time, n int) []Sample {
	n = min(max(n, 0), StatsSeconds)
	cur := now.Unix()
	var out []Sample
	s.mu.Lock()
	for sec := cur - int64(n); sec < cur; sec++ {
		slot := &s.ring[sec%int64(len(s.ring))]
		if slot.at != sec {
			continue
		}
		sums := map[StatKey]Counts{}
		for k, c := range slot.fine {
			sum := sums[k.StatKey]
			sum.add(c.Counts)
			sums[k.StatKey] = sum
		}
		for k, c := range sums {
			out = append(out, Sample{At: sec, Pool: k.Pool, Class: k.Class, Dir: k.Dir, Counts: c})
		}
	}
	s.mu.Unlock()
	SortSamples(out)
	return out
}

// Totals returns the counts of every key since the start.
func (s *Stats) Totals() map[StatKey]Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[StatKey]Counts, len(s.total))
	for k, c := range s.total {
		out[k] = *c
	}
	return out
}

// SortSamples orders samples by time, pool, class and direction.
func SortSamples(ss []Sample) {
	slices.SortFunc(ss, func(a, b Sample) int {
		switch {
		case a.At != b.At:
			return int(a.At - b.At)
		case a.Pool != b.Pool:
			return cmpStr(a.Pool, b.Pool)
		case a.Class != b.Class:
			return cmpStr(string(a.Class), string(b.Class))
		}
		return cmpStr(string(a.Dir), string(b.Dir))
	})
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Row is the I/O of one pool and class over an interval, summed over the
// nodes and both directions: what `weft qos stats` prints.
type Row struct {
	// Start is the Unix second the interval starts at; Seconds its length.
	Start   int64  `json:"start"`
	Seconds int    `json:"seconds"`
	Pool    string `json:"pool"`
	Class   Class  `json:"class"`
	Counts
	IOPS float64 `json:"iops"`
	MBps float64 `json:"mb_per_sec"`
	// Pending is the average number of I/Os at the drives (outside QoS),
	// Queued the average number waiting in QoS.
	Pending float64 `json:"pending"`
	Queued  float64 `json:"queued"`
}

// Rows sums samples (of any nodes) into intervals of interval seconds
// (< 1 is 1) from Unix second from up to to, per pool and class, oldest
// first; a trailing part shorter than interval is left out. Every pool
// and class seen in samples has a row in every interval, zero if it did
// no I/O then.
func Rows(samples []Sample, from, to int64, interval int) []Row {
	interval = max(interval, 1)
	type pc struct {
		pool  string
		class Class
	}
	type key struct {
		start int64
		pc
	}
	n := (to - from) / int64(interval)
	sums := map[key]*Counts{}
	seen := map[pc]bool{}
	for _, s := range samples {
		if s.At < from || s.At >= from+n*int64(interval) {
			continue
		}
		k := key{from + (s.At-from)/int64(interval)*int64(interval), pc{s.Pool, s.Class}}
		seen[k.pc] = true
		if sums[k] == nil {
			sums[k] = &Counts{}
		}
		sums[k].add(s.Counts)
	}
	var out []Row
	for i := int64(0); i < n; i++ {
		start := from + i*int64(interval)
		for p := range seen {
			c := Counts{}
			if s := sums[key{start, p}]; s != nil {
				c = *s
			}
			sec := float64(interval)
			out = append(out, Row{Start: start, Seconds: interval, Pool: p.pool, Class: p.class, Counts: c,
				IOPS: float64(c.Ops) / sec, MBps: float64(c.Bytes) / 1e6 / sec,
				Pending: float64(c.DriveNanos) / 1e9 / sec, Queued: float64(c.QueueNanos) / 1e9 / sec})
		}
	}
	slices.SortFunc(out, func(a, b Row) int {
		switch {
		case a.Start != b.Start:
			return int(a.Start - b.Start)
		case a.Pool != b.Pool:
			return cmpStr(a.Pool, b.Pool)
		}
		return slices.Index(Classes(), a.Class) - slices.Index(Classes(), b.Class)
	})
	return out
}
