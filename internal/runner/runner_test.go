package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The runner's tests never sleep: the clock is fake, every step is scripted
// (the test receives each call and answers it), and every rest is reported
// to the test (Runner.onRest) before the worker waits. Time passes only when
// a test advances the clock.

// fakeClock is a Clock whose time moves only by Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]bool
}

type fakeTimer struct {
	c  *fakeClock
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), timers: map[*fakeTimer]bool{}}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers[t] = true
	return t
}

// Advance moves the time by d and fires the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for t := range c.timers {
		if !t.at.After(c.now) {
			t.ch <- c.now
			delete(c.timers, t)
		}
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() {
	t.c.mu.Lock()
	delete(t.c.timers, t)
	t.c.mu.Unlock()
}

// call is one Step of a scripted worker, waiting for the test's answer.
type call struct {
	ctx   context.Context
	reply chan answer
}

type answer struct {
	state State
	err   error
	took  time.Duration // the clock advances by it before the step returns
}

// scripted is a Worker whose steps the test answers.
type scripted struct {
	clock *fakeClock
	calls chan call
}

func (s *scripted) Step(ctx context.Context) (State, error) {
	c := call{ctx: ctx, reply: make(chan answer)}
	select {
	case s.calls <- c:
	case <-ctx.Done():
		return Idle, ctx.Err()
	}
	select {
	case a := <-c.reply:
		s.clock.Advance(a.took)
		return a.state, a.err
	case <-ctx.Done(): // a test that failed left the step unanswered
		return Idle, ctx.Err()
	}
}

// wakingWorker is a scripted Waker.
type wakingWorker struct {
	*scripted
	mu    sync.Mutex
	wakeC chan struct{}
}

func (w *wakingWorker) WakeC() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wakeC
}

// rest is one rest a worker began.
type rest struct {
	name, state string
	d           time.Duration
}

// fixture is a runner over a fake clock, with its rests and logs.
type fixture struct {
	t     *testing.T
	clock *fakeClock
	r     *Runner
	rests chan rest
	logs  *logRecorder
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, clock: newFakeClock(), rests: make(chan rest, 100), logs: &logRecorder{}}
	f.r = New(Config{Clock: f.clock, Log: slog.New(f.logs)})
	f.r.onRest = func(name, state string, d time.Duration) { f.rests <- rest{name, state, d} }
	t.Cleanup(func() {
		if err := f.r.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return f
}

// start starts a scripted worker.
func (f *fixture) start(name string, o Options) (*scripted, *Handle) {
	f.t.Helper()
	w := &scripted{clock: f.clock, calls: make(chan call)}
	h, err := f.r.Go(name, w, o)
	if err != nil {
		f.t.Fatal(err)
	}
	return w, h
}

// step waits for w's next step and answers it.
func (f *fixture) step(w *scripted, a answer) {
	f.t.Helper()
	c := f.next(w)
	c.reply <- a
}

// next waits for w's next step, unanswered.
func (f *fixture) next(w *scripted) call {
	f.t.Helper()
	select {
	case c := <-w.calls:
		return c
	case <-time.After(10 * time.Second): // a hang, not a timing
		f.t.Fatal("the worker was not stepped")
	}
	return call{}
}

// rest waits for the next rest and checks it.
func (f *fixture) rest(want rest) {
	f.t.Helper()
	select {
	case got := <-f.rests:
		if got != want {
			f.t.Fatalf("rest %+v, want %+v", got, want)
		}
	case <-time.After(10 * time.Second):
		f.t.Fatalf("no rest; want %+v", want)
	}
}

// noStep checks that w is not being stepped now.
func (f *fixture) noStep(w *scripted) {
	f.t.Helper()
	select {
	case <-w.calls:
		f.t.Fatal("the worker was stepped")
	default:
	}
}

// logRecorder is a slog.Handler keeping the messages it gets.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	l.mu.Lock()
	l.msgs = append(l.msgs, msg)
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.msgs
	l.msgs = nil
	return m
}

