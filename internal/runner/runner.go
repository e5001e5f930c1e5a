package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Errors of the runner.
var (
	// ErrDuplicate: a worker of that name runs already.
	ErrDuplicate = errors.New("runner: worker name in use")
	// ErrStopped: the runner is stopped and starts no worker.
	ErrStopped = errors.New("runner: stopped")
	// ErrNotStopped: workers still ran when Stop's deadline passed.
	ErrNotStopped = errors.New("runner: workers did not stop in time")
)

func notStopped(names []string) error {
	return fmt.Errorf("%w: %s", ErrNotStopped, strings.Join(names, ", "))
}

// Config configures a Runner.
type Config struct {
	// Log receives the workers' failures. Nil means slog.Default().
	Log *slog.Logger
	// Clock paces the workers. Nil means the real clock.
	Clock Clock
	// LogEvery is how often a persistent failure of a worker is logged
	// again (the first failure of a run is always logged). Zero means
	// DefaultLogEvery.
	LogEvery time.Duration
}

// Runner runs workers, each on its own goroutine, until they finish or the
// runner stops. It is safe for concurrent use.
//
// Locking: mu guards workers and stopped; each worker's status has its own
// lock. No lock is held while a worker steps.
type Runner struct {
	log      *slog.Logger
	clock    Clock
	logEvery time.Duration

	mu      sync.Mutex
	workers map[string]*worker
	stopped bool

	// onRest, if set (tests), is called by a worker about to rest: its
	// name, the rest's state and duration (0: until woken).
	onRest func(name, state string, d time.Duration)
}

// New returns a Runner with no workers.
func New(cfg Config) *Runner {
	r := &Runner{log: cfg.Log, clock: cfg.Clock, logEvery: cfg.LogEvery, workers: map[string]*worker{}}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.clock == nil {
		r.clock = realClock{}
	}
	if r.logEvery <= 0 {
		r.logEvery = DefaultLogEvery
	}
	return r
}

