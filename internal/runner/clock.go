package runner

import "time"

// Clock is the runner's time source: the real one by default; tests inject
// a fake one so that no test sleeps.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
}

// Timer is one timer of a Clock.
type Timer interface {
	// C receives the time once the timer fires.
	C() <-chan time.Time
	// Stop releases the timer; it may have fired already.
	Stop()
}

// realClock is the Clock of package time.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop()               { t.t.Stop() }
