package runner

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Pacing inside a step.
//
// A worker that runs at a duty cycle d rests after each step for
// (1-d)/d of the time the step took. A step that is long — a job's item
// that is a whole file of many stripes, a second or more of work — then
// alternates long bursts at full speed with long rests, and what a
// client meets during a burst is the full weight of the work, however
// low the duty: its latency's tail is the burst's. A step that calls
// Rest between its parts (the stripes of the file) rests after each part
// instead, in proportion to that part alone, so the same average work
// is spread evenly, and a lowered duty takes effect at the next part,
// not after the whole step.
//
// Resting at a duty cycle still leaves each part a burst at full speed:
// a stripe's units read and written at once. What a client's latency
// tail meets is how hard the work hits while it runs, not how often: on
// the 2-core test machine a repair at a sixteenth of a worker raised
// the p99 of a steady client reader as much as one at a quarter (1.3×),
// while the same repair's I/O held by a token bucket to 20 MB/s raised
// it by 1.08×. So a Pacer may also carry a Limiter: a byte rate that the
// step's I/O spends through (Spend, before each transfer), evenly.

// A Pacer rests the steps of one worker at its duty cycle. It is used by
// one goroutine at a time: the worker's, and the step it runs.
type Pacer struct {
	duty  func() float64 // read at every rest: the allowance may change
	rate  *Limiter       // nil: no byte rate
	clock Clock
	since time.Time // the start of the work not yet rested for
}

// NewPacer returns a Pacer at the duty cycle duty returns (in (0, 1];
// 1 or more never rests) whose steps' I/O spends through rate (nil: no
// byte rate; the workers of one job on a node share one), on clock (nil:
// the real one).
func NewPacer(duty func() float64, rate *Limiter, clock Clock) *Pacer {
	if clock == nil {
		clock = realClock{}
	}
	return &Pacer{duty: duty, rate: rate, clock: clock}
}

// Start marks the start of a step's work.
func (p *Pacer) Start() {
	p.since = p.clock.Now()
}

// Owed returns the rest owed for the work since Start or the last rest,
// at the duty cycle now: (1-d)/d of that work, 0 at a duty of 1 or more.
func (p *Pacer) Owed() time.Duration {
	d := p.duty()
	if d >= 1 || d <= 0 {
		return 0
	}
	return time.Duration(float64(p.clock.Now().Sub(p.since)) * (1 - d) / d)
}

// rest sleeps for what is owed, then marks the start of the next work.
// It returns ctx.Err() if ctx ends first.
func (p *Pacer) rest(ctx context.Context) error {
	if err := sleep(ctx, p.clock, p.Owed()); err != nil {
		return err
	}
	p.Start()
	return ctx.Err()
}

// sleep waits d on clock, or until ctx is done (ctx.Err()).
func sleep(ctx context.Context, clock Clock, d time.Duration) error {
	if d > 0 {
		t := clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C():
		}
	}
	return ctx.Err()
}

// A Limiter is a byte rate shared by the steps of the workers that pace
// through it (a job's on one node): their transfers, each announced with
// Spend, go through at most that many bytes a second, evenly, in pieces
// of at most a fiftieth of a second's worth. Its rate changes at run
// time; 0 is unlimited. Safe for concurrent use.
type Limiter struct {
	clock Clock
	mu    sync.Mutex
	rate  float64       // bytes a second; 0: unlimited
	lim   *rate.Limiter // nil while unlimited
}

// NewLimiter returns an unlimited Limiter on clock (nil: the real one).
func NewLimiter(clock Clock) *Limiter {
	if clock == nil {
		clock = realClock{}
	}
	return &Limiter{clock: clock}
}

// limiterPiece is the time's worth of bytes one wait of Spend takes at
// most (the bucket's burst), so that a large transfer goes through as
// several waits, not one long one that a rate rise cannot shorten.
const limiterPiece = 20 * time.Millisecond

// SetRate sets the byte rate (bytes a second; 0 or less: unlimited),
// keeping what the bucket holds.
func (l *Limiter) SetRate(bytesPerSec float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bytesPerSec = max(bytesPerSec, 0)
	if bytesPerSec == l.rate {
		return
	}
	l.rate = bytesPerSec
	if bytesPerSec == 0 {
		l.lim = nil
		return
	}
	burst := max(int(bytesPerSec*limiterPiece.Seconds()), 4<<10)
	now := l.clock.Now()
	if l.lim == nil {
		l.lim = rate.NewLimiter(rate.Limit(bytesPerSec), burst)
		l.lim.SetBurstAt(now, burst)
		return
	}
	l.lim.SetLimitAt(now, rate.Limit(bytesPerSec))
	l.lim.SetBurstAt(now, burst)
}

// Rate returns the byte rate (0: unlimited).
func (l *Limiter) Rate() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// wait takes n bytes, in pieces of at most the burst, waiting for each as
// the rate says; it returns ctx.Err() if ctx ends first.
func (l *Limiter) wait(ctx context.Context, n int) error {
	for n > 0 {
		l.mu.Lock()
		if l.lim == nil {
			l.mu.Unlock()
			return ctx.Err()
		}
		piece := min(n, l.lim.Burst())
		now := l.clock.Now()
		d := l.lim.ReserveN(now, piece).DelayFrom(now)
		l.mu.Unlock()
		if err := sleep(ctx, l.clock, d); err != nil {
			return err
		}
		n -= piece
	}
	return ctx.Err()
}

type pacerKey struct{}

// WithPacer returns ctx carrying p, for the step run with it to Rest.
func WithPacer(ctx context.Context, p *Pacer) context.Context {
	return context.WithValue(ctx, pacerKey{}, p)
}

// Spend announces a transfer of n bytes by the step ctx runs (a unit
// read or written): with a Pacer in ctx that has a byte rate, it waits
// until the rate lets them through; otherwise it returns at once. It
// returns ctx.Err() when ctx is done, before or during the wait.
func Spend(ctx context.Context, n int) error {
	if p, ok := ctx.Value(pacerKey{}).(*Pacer); ok && p.rate != nil {
		return p.rate.wait(ctx, n)
	}
	return ctx.Err()
}

// Rest lets a long step rest between its parts: with a Pacer in ctx
// (WithPacer), it sleeps for the rest owed by the work done since the
// step started or last rested, at the worker's duty cycle now; without
// one it returns at once. Call it where the step holds nothing another
// worker or a client waits for (between the stripes of a file, not
// inside one). It returns ctx.Err() when ctx is done, before or during
// the rest.
func Rest(ctx context.Context) error {
	if p, ok := ctx.Value(pacerKey{}).(*Pacer); ok {
		return p.rest(ctx)
	}
	return ctx.Err()
}
