package qos

import (
	"cmp"
	"slices"
	"time"
)

// SizeClass is the size class of a block I/O in the fine statistics.
type SizeClass string

// The size classes. An I/O under 1 MiB goes by its bytes, whole block or
// not (a small file's unit is a small block); one of 1 MiB or more is
// SizeUnit if it moves a whole block (every write does, and a read of all
// of a unit of the default size), else SizeLarge (a part of a unit larger
// than 1 MiB).
const (
	Size4K    SizeClass = "<4KiB"
	Size64K   SizeClass = "<64KiB"
	Size1M    SizeClass = "<1MiB"
	SizeUnit  SizeClass = "unit"
	SizeLarge SizeClass = ">=1MiB"
)

// SizeClasses returns the size classes from the smallest.
func SizeClasses() []SizeClass { return []SizeClass{Size4K, Size64K, Size1M, SizeLarge, SizeUnit} }

// SizeOf returns the size class of an I/O of n bytes; whole says that it
// moves a whole block.
func SizeOf(n int64, whole bool) SizeClass {
	switch {
	case n < 4<<10:
		return Size4K
	case n < 64<<10:
		return Size64K
	case n < 1<<20:
		return Size1M
	case whole:
		return SizeUnit
	}
	return SizeLarge
}

// FineKey is what the fine statistics are kept by: the StatKey, the job,
// the client and the pid of the tag (PID 0: unknown), and the size class.
// Other marks the key that the I/Os of a second past MaxFineKeys are
// counted under: it keeps only the StatKey.
type FineKey struct {
	StatKey
	Job    string
	Client string
	PID    int
	Size   SizeClass
	Other  bool
}

// MaxFineKeys bounds the fine keys Stats keeps per second: an I/O whose
// key is new in a second that has this many already is counted under
// the Other key of its StatKey (one per pool, class and direction), and
// as overflow. With 61 seconds kept, a node's fine statistics take at
// most some 15 MiB.
const MaxFineKeys = 1024

// FineCounts are the I/O of one FineKey in one period: the Counts, and
// the shortest and longest latency of one I/O, whole (queued and at the
// drive) and at the drive alone, in nanoseconds (0 without I/O).
type FineCounts struct {
	Counts
	MinNanos      int64 `json:"min_nanos"`
	MaxNanos      int64 `json:"max_nanos"`
	MinDriveNanos int64 `json:"min_drive_nanos"`
	MaxDriveNanos int64 `json:"max_drive_nanos"`
}

// add counts one I/O.
func (c *FineCounts) add(bytes, queued, drive int64) {
	c.merge(FineCounts{Counts: Counts{Ops: 1, Bytes: bytes, QueueNanos: queued, DriveNanos: drive},
		MinNanos: queued + drive, MaxNanos: queued + drive, MinDriveNanos: drive, MaxDriveNanos: drive})
}

// merge adds the I/O of o.
func (c *FineCounts) merge(o FineCounts) {
	if o.Ops == 0 {
		return
	}
	if c.Ops == 0 {
		*c = o
		return
	}
	c.Counts.add(o.Counts)
	c.MinNanos, c.MaxNanos = min(c.MinNanos, o.MinNanos), max(c.MaxNanos, o.MaxNanos)
	c.MinDriveNanos, c.MaxDriveNanos = min(c.MinDriveNanos, o.MinDriveNanos), max(c.MaxDriveNanos, o.MaxDriveNanos)
}

// FineSample is one second of one FineKey's I/O on one node: the second
// starting at Unix second At.
type FineSample struct {
	At     int64     `json:"at"`
	Pool   string    `json:"pool"`
	Class  Class     `json:"class"`
	Dir    Dir       `json:"dir"`
	Size   SizeClass `json:"size,omitempty"`
	Job    string    `json:"job,omitempty"`
	Client string    `json:"client,omitempty"`
	PID    int       `json:"pid,omitempty"`
	// Other: the I/Os of keys past MaxFineKeys in this second, of this
	// pool, class and direction.
	Other bool `json:"other,omitempty"`
	FineCounts
}

// Key returns the key of s.
func (s FineSample) Key() FineKey {
	return FineKey{StatKey: StatKey{s.Pool, s.Class, s.Dir}, Job: s.Job, Client: s.Client, PID: s.PID, Size: s.Size, Other: s.Other}
}

func sampleOf(at int64, k FineKey, c FineCounts) FineSample {
	return FineSample{At: at, Pool: k.Pool, Class: k.Class, Dir: k.Dir, Size: k.Size, Job: k.Job, Client: k.Client, PID: k.PID, Other: k.Other, FineCounts: c}
}

// recordFine counts one I/O of k in slot. The caller holds Stats.mu.
func (sl *second) recordFine(k FineKey, bytes, queued, drive int64) {
	c := sl.fine[k]
	if c == nil {
		if len(sl.fine) >= MaxFineKeys+sl.others {
			sl.overflow++
			k = FineKey{StatKey: k.StatKey, Other: true}
			if c = sl.fine[k]; c == nil {
				sl.others++
			}
		}
		if c == nil {
			c = &FineCounts{}
			sl.fine[k] = c
		}
	}
	c.add(bytes, queued, drive)
}

