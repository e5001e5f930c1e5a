package runner

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// timerSet waits until c holds a timer, and returns when it is due.
func timerSet(t *testing.T, c *fakeClock) time.Time {
	t.Helper()
	for range 5000 {
		c.mu.Lock()
		for tm := range c.timers {
			c.mu.Unlock()
			return tm.at
		}
		c.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no timer set")
	return time.Time{}
}

// A step that rests between its parts rests (1-d)/d of each part's work,
// at the duty cycle of the moment, and owes nothing right after; without
// a pacer Rest returns at once; a cancelled context ends a rest.
func TestPacer(t *testing.T) {
	c := newFakeClock()
	var duty atomic.Value
	duty.Store(0.25)
	p := NewPacer(func() float64 { return duty.Load().(float64) }, nil, c)
	ctx := WithPacer(context.Background(), p)

	p.Start()
	c.Advance(10 * time.Millisecond) // a part of the step: 10 ms of work
	if got := p.Owed(); got != 30*time.Millisecond {
		t.Fatalf("owed after 10 ms at duty 0.25: %v, want 30ms", got)
	}
	start := c.Now()
	done := make(chan error, 1)
	go func() { done <- Rest(ctx) }()
	if at := timerSet(t, c); at.Sub(start) != 30*time.Millisecond {
		t.Fatalf("rest until %v after the part, want 30ms", at.Sub(start))
	}
	c.Advance(30 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := p.Owed(); got != 0 {
		t.Fatalf("owed right after a rest: %v, want 0", got)
	}

	// The duty rises to a half: the next part owes as much as it took.
	duty.Store(0.5)
	c.Advance(20 * time.Millisecond)
	if got := p.Owed(); got != 20*time.Millisecond {
		t.Fatalf("owed after 20 ms at duty 0.5: %v, want 20ms", got)
	}
	// At full duty nothing is owed, and Rest does not wait.
	duty.Store(1.0)
	if err := Rest(ctx); err != nil || p.Owed() != 0 {
		t.Fatalf("at duty 1: Rest %v, owed %v", err, p.Owed())
	}

	if err := Rest(context.Background()); err != nil {
		t.Fatalf("Rest without a pacer: %v", err)
	}

	duty.Store(0.25)
	p.Start()
	c.Advance(time.Second)
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- Rest(cctx) }()
	timerSet(t, c)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Rest cancelled: %v, want context.Canceled", err)
	}
}

// A byte rate lets a step's transfers through evenly: 100 KB at 1 MB/s
// take 80 ms past the bucket's first 20 KB, in pieces; unlimited, and
// without a pacer, Spend does not wait; a cancelled context ends a wait.
func TestSpend(t *testing.T) {
	c := newFakeClock()
	l := NewLimiter(c)
	p := NewPacer(func() float64 { return 1 }, l, c)
	ctx := WithPacer(context.Background(), p)

	if err := Spend(ctx, 10<<20); err != nil { // unlimited
		t.Fatal(err)
	}
	l.SetRate(1e6)
	if got := l.Rate(); got != 1e6 {
		t.Fatalf("rate %v, want 1e6", got)
	}
	start := c.Now()
	done := make(chan error, 1)
	go func() { done <- Spend(ctx, 100_000) }()
	waits := 0
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Now().Sub(start); got != 80*time.Millisecond || waits < 4 {
				t.Fatalf("100 KB at 1 MB/s went through after %v in %d waits, want 80ms in at least 4", got, waits)
			}
			goto limited
		default:
		}
		c.mu.Lock()
		var due time.Time
		for tm := range c.timers {
			due = tm.at
		}
		c.mu.Unlock()
		if !due.IsZero() {
			c.Advance(due.Sub(c.Now()))
			waits++
		}
		time.Sleep(time.Millisecond)
	}
limited:
	if err := Spend(context.Background(), 10<<20); err != nil {
		t.Fatalf("Spend without a pacer: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- Spend(cctx, 1<<20) }()
	timerSet(t, c)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Spend cancelled: %v, want context.Canceled", err)
	}
	l.SetRate(0)
	if err := Spend(ctx, 10<<20); err != nil || l.Rate() != 0 {
		t.Fatalf("unlimited again: %v, rate %v", err, l.Rate())
	}
}
