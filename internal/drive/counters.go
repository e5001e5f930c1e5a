package drive

import (
	"sync/atomic"
	"time"
)

// Op is a kind of drive I/O that the counters track separately.
type Op int

// Counted operations. Reads are Get and Verify; writes are Put (including an
// idempotent Put of an existing block, which reads instead of writing data
// but is still a write request). Stat, List and Delete are not counted: they
// touch metadata only.
const (
	OpRead Op = iota
	OpWrite
)

// String returns "read" or "write".
func (o Op) String() string {
	if o == OpWrite {
		return "write"
	}
	return "read"
}

// NumLatencyBuckets is the number of latency histogram buckets, the last
// one being unbounded.
const NumLatencyBuckets = 16

// LatencyBuckets returns the upper bounds of the first NumLatencyBuckets-1
// histogram buckets (the last bucket has no bound). The result is a fresh
// slice the caller may keep.
func LatencyBuckets() []time.Duration {
	b := latencyBounds()
	return b[:]
}

func latencyBounds() [NumLatencyBuckets - 1]time.Duration {
	return [NumLatencyBuckets - 1]time.Duration{
		100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
		10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
		100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2500 * time.Millisecond, 5 * time.Second,
	}
}

// bucketOf returns the histogram bucket of latency d.
func bucketOf(d time.Duration) int {
	bounds := latencyBounds()
	for i, b := range bounds {
		if d <= b {
			return i
		}
	}
	return NumLatencyBuckets - 1
}

// OpStats is a snapshot of the counters of one Op. All counts are cumulative
// since Open except InFlight.
type OpStats struct {
	// Ops is the number of completed operations, failed ones included.
	Ops uint64
	// Errors is the number of completed operations that failed.
	Errors uint64
	// Bytes is the number of data bytes moved to or from the disk
	// (block data and header), for completed operations.
	Bytes uint64
	// InFlight is the number of operations in progress (the queue depth).
	InFlight int64
	// Latency is the sum of the latencies of completed operations.
	Latency time.Duration
	// Buckets counts completed operations by latency; bucket i holds
	// latencies <= LatencyBuckets()[i] (and above the previous bound); the
	// last bucket holds the rest. Not cumulative.
	Buckets [NumLatencyBuckets]uint64
}

// Counters is a snapshot of a drive's I/O counters at Time. Taking it costs a
// few dozen atomic loads; the fields are read one by one, so a snapshot taken
// during I/O may be off by the operations completing meanwhile.
type Counters struct {
	Drive ID
	Time  time.Time
	Read  OpStats
	Write OpStats
}

// OpRates are the rates of one Op over an interval.
type OpRates struct {
	// IOPS is completed operations per second.
	IOPS float64
	// BytesPerSec is bytes moved per second.
	BytesPerSec float64
	// MeanLatency is the mean latency of operations completed in the interval
	// (0 when none completed).
	MeanLatency time.Duration
	// QueueDepth is the average number of operations in progress, by
	// Little's law: the latency accumulated in the interval divided by its
	// length.
	QueueDepth float64
}

// Rates are a drive's I/O rates between two Counters snapshots.
type Rates struct {
	Interval time.Duration
	Read     OpRates
	Write    OpRates
}

// Since returns the rates between an earlier snapshot prev and c. It returns
// zero rates when the interval is not positive (same or reversed snapshots).
func (c Counters) Since(prev Counters) Rates {
	r := Rates{Interval: c.Time.Sub(prev.Time)}
	if r.Interval <= 0 {
		return r
	}
	r.Read = opRates(c.Read, prev.Read, r.Interval)
	r.Write = opRates(c.Write, prev.Write, r.Interval)
	return r
}

func opRates(cur, prev OpStats, iv time.Duration) OpRates {
	sec := iv.Seconds()
	ops := cur.Ops - prev.Ops
	lat := cur.Latency - prev.Latency
	r := OpRates{
		IOPS:        float64(ops) / sec,
		BytesPerSec: float64(cur.Bytes-prev.Bytes) / sec,
		QueueDepth:  lat.Seconds() / sec,
	}
	if ops > 0 {
		r.MeanLatency = lat / time.Duration(ops)
	}
	return r
}

// opCounters are the live counters of one Op; all fields are atomics so
// that I/O paths never take a lock to count.
type opCounters struct {
	ops, errors, bytes atomic.Uint64
	inFlight           atomic.Int64
	latency            atomic.Int64
	buckets            [NumLatencyBuckets]atomic.Uint64
}

// counters are a drive's live I/O counters.
type counters struct {
	ops [2]opCounters // indexed by Op
}

// begin marks the start of an operation and returns its start time; pass it
// to end exactly once.
func (c *counters) begin(op Op) time.Time {
	c.ops[op].inFlight.Add(1)
	return time.Now()
}

// end records the completion of an operation started at start that moved
// bytes bytes; failed reports whether it returned an error.
func (c *counters) end(op Op, start time.Time, bytes int64, failed bool) {
	d := time.Since(start)
	oc := &c.ops[op]
	oc.inFlight.Add(-1)
	oc.ops.Add(1)
	if failed {
		oc.errors.Add(1)
	}
	if bytes > 0 {
		oc.bytes.Add(uint64(bytes))
	}
	oc.latency.Add(int64(d))
	oc.buckets[bucketOf(d)].Add(1)
}

func (oc *opCounters) snapshot() OpStats {
	s := OpStats{
		Ops:      oc.ops.Load(),
		Errors:   oc.errors.Load(),
		Bytes:    oc.bytes.Load(),
		InFlight: oc.inFlight.Load(),
		Latency:  time.Duration(oc.latency.Load()),
	}
	for i := range s.Buckets {
		s.Buckets[i] = oc.buckets[i].Load()
	}
	return s
}