func TestIdleWaitsAndWakes(t *testing.T) {
	f := newFixture(t)
	w, h := f.start("w", Options{Idle: 10 * time.Second})
	f.step(w, answer{state: Idle, took: time.Second})
	f.rest(rest{"w", StateIdle, 10 * time.Second})
	st := h.Status()
	start := f.clock.Now().Add(-time.Second)
	if st.State != StateIdle || st.Steps != 1 || st.Errors != 0 || st.LastDuration != time.Second ||
		!st.LastStep.Equal(start) || !st.NextRun.Equal(f.clock.Now().Add(10*time.Second)) {
		t.Fatalf("status after an idle step: %+v", st)
	}
	f.clock.Advance(9 * time.Second)
	f.noStep(w)
	f.clock.Advance(time.Second)
	c := f.next(w)
	if st := h.Status(); st.State != StateRunning || !st.NextRun.IsZero() || !st.LastStep.Equal(f.clock.Now()) {
		t.Fatalf("status in a step: %+v", st)
	}
	c.reply <- answer{state: Idle}
	f.rest(rest{"w", StateIdle, 10 * time.Second})

	// Woken while idle: steps at once.
	h.Wake()
	f.step(w, answer{state: Idle})
	f.rest(rest{"w", StateIdle, 10 * time.Second})

	// Woken during a step: the next rest ends at once.
	f.clock.Advance(10 * time.Second)
	c = f.next(w)
	h.Wake()
	h.Wake() // merges
	c.reply <- answer{state: Idle}
	f.rest(rest{"w", StateIdle, 10 * time.Second})
	f.step(w, answer{state: Idle})
	f.rest(rest{"w", StateIdle, 10 * time.Second})
	f.noStep(w)
	if st := h.Status(); st.Steps != 5 {
		t.Fatalf("steps %d, want 5", st.Steps)
	}
}

func TestIdleUntilWoken(t *testing.T) {
	f := newFixture(t)
	w, h := f.start("w", Options{})
	f.step(w, answer{state: Idle})
	f.rest(rest{"w", StateIdle, 0})
	if st := h.Status(); st.State != StateIdle || !st.NextRun.IsZero() {
		t.Fatalf("resting until woken: %+v", st)
	}
	f.clock.Advance(time.Hour)
	f.noStep(w)
	h.Wake()
	f.step(w, answer{state: Idle})
	f.rest(rest{"w", StateIdle, 0})
}

func TestWaker(t *testing.T) {
	f := newFixture(t)
	s := &scripted{clock: f.clock, calls: make(chan call)}
	ww := &wakingWorker{scripted: s, wakeC: make(chan struct{})}
	if _, err := f.r.Go("w", ww, Options{Idle: time.Minute}); err != nil {
		t.Fatal(err)
	}
	f.step(s, answer{state: Idle})
	f.rest(rest{"w", StateIdle, time.Minute})
	ww.wakeC <- struct{}{}
	f.step(s, answer{state: Idle})
	f.rest(rest{"w", StateIdle, time.Minute})
	close(ww.wakeC) // a closed channel wakes as well
	c := f.next(s)
	ww.mu.Lock()
	ww.wakeC = nil // a nil channel never wakes
	ww.mu.Unlock()
	c.reply <- answer{state: Idle}
	f.rest(rest{"w", StateIdle, time.Minute})
	f.noStep(s)
}

func TestDelay(t *testing.T) {
	f := newFixture(t)
	w, h := f.start("w", Options{Delay: 5 * time.Second, Idle: time.Second})
	f.rest(rest{"w", StateIdle, 5 * time.Second})
	if st := h.Status(); st.Steps != 0 || !st.NextRun.Equal(f.clock.Now().Add(5*time.Second)) {
		t.Fatalf("before the first step: %+v", st)
	}
	f.noStep(w)
	f.clock.Advance(5 * time.Second)
	f.step(w, answer{state: Idle})
	f.rest(rest{"w", StateIdle, time.Second})

	// A wake-up ends the delay.
	w2, h2 := f.start("w2", Options{Delay: time.Hour})
	f.rest(rest{"w2", StateIdle, time.Hour})
	h2.Wake()
	f.step(w2, answer{state: Idle})
	f.rest(rest{"w2", StateIdle, 0})
}

