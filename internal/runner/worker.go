package runner

import (
	"context"
	"time"
)

// State is what a worker wants after a step.
type State int

const (
	// Busy: more work is waiting; step again at once.
	Busy State = iota
	// Idle: nothing to do now; step again after Options.Idle, or sooner
	// when woken (Handle.Wake, Waker).
	Idle
	// Throttled: more work is waiting, but the worker must not take the
	// machine from the foreground: step again after Options.Tranquility
	// times this step's duration.
	Throttled
	// Done: the worker has finished; it is never stepped again.
	Done
)

// String names the state: busy, idle, throttled or done.
func (s State) String() string {
	switch s {
	case Busy:
		return "busy"
	case Idle:
		return "idle"
	case Throttled:
		return "throttled"
	case Done:
		return "done"
	}
	return "state(?)"
}

// Worker is node-local background work, done one step per call.
//
// Step does one unit of work and returns what the worker wants next. It
// must honour ctx: the runner cancels ctx to stop the worker, and a step
// that returns after that is not counted as failed, whatever it returns.
// A step may block (serve a listener, follow a watch stream) as long as it
// returns when ctx ends; the status shows it running since it began.
//
// An error means the step failed: unless the state is Done, the runner
// waits (backs off) before the next step — Options.MinBackoff, doubled at
// every consecutive failure up to Options.MaxBackoff, back to the minimum
// after a step that succeeds — logs the error (the first of a run of
// failures, then at most once per Config.LogEvery) and keeps it in the
// status. Done with an error is a worker that failed for good.
//
// The runner calls Step from one goroutine at a time; a worker may be
// stepped spuriously (a wake-up with nothing new) and must tolerate it.
type Worker interface {
	Step(ctx context.Context) (State, error)
}

// Waker is implemented by a worker with an event source of its own (a
// lease's Done channel, a cache's change notifications). Before every idle
// wait the runner calls WakeC and ends the wait as soon as the channel it
// returned is ready (receives or is closed); calling it each time lets the
// worker hand out a channel that is replaced after every event. A nil
// channel never wakes. WakeC must not block.
type Waker interface {
	WakeC() <-chan struct{}
}

// Options pace one worker. Zero values take the defaults.
type Options struct {
	// Idle is how long the worker rests after a step that returned Idle,
	// unless woken sooner. Zero: until woken (a worker that is never woken
	// is then stepped again only by Stop).
	Idle time.Duration
	// Delay is how long the worker rests before its first step, unless
	// woken sooner (an idle rest). Zero: the first step runs at once.
	Delay time.Duration
	// Tranquility is k in the pause of k × the step's duration after a
	// step that returned Throttled. Zero means DefaultTranquility.
	Tranquility float64
	// MinBackoff and MaxBackoff bound the wait after a failed step (see
	// Worker). Zero means DefaultMinBackoff and DefaultMaxBackoff; a
	// MaxBackoff below MinBackoff is raised to it, so MinBackoff ==
	// MaxBackoff retries at a fixed interval.
	MinBackoff, MaxBackoff time.Duration
}

// Defaults of Options and Config.
const (
	DefaultTranquility = 2
	DefaultMinBackoff  = time.Second
	DefaultMaxBackoff  = time.Minute
	// DefaultLogEvery is how often a persistent failure of one worker is
	// logged again.
	DefaultLogEvery = time.Minute
)

func (o Options) withDefaults() Options {
	if o.Tranquility <= 0 {
		o.Tranquility = DefaultTranquility
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	return o
}

// The worker states of a status.
const (
	StateRunning    = "running"     // in a step
	StateIdle       = "idle"        // resting after Idle (or before the first step)
	StateThrottled  = "throttled"   // pausing after Throttled
	StateBackingOff = "backing-off" // waiting after a failed step
	StateDone       = "done"        // returned Done
	StateFailed     = "failed"      // returned Done with an error
	StateStopped    = "stopped"     // stopped by Stop
)

// States returns every state of a status, in a fixed order (for metrics).
func States() []string {
	return []string{StateRunning, StateIdle, StateThrottled, StateBackingOff, StateDone, StateFailed, StateStopped}
}

// WorkerStatus is one worker's state and counters.
type WorkerStatus struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// Steps and Errors count the steps finished and those that failed.
	Steps  uint64 `json:"steps"`
	Errors uint64 `json:"errors"`
	// LastStep is when the current step (state running) or the last one
	// began; LastDuration is how long the last finished step took.
	LastStep     time.Time     `json:"last_step,omitzero"`
	LastDuration time.Duration `json:"last_duration"`
	// LastError is the last failed step's error, and LastErrorAt when it
	// returned; they stay after the worker recovers.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// NextRun is when a resting worker steps next unless woken; zero while
	// it runs, has ended, or rests until woken.
	NextRun time.Time `json:"next_run,omitzero"`
}

// Handle is one worker started by Runner.Go.
type Handle struct{ w *worker }

// Wake ends the worker's idle rest, or, if it is in a step, its next idle
// rest at once (a wake-up is never lost). It does not shorten a back-off
// or a throttled pause. It never blocks; wakes while one is pending merge.
func (h *Handle) Wake() {
	select {
	case h.w.wake <- struct{}{}:
	default:
	}
}

// Stop cancels the worker's context and waits until its step returns, or
// until ctx ends: then it returns an error wrapping ErrNotStopped naming
// the worker. Idempotent; a finished worker returns nil at once.
func (h *Handle) Stop(ctx context.Context) error {
	h.w.cancel()
	select {
	case <-h.w.done:
		return nil
	case <-ctx.Done():
		return notStopped([]string{h.w.name})
	}
}

// Done is closed when the worker has finished (Done, failed or stopped).
func (h *Handle) Done() <-chan struct{} { return h.w.done }

// Status returns the worker's status.
func (h *Handle) Status() WorkerStatus { return h.w.status() }
