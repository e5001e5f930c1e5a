package drive

import (
	"context"
	"testing"
	"time"
)

func TestBucketOf(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{100 * time.Microsecond, 0},
		{101 * time.Microsecond, 1},
		{time.Millisecond, 3},
		{5 * time.Second, NumLatencyBuckets - 2},
		{time.Hour, NumLatencyBuckets - 1},
	}
	for _, tt := range tests {
		if got := bucketOf(tt.d); got != tt.want {
			t.Errorf("bucketOf(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
	if n := len(LatencyBuckets()); n != NumLatencyBuckets-1 {
		t.Errorf("LatencyBuckets has %d bounds", n)
	}
}

func TestCountersSince(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := Counters{Time: t0, Read: OpStats{Ops: 10, Bytes: 1000, Latency: time.Second}}
	cur := Counters{Time: t0.Add(2 * time.Second),
		Read:  OpStats{Ops: 30, Bytes: 5000, Latency: 3 * time.Second},
		Write: OpStats{Ops: 4, Bytes: 4 << 20, Latency: 400 * time.Millisecond}}
	r := cur.Since(prev)
	want := Rates{
		Interval: 2 * time.Second,
		Read:     OpRates{IOPS: 10, BytesPerSec: 2000, MeanLatency: 100 * time.Millisecond, QueueDepth: 1},
		Write:    OpRates{IOPS: 2, BytesPerSec: 2 << 20, MeanLatency: 100 * time.Millisecond, QueueDepth: 0.2},
	}
	if r != want {
		t.Fatalf("Since = %+v, want %+v", r, want)
	}
	if z := prev.Since(cur); z != (Rates{Interval: -2 * time.Second}) {
		t.Fatalf("reversed Since = %+v", z)
	}
}

func TestCountersMove(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	c0 := d.Counters()
	id := putTest(t, d, payload(1<<20, 1))
	if _, _, err := d.Get(ctx, id, 0, -1); err != nil {
		t.Fatal(err)
	}
	d.Get(ctx, NewBlockID(), 0, -1) // a failed read
	c1 := d.Counters()
	if c1.Drive != d.ID() {
		t.Fatalf("Drive = %v", c1.Drive)
	}
	w, r := c1.Write, c1.Read
	if w.Ops-c0.Write.Ops != 1 || w.Bytes < 1<<20 || w.Errors != 0 || w.InFlight != 0 || w.Latency <= 0 {
		t.Fatalf("write counters %+v", w)
	}
	if r.Ops != 2 || r.Errors != 1 || r.Bytes < 1<<20 || r.InFlight != 0 {
		t.Fatalf("read counters %+v", r)
	}
	var n uint64
	for _, b := range r.Buckets {
		n += b
	}
	if n != r.Ops {
		t.Fatalf("histogram holds %d ops, want %d", n, r.Ops)
	}
	if rt := c1.Since(c0); rt.Write.IOPS <= 0 || rt.Read.BytesPerSec <= 0 {
		t.Fatalf("rates %+v", rt)
	}
}