func TestBusyAndThrottled(t *testing.T) {
	f := newFixture(t)
	w, h := f.start("w", Options{Idle: time.Minute})
	// Busy: stepped again with no rest in between.
	f.step(w, answer{state: Busy, took: time.Second})
	f.step(w, answer{state: Busy})
	// Throttled: rests k (2 by default) × the step's duration.
	f.step(w, answer{state: Throttled, took: 3 * time.Second})
	f.rest(rest{"w", StateThrottled, 6 * time.Second})
	if st := h.Status(); st.State != StateThrottled || !st.NextRun.Equal(f.clock.Now().Add(6*time.Second)) {
		t.Fatalf("throttled: %+v", st)
	}
	h.Wake() // does not shorten a throttled pause
	f.clock.Advance(5 * time.Second)
	f.noStep(w)
	f.clock.Advance(time.Second)
	f.step(w, answer{state: Idle}) // the step serves the wake-up
	f.rest(rest{"w", StateIdle, time.Minute})
	f.noStep(w)

	w2, _ := f.start("w2", Options{Tranquility: 0.5})
	f.step(w2, answer{state: Throttled, took: 3 * time.Second})
	f.rest(rest{"w2", StateThrottled, 1500 * time.Millisecond})
}

func TestBackoff(t *testing.T) {
	f := newFixture(t)
	w, h := f.start("w", Options{Idle: time.Minute, MinBackoff: time.Second, MaxBackoff: 8 * time.Second})
	f.logs.take()
	boom := errors.New("boom")
	for _, want := range []time.Duration{1, 2, 4, 8, 8, 8} {
		f.step(w, answer{state: Idle, err: boom})
		f.rest(rest{"w", StateBackingOff, want * time.Second})
		h.Wake() // does not shorten a back-off
		f.clock.Advance(want*time.Second - 1)
		f.noStep(w)
		f.clock.Advance(1)
	}
	c := f.next(w) // the 7th step
	st := h.Status()
	if st.State != StateRunning || st.Steps != 6 || st.Errors != 6 || st.LastError != "boom" || !st.LastErrorAt.Equal(f.clock.Now().Add(-8*time.Second)) {
		t.Fatalf("status after 6 failures: %+v", st)
	}
	// The first failure is logged; the next ones only once LogEvery (a
	// minute) has passed since: 31 s of back-off so far.
	if logs := f.logs.take(); len(logs) != 1 || !strings.Contains(logs[0], "err=boom") || !strings.Contains(logs[0], "failures=1 ") {
		t.Fatalf("logs after 6 failures: %q", logs)
	}
	c.reply <- answer{state: Idle, err: boom}
	for i := 0; ; i++ { // failures 7 to 11, at 31, 39, 47, 55 and 63 s
		f.rest(rest{"w", StateBackingOff, 8 * time.Second})
		f.clock.Advance(8 * time.Second)
		if i == 4 {
			break
		}
		f.step(w, answer{state: Idle, err: boom})
	}
	if logs := f.logs.take(); len(logs) != 1 || !strings.Contains(logs[0], "failures=11") {
		t.Fatalf("logs after 11 failures: %q", logs)
	}
	// A success resets the back-off and is logged as a recovery; the
	// last error stays in the status.
	f.step(w, answer{state: Idle})
	f.rest(rest{"w", StateIdle, time.Minute})
	if logs := f.logs.take(); len(logs) != 1 || !strings.Contains(logs[0], "recovered") || !strings.Contains(logs[0], "failures=11") {
		t.Fatalf("logs after the recovery: %q", logs)
	}
	if st := h.Status(); st.Errors != 11 || st.LastError != "boom" {
		t.Fatalf("status after the recovery: %+v", st)
	}
	h.Wake()
	f.step(w, answer{state: Busy, err: boom}) // an error backs off whatever the state
	f.rest(rest{"w", StateBackingOff, time.Second})

	// MinBackoff == MaxBackoff: a fixed retry interval.
	w2, _ := f.start("fixed", Options{MinBackoff: 5 * time.Second, MaxBackoff: time.Second})
	for range 3 {
		f.step(w2, answer{state: Idle, err: boom})
		f.rest(rest{"fixed", StateBackingOff, 5 * time.Second})
		f.clock.Advance(5 * time.Second)
	}
}

