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
	p := NewPacer(func() float64 { return duty.Load().(float64) }, c)
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