// FineSeconds returns the fine samples of the last n complete seconds
// before now (at most StatsSeconds), oldest first, and how many of
// their I/Os were counted under an Other key for want of room.
func (s *Stats) FineSeconds(now time.Time, n int) (samples []FineSample, overflow int64) {
	n = min(max(n, 0), StatsSeconds)
	cur := now.Unix()
	s.mu.Lock()
	for sec := cur - int64(n); sec < cur; sec++ {
		slot := &s.ring[sec%int64(len(s.ring))]
		if slot.at != sec {
			continue
		}
		overflow += slot.overflow
		for k, c := range slot.fine {
			samples = append(samples, sampleOf(sec, k, *c))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(samples, func(a, b FineSample) int { return cmp.Or(cmp.Compare(a.At, b.At), compareFineKeys(a.Key(), b.Key())) })
	return samples, overflow
}

// compareFineKeys orders keys by pool, class, direction, size class, job,
// client and pid, an Other key after the others of its StatKey.
func compareFineKeys(a, b FineKey) int {
	return cmp.Or(cmp.Compare(a.Pool, b.Pool),
		slices.Index(Classes(), a.Class)-slices.Index(Classes(), b.Class),
		cmp.Compare(a.Dir, b.Dir),
		boolCompare(a.Other, b.Other),
		slices.Index(SizeClasses(), a.Size)-slices.Index(SizeClasses(), b.Size),
		cmp.Compare(a.Job, b.Job), cmp.Compare(a.Client, b.Client), cmp.Compare(a.PID, b.PID))
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// FineRow is the I/O of one FineKey on one node over an interval: what
// `weft qos stats --fine` prints.
type FineRow struct {
	Node string `json:"node"`
	// Start is the Unix second the interval starts at; Seconds its length.
	Start   int64 `json:"start"`
	Seconds int   `json:"seconds"`
	FineSample
	IOPS float64 `json:"iops"`
	MBps float64 `json:"mb_per_sec"`
	// AvgMs, MinMs and MaxMs are the latency of the I/Os, queued by QoS
	// and at the drive, in milliseconds; DriveAvgMs, DriveMinMs and
	// DriveMaxMs that at the drive alone.
	AvgMs      float64 `json:"avg_ms"`
	MinMs      float64 `json:"min_ms"`
	MaxMs      float64 `json:"max_ms"`
	DriveAvgMs float64 `json:"drive_avg_ms"`
	DriveMinMs float64 `json:"drive_min_ms"`
	DriveMaxMs float64 `json:"drive_max_ms"`
	// Pending is the average number of these I/Os at the drive, Queued
	// the average number waiting in QoS.
	Pending float64 `json:"pending"`
	Queued  float64 `json:"queued"`
}

// FineRows sums one node's fine samples into intervals of interval
// seconds (< 1 is 1) from Unix second from up to to, per FineKey, oldest
// first, then in key order; a trailing part shorter than interval is
// left out. Unlike Rows, a key has rows only in the intervals it did
// I/O in.
func FineRows(node string, samples []FineSample, from, to int64, interval int) []FineRow {
	interval = max(interval, 1)
	type key struct {
		start int64
		FineKey
	}
	n := (to - from) / int64(interval)
	sums := map[key]*FineCounts{}
	for _, s := range samples {
		if s.At < from || s.At >= from+n*int64(interval) {
			continue
		}
		k := key{from + (s.At-from)/int64(interval)*int64(interval), s.Key()}
		if sums[k] == nil {
			sums[k] = &FineCounts{}
		}
		sums[k].merge(s.FineCounts)
	}
	out := make([]FineRow, 0, len(sums))
	sec := float64(interval)
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	for k, c := range sums {
		r := FineRow{Node: node, Start: k.start, Seconds: interval, FineSample: sampleOf(k.start, k.FineKey, *c),
			IOPS: float64(c.Ops) / sec, MBps: float64(c.Bytes) / 1e6 / sec,
			MinMs: ms(c.MinNanos), MaxMs: ms(c.MaxNanos), DriveMinMs: ms(c.MinDriveNanos), DriveMaxMs: ms(c.MaxDriveNanos),
			Pending: float64(c.DriveNanos) / 1e9 / sec, Queued: float64(c.QueueNanos) / 1e9 / sec}
		if c.Ops > 0 {
			r.AvgMs = ms(c.QueueNanos+c.DriveNanos) / float64(c.Ops)
			r.DriveAvgMs = ms(c.DriveNanos) / float64(c.Ops)
		}
		out = append(out, r)
	}
	SortFineRows(out)
	return out
}

// SortFineRows orders rows by interval, node and key.
func SortFineRows(rows []FineRow) {
	slices.SortFunc(rows, func(a, b FineRow) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Node, b.Node), compareFineKeys(a.Key(), b.Key()))
	})
}