// Go starts worker w under name, paced by o. Names are unique within a
// runner: Go fails with ErrDuplicate while a worker of that name has not
// finished (a finished one is replaced, and leaves the status), and with
// ErrStopped after Stop.
func (r *Runner) Go(name string, w Worker, o Options) (*Handle, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil, fmt.Errorf("%w: cannot start worker %q", ErrStopped, name)
	}
	if old := r.workers[name]; old != nil && !old.finished() {
		return nil, fmt.Errorf("%w: %q", ErrDuplicate, name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wk := &worker{r: r, name: name, w: w, o: o.withDefaults(), ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	wk.st = WorkerStatus{Name: name, State: StateIdle}
	if o.Delay > 0 {
		wk.st.NextRun = r.clock.Now().Add(o.Delay)
	}
	r.workers[name] = wk
	go wk.run()
	return &Handle{wk}, nil
}

// Status returns every worker's status, by name.
func (r *Runner) Status() []WorkerStatus {
	r.mu.Lock()
	ws := make([]*worker, 0, len(r.workers))
	for _, w := range r.workers {
		ws = append(ws, w)
	}
	r.mu.Unlock()
	out := make([]WorkerStatus, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.status())
	}
	slices.SortFunc(out, func(a, b WorkerStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Stop cancels every worker's context and waits until all have returned,
// or until ctx ends: it then returns an error wrapping ErrNotStopped that
// names the workers still running (they go on until their step returns,
// unwaited). Afterwards Go fails. Idempotent.
func (r *Runner) Stop(ctx context.Context) error {
	r.mu.Lock()
	r.stopped = true
	ws := make([]*worker, 0, len(r.workers))
	for _, w := range r.workers {
		ws = append(ws, w)
	}
	r.mu.Unlock()
	for _, w := range ws {
		w.cancel()
	}
	for _, w := range ws {
		select {
		case <-w.done:
		case <-ctx.Done():
		}
	}
	var late []string
	for _, w := range ws {
		if !w.finished() {
			late = append(late, w.name)
		}
	}
	if len(late) > 0 {
		slices.Sort(late)
		return notStopped(late)
	}
	return nil
}

// worker is one worker's goroutine and status.
//
// Locking: mu guards st, streak and logged.
type worker struct {
	r      *Runner
	name   string
	w      Worker
	o      Options
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // one pending wake-up
	done   chan struct{} // closed when run returns

	mu     sync.Mutex
	st     WorkerStatus
	streak int       // consecutive failed steps
	logged time.Time // last failure logged
}

func (w *worker) finished() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func (w *worker) status() WorkerStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// run steps the worker until it is done or stopped.
func (w *worker) run() {
	defer close(w.done)
	final := StateStopped
	defer func() { w.set(func(st *WorkerStatus) { st.State, st.NextRun = final, time.Time{} }) }()
	clock := w.r.clock
	if w.o.Delay > 0 && !w.rest(StateIdle, w.o.Delay, true) {
		return
	}
	for w.ctx.Err() == nil {
		select { // a wake-up before the step is served by it
		case <-w.wake:
		default:
		}
		start := clock.Now()
		w.set(func(st *WorkerStatus) { st.State, st.LastStep, st.NextRun = StateRunning, start, time.Time{} })
		state, err := w.w.Step(w.ctx)
		took := clock.Now().Sub(start)
		if w.ctx.Err() != nil {
			w.set(func(st *WorkerStatus) { st.Steps++; st.LastDuration = took })
			return // stopped: whatever the step says
		}
		backoff := w.finish(took, err, state == Done)
		var ok bool
		switch {
		case state == Done && err != nil:
			final = StateFailed
			return
		case state == Done:
			final = StateDone
			return
		case err != nil:
			ok = w.rest(StateBackingOff, backoff, false)
		case state == Busy:
			ok = true
		case state == Throttled:
			ok = w.rest(StateThrottled, time.Duration(w.o.Tranquility*float64(took)), false)
		default: // Idle, or a state the runner does not know
			ok = w.rest(StateIdle, w.o.Idle, true)
		}
		if !ok {
			return
		}
	}
}

// finish records a finished step and returns the back-off after it if it
// failed. It logs the first failure of a run, then at most once per
// LogEvery, and the recovery after a run of failures; a failure that ends
// the worker (done) always.
func (w *worker) finish(took time.Duration, err error, done bool) time.Duration {
	now := w.r.clock.Now()
	w.mu.Lock()
	w.st.Steps++
	w.st.LastDuration = took
	if err == nil {
		streak := w.streak
		w.streak = 0
		w.mu.Unlock()
		if streak > 0 {
			w.r.log.Info("background worker recovered", "worker", w.name, "failures", streak)
		}
		return 0
	}
	w.st.Errors++
	w.st.LastError, w.st.LastErrorAt = err.Error(), now
	w.streak++
	streak := w.streak
	backoff := w.o.MinBackoff
	for i := 1; i < streak && backoff < w.o.MaxBackoff; i++ {
		backoff *= 2
	}
	backoff = min(backoff, w.o.MaxBackoff)
	log := done || streak == 1 || now.Sub(w.logged) >= w.r.logEvery
	if log {
		w.logged = now
	}
	w.mu.Unlock()
	switch {
	case done:
		w.r.log.Error("background worker failed and ended", "worker", w.name, "err", err)
	case log:
		w.r.log.Warn("background worker failed; backing off", "worker", w.name, "err", err, "failures", streak, "retry", backoff)
	}
	return backoff
}

// rest waits d in state (forever if d is 0 and wakeable), ended early by a
// wake-up if wakeable. It reports false when the worker is stopped.
func (w *worker) rest(state string, d time.Duration, wakeable bool) bool {
	if d <= 0 && !wakeable {
		return w.ctx.Err() == nil
	}
	var timer <-chan time.Time
	var next time.Time
	if d > 0 {
		t := w.r.clock.NewTimer(d)
		defer t.Stop()
		timer, next = t.C(), w.r.clock.Now().Add(d)
	}
	var wake, ext <-chan struct{}
	if wakeable {
		wake = w.wake
		if wk, ok := w.w.(Waker); ok {
			ext = wk.WakeC()
		}
	}
	w.set(func(st *WorkerStatus) { st.State, st.NextRun = state, next })
	if w.r.onRest != nil {
		w.r.onRest(w.name, state, d)
	}
	select {
	case <-w.ctx.Done():
		return false
	case <-timer:
	case <-wake:
	case <-ext:
	}
	return true
}

func (w *worker) set(fn func(*WorkerStatus)) {
	w.mu.Lock()
	fn(&w.st)
	w.mu.Unlock()
}
