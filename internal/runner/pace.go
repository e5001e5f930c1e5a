package runner

import (
	"context"
	"sync"
	"time"
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

// A Pacer rests the steps of one worker at its duty cycle. It is used by
// one goroutine at a time: the worker's, and the step it runs.
type Pacer struct {
	duty  func() float64 // read at every rest: the allowance may change
	clock Clock

	mu    sync.Mutex
	since time.Time // the start of the work not yet rested for
}

// NewPacer returns a Pacer at the duty cycle duty returns (in (0, 1];
// 1 or more never rests), on clock (nil: the real one).
func NewPacer(duty func() float64, clock Clock) *Pacer {
	if clock == nil {
		clock = realClock{}
	}
	return &Pacer{duty: duty, clock: clock}
}

// Start marks the start of a step's work.
func (p *Pacer) Start() {
	p.mu.Lock()
	p.since = p.clock.Now()
	p.mu.Unlock()
}

// Owed returns the rest owed for the work since Start or the last rest,
// at the duty cycle now: (1-d)/d of that work, 0 at a duty of 1 or more.
func (p *Pacer) Owed() time.Duration {
	d := p.duty()
	if d >= 1 || d <= 0 {
		return 0
	}
	p.mu.Lock()
	worked := p.clock.Now().Sub(p.since)
	p.mu.Unlock()
	return time.Duration(float64(worked) * (1 - d) / d)
}

// rest sleeps for what is owed, then marks the start of the next work.
// It returns ctx.Err() if ctx ends first.
func (p *Pacer) rest(ctx context.Context) error {
	if owed := p.Owed(); owed > 0 {
		t := p.clock.NewTimer(owed)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
	p.Start()
	return ctx.Err()
}

type pacerKey struct{}

// WithPacer returns ctx carrying p, for the step run with it to Rest.
func WithPacer(ctx context.Context, p *Pacer) context.Context {
	return context.WithValue(ctx, pacerKey{}, p)
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