func TestDoneAndFailed(t *testing.T) {
	f := newFixture(t)
	w, h := f.start("w", Options{})
	if _, err := f.r.Go("w", &scripted{}, Options{}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("a second worker named w: %v", err)
	}
	f.step(w, answer{state: Done})
	<-h.Done()
	if st := h.Status(); st.State != StateDone || st.Steps != 1 {
		t.Fatalf("done: %+v", st)
	}
	// A finished worker's name may be used again.
	w, h = f.start("w", Options{})
	f.logs.take()
	f.step(w, answer{state: Done, err: errors.New("disk on fire")})
	<-h.Done()
	if st := h.Status(); st.State != StateFailed || st.Errors != 1 || st.LastError != "disk on fire" {
		t.Fatalf("failed: %+v", st)
	}
	if logs := f.logs.take(); len(logs) != 1 || !strings.Contains(logs[0], "ended") || !strings.Contains(logs[0], "disk on fire") {
		t.Fatalf("logs of a failed worker: %q", logs)
	}
	if st := f.r.Status(); len(st) != 1 || st[0].State != StateFailed {
		t.Fatalf("runner status: %+v", st)
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Fatalf("stopping a finished worker: %v", err)
	}
}

// stubborn is a worker whose step ignores its context until released.
type stubborn struct {
	in      chan struct{}
	release chan struct{}
}

func (s *stubborn) Step(context.Context) (State, error) {
	s.in <- struct{}{}
	<-s.release
	return Idle, nil
}

