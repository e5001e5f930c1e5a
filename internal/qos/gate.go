package qos

import (
	"context"
	"maps"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Key is what a limit applies to: a pool (a real pool's name, never
// AllPools) and a class.
type Key struct {
	Pool  string
	Class Class
}

// burstTime is how much of a bucket's rate may be taken at once: 100 ms,
// so that a bucket that was idle lets at most a tenth of a second's worth
// through ahead of the rate.
const burstTime = 100 * time.Millisecond

// bucket holds one Key's share: a token bucket for operations and one for
// bytes, either nil when that axis is unlimited.
type bucket struct {
	ops, bytes *rate.Limiter
	limit      Limit
}

func newBucket(now time.Time, l Limit) *bucket {
	b := &bucket{}
	b.set(now, l)
	return b
}

// set changes the bucket's rates to l, keeping the tokens it has.
func (b *bucket) set(now time.Time, l Limit) {
	b.limit = l
	b.ops = setLimiter(b.ops, now, l.IOPS, 1)
	b.bytes = setLimiter(b.bytes, now, l.BytesPerSec, 64<<10)
}

// setLimiter returns lim set to r per second with a burst of burstTime's
// worth (at least minBurst), a new one if lim is nil, nil if r is 0.
func setLimiter(lim *rate.Limiter, now time.Time, r float64, minBurst int) *rate.Limiter {
	if r <= 0 {
		return nil
	}
	burst := max(int(r*burstTime.Seconds()), minBurst)
	if lim == nil {
		return rate.NewLimiter(rate.Limit(r), burst)
	}
	lim.SetLimitAt(now, rate.Limit(r))
	lim.SetBurstAt(now, burst)
	return lim
}

// maxSleep bounds one wait of an I/O for its tokens: it then looks
// again, so that a share that grew in the meantime lets it through
// sooner. (A reservation made ahead at the old rate would keep it waiting
// as long as the old rate said.)
const maxSleep = 100 * time.Millisecond

// try takes the tokens of one I/O of n bytes at now if the bucket has
// them, or says how long to wait before trying again. The I/O needs one
// operation token and, for the bytes, a bucket not in debt (at least
// min(n, burst) tokens): it then takes all n, in burst-sized pieces, and
// may leave the bucket in debt, which later I/Os wait out. So the bytes
// of a window of d seconds are at most rate × d + burst + one I/O.
func (b *bucket) try(now time.Time, n int64) (bool, time.Duration) {
	var wait time.Duration
	if b.ops != nil {
		if t := b.ops.TokensAt(now); t < 1 {
			wait = max(wait, durationFor(1-t, float64(b.ops.Limit())))
		}
	}
	if b.bytes != nil && n > 0 {
		need := float64(min(n, int64(b.bytes.Burst())))
		if t := b.bytes.TokensAt(now); t < need {
			wait = max(wait, durationFor(need-t, float64(b.bytes.Limit())))
		}
	}
	if wait > 0 {
		return false, wait
	}
	if b.ops != nil {
		b.ops.AllowN(now, 1)
	}
	if b.bytes != nil {
		for left := n; left > 0; {
			piece := min(left, int64(b.bytes.Burst()))
			b.bytes.ReserveN(now, int(piece))
			left -= piece
		}
	}
	return true, 0
}

// durationFor is how long r tokens per second take to make tokens, at
// least a microsecond.
func durationFor(tokens, r float64) time.Duration {
	return max(time.Duration(tokens/r*float64(time.Second)), time.Microsecond)
}

// Gate is a node's QoS: every block I/O passes Admit before the drive,
// which waits for the I/O's tokens if its pool and class are limited,
// counts the I/O in Stats, and tracks the demand the share worker
// publishes.
//
// Locking: mu guards the buckets and the waiting counts; an I/O holds it
// only to take its tokens, never while it waits.
type Gate struct {
	stats *Stats
	now   func() time.Time

	mu      sync.Mutex
	buckets map[Key]*bucket
	waiting map[Key]int64 // I/Os queued by QoS now
}

// NewGate returns a Gate that limits nothing until SetLimits, counting
// into stats.
func NewGate(stats *Stats) *Gate {
	return &Gate{stats: stats, now: time.Now, buckets: map[Key]*bucket{}, waiting: map[Key]int64{}}
}

// Stats returns the statistics the gate counts into.
func (g *Gate) Stats() *Stats { return g.stats }

// SetLimits makes shares the node's limits: each Key in it is held to its
// Limit, every other Key is unlimited. A bucket whose rate changes keeps
// its tokens. It is safe to call while I/O passes.
func (g *Gate) SetLimits(shares map[Key]Limit) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.buckets {
		if l, ok := shares[k]; !ok || l.Unlimited() {
			delete(g.buckets, k)
		}
	}
	for k, l := range shares {
		if l.Unlimited() {
			continue
		}
		if b := g.buckets[k]; b != nil {
			b.set(now, l)
		} else {
			g.buckets[k] = newBucket(now, l)
		}
	}
}

// Limits returns the limits the node holds now, by Key.
func (g *Gate) Limits() map[Key]Limit {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[Key]Limit, len(g.buckets))
	for k, b := range g.buckets {
		out[k] = b.limit
	}
	return out
}

// Waiting returns the number of I/Os queued by QoS now, by Key.
func (g *Gate) Waiting() map[Key]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.waiting)
}

// unwait counts one I/O of k as no longer queued. The caller holds mu.
func (g *Gate) unwait(k Key) {
	if g.waiting[k]--; g.waiting[k] <= 0 {
		delete(g.waiting, k)
	}
}

// Done ends an I/O that Admit let through: call it once the drive has
// answered, saying whether the I/O moved a whole block (its size class
// in the fine statistics, SizeOf).
type Done func(whole bool)

// Admit lets one I/O of tag's pool and class, direction dir and n bytes
// through: at once if its pool and class are not limited, else once its
// tokens are there (looking again at least every maxSleep, so that a
// share that grows takes effect for the I/Os already waiting). It returns
// ctx's error if ctx ends first (the I/O must then not be done). The returned
// Done records the I/O, its time queued and its time at the drive, in
// the statistics, the fine ones under tag's job, client and pid; a
// client's own p99 the tag carries is kept for ClientP99 (ReportP99).
func (g *Gate) Admit(ctx context.Context, tag Tag, dir Dir, n int64) (Done, error) {
	k := Key{Pool: tag.Pool, Class: tag.Class}
	start := g.now()
	queued := false
	for {
		g.mu.Lock()
		now := g.now()
		ok, wait := true, time.Duration(0)
		if b := g.buckets[k]; b != nil {
			ok, wait = b.try(now, n)
		}
		switch {
		case ok && queued:
			g.unwait(k)
		case !ok && !queued:
			g.waiting[k]++
			queued = true
		}
		g.mu.Unlock()
		if ok {
			break
		}
		t := time.NewTimer(min(wait, maxSleep))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			g.mu.Lock()
			g.unwait(k)
			g.mu.Unlock()
			return nil, ctx.Err()
		}
	}
	admitted := start
	if queued {
		admitted = g.now()
	}
	if tag.Class == LatencyClass && tag.P99 > 0 {
		g.stats.ReportP99(admitted, k.Pool, tag.Client, tag.P99)
	}
	fk := FineKey{StatKey: StatKey{Pool: k.Pool, Class: k.Class, Dir: dir}, Job: tag.Job, Client: tag.Client, PID: max(tag.PID, 0)}
	return func(whole bool) {
		end := g.now()
		fk.Size = SizeOf(n, whole)
		g.stats.RecordFine(end, fk, n, admitted.Sub(start), end.Sub(admitted))
	}, nil
}