func TestStop(t *testing.T) {
	f := newFixture(t)
	polite, hp := f.start("polite", Options{})
	c := f.next(polite) // in a step that returns when cancelled
	go func() {
		<-c.ctx.Done()
		c.reply <- answer{state: Idle, err: c.ctx.Err()}
	}()
	idle, hi := f.start("idle", Options{})
	f.step(idle, answer{state: Idle})
	f.rest(rest{"idle", StateIdle, 0})
	s := &stubborn{in: make(chan struct{}), release: make(chan struct{})}
	hs, err := f.r.Go("stubborn", s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	<-s.in

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- f.r.Stop(ctx) }()
	<-hp.Done()
	<-hi.Done()
	cancel() // the deadline passes with stubborn still in its step
	err = <-stopped
	if !errors.Is(err, ErrNotStopped) || !strings.Contains(err.Error(), "stubborn") || strings.Contains(err.Error(), "polite") {
		t.Fatalf("Stop = %v; want ErrNotStopped naming stubborn only", err)
	}
	for _, st := range f.r.Status() {
		switch {
		case st.Name == "stubborn" && st.State != StateRunning,
			st.Name != "stubborn" && st.State != StateStopped:
			t.Fatalf("after Stop: %+v", st)
		}
	}
	// A step cut short by Stop is not a failure.
	if st := hp.Status(); st.Errors != 0 || st.Steps != 1 {
		t.Fatalf("polite after Stop: %+v", st)
	}
	if _, err := f.r.Go("late", &scripted{}, Options{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Go after Stop: %v", err)
	}
	close(s.release)
	<-hs.Done()
	if st := hs.Status(); st.State != StateStopped {
		t.Fatalf("stubborn once released: %+v", st)
	}
	if err := f.r.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestHandleStop(t *testing.T) {
	f := newFixture(t)
	a, ha := f.start("a", Options{Idle: time.Hour})
	b, _ := f.start("b", Options{Idle: time.Hour})
	f.step(a, answer{state: Idle})
	f.rest(rest{"a", StateIdle, time.Hour})
	f.step(b, answer{state: Idle})
	f.rest(rest{"b", StateIdle, time.Hour})
	if err := ha.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := ha.Status(); st.State != StateStopped {
		t.Fatalf("a after its Stop: %+v", st)
	}
	// b runs on.
	f.clock.Advance(time.Hour)
	f.step(b, answer{state: Idle})
	f.rest(rest{"b", StateIdle, time.Hour})
	s := &stubborn{in: make(chan struct{}), release: make(chan struct{})}
	hs, err := f.r.Go("stubborn", s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	<-s.in
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := hs.Stop(ctx); !errors.Is(err, ErrNotStopped) || !strings.Contains(err.Error(), "stubborn") {
		t.Fatalf("Stop of a stubborn worker past its deadline: %v", err)
	}
	close(s.release)
	<-hs.Done()
}

func TestStatusOrderAndCollector(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"publish", "drainer", "lease"} {
		w, _ := f.start(name, Options{Idle: time.Minute})
		f.step(w, answer{state: Idle, err: errorIf(name == "drainer")})
		state := StateIdle
		if name == "drainer" {
			state = StateBackingOff
		}
		f.rest(rest{name, state, map[bool]time.Duration{true: time.Second, false: time.Minute}[name == "drainer"]})
	}
	var names []string
	for _, st := range f.r.Status() {
		names = append(names, st.Name)
	}
	if fmt.Sprint(names) != "[drainer lease publish]" {
		t.Fatalf("status order %v", names)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(f.r))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += fmt.Sprintf(" %s=%s", l.GetName(), l.GetValue())
			}
			switch {
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[key] = m.GetGauge().GetValue()
			}
		}
	}
	for key, want := range map[string]float64{
		"weft_worker_steps_total worker=drainer":             1,
		"weft_worker_errors_total worker=drainer":            1,
		"weft_worker_errors_total worker=lease":              0,
		"weft_worker_state state=backing-off worker=drainer": 1,
		"weft_worker_state state=idle worker=drainer":        0,
		"weft_worker_state state=idle worker=publish":        1,
		"weft_worker_state state=running worker=publish":     0,
		"weft_worker_last_step_seconds worker=publish":       0,
		"weft_worker_state state=stopped worker=lease":       0,
		"weft_worker_state state=backing-off worker=publish": 0,
		"weft_worker_steps_total worker=publish":             1,
		"weft_worker_state state=idle worker=lease":          1,
		"weft_worker_state state=failed worker=lease":        0,
		"weft_worker_state state=throttled worker=lease":     0,
		"weft_worker_state state=done worker=lease":          0,
		"weft_worker_steps_total worker=lease":               1,
		"weft_worker_errors_total worker=publish":            0,
		"weft_worker_last_step_seconds worker=drainer":       0,
		"weft_worker_last_step_seconds worker=lease":         0,
		"weft_worker_state state=backing-off worker=lease":   0,
		"weft_worker_state state=running worker=drainer":     0,
		"weft_worker_state state=running worker=lease":       0,
		"weft_worker_state state=throttled worker=publish":   0,
		"weft_worker_state state=throttled worker=drainer":   0,
		"weft_worker_state state=done worker=publish":        0,
		"weft_worker_state state=done worker=drainer":        0,
		"weft_worker_state state=failed worker=publish":      0,
		"weft_worker_state state=failed worker=drainer":      0,
		"weft_worker_state state=stopped worker=publish":     0,
		"weft_worker_state state=stopped worker=drainer":     0,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	if len(got) != 30 {
		t.Errorf("%d series, want 30 (3 workers × (3 + 7 states))", len(got))
	}
}

func errorIf(b bool) error {
	if b {
		return errors.New("etcd unreachable")
	}
	return nil
}
