package impact

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/job"
)

// TestThrottleDataDriven runs the controller scenarios under
// testdata/throttle. Each file drives one Controller with a scripted clock,
// load and policy store; the runner is simulated by asking every job's
// Allowance before each tick. Commands:
//
//	setup [zone=Z] [start=RFC3339] [every=DURATION]
//	                      a fresh controller (defaults UTC, Mon
//	                      2026-03-02 10:00, 5s)
//	policy name=N [tz=Z] [default=L] [client-p99=D]
//	                      input: window specs; stores a custom policy
//	                      (created or replaced); prints ok or the error
//	delete-policy name=N  removes a custom policy from the store
//	load [cpu=PCT] [qos=N] [error=MSG]
//	                      input: "DRIVE CLASS iops=X qd=Y" lines; the load
//	                      every following sample returns, with N
//	                      maintenance I/Os queued by QoS (error=warmup
//	                      returns ErrSampleWarmup)
//	job id=J policy=P     the runner asks J's allowance with policy P;
//	                      prints it
//	forget id=J           the runner forgets J
//	tick [n=N] [at=RFC3339]
//	                      n ticks, each one `every` after the last (the
//	                      first at `at` if given); prints per tick and job:
//	                      time, job, level, target workers = workers×duty,
//	                      then the reason when the allowance changed at
//	                      that tick, else "hold" and the pressure
//	status                prints Controller.Status
//	latency               input: "POOL CLASS NODE p99=DURATION" lines; the
//	                      client latency figures every following
//	                      CheckLatency reads (no input: none)
//	run for=DURATION [check=DURATION]
//	                      the server's two workers for a while: every
//	                      `check` (default LatencyCheckInterval) the
//	                      clock moves on, the runner asks every job's
//	                      allowance and CheckLatency runs, and a Tick
//	                      runs when `every` has passed since the last;
//	                      prints, per job whose allowance changed, time
//	                      (with tenths), job, level, workers and reason,
//	                      or "no change"
func TestThrottleDataDriven(t *testing.T) {
	runTDFiles(t, "testdata/throttle", func(t *testing.T) func(tdCase) string {
		s := &throttleScenario{t: t}
		return s.run
	})
}

// scriptSampler returns the load a scenario set.
type scriptSampler struct {
	mu   sync.Mutex
	load Load
	err  error
}

func (s *scriptSampler) Sample() (Load, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Load{CPU: s.load.CPU, Drives: slices.Clone(s.load.Drives), QoSQueued: s.load.QoSQueued}, s.err
}

// memPolicies is a PolicyLister over a map, with the store's validation.
type memPolicies struct {
	mu       sync.Mutex
	policies map[string]Policy
	lists    int   // calls to List
	err      error // when set, List fails as the store does when etcd fails
}

func (m *memPolicies) List(context.Context) ([]Policy, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lists++
	if m.err != nil {
		return nil, m.err
	}
	out := BuiltinPolicies()
	for _, p := range m.policies {
		out = append(out, p)
	}
	return out, nil
}

func (m *memPolicies) put(p Policy) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.policies[p.Name] = p
}

// scriptLatency returns the client latency figures a scenario set.
type scriptLatency struct {
	mu   sync.Mutex
	figs []PoolLatency
}

func (s *scriptLatency) ClientLatency() []PoolLatency {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.figs)
}

type throttleScenario struct {
	t        *testing.T
	now      time.Time
	lastTick time.Time
	latency  *scriptLatency
	every    time.Duration
	zone     *time.Location
	sampler  *scriptSampler
	policies *memPolicies
	c        *Controller
	jobs     map[string]string // job → the policy the runner asks with
}

func (s *throttleScenario) run(c tdCase) string {
	if c.Cmd != "setup" && s.c == nil {
		s.t.Fatalf("%s: setup first", c.Pos)
	}
	switch c.Cmd {
	case "setup":
		return s.setup(c)
	case "policy":
		p, err := NewPolicy(c.Arg("name", ""), c.Arg("tz", ""), c.Arg("default", ""), c.Input)
		if err != nil {
			return "error: " + err.Error()
		}
		if p.ClientP99, err = ParseClientP99(c.Arg("client-p99", "")); err != nil {
			return "error: " + err.Error()
		}
		s.policies.put(p)
		return "ok"
	case "delete-policy":
		s.policies.mu.Lock()
		delete(s.policies.policies, c.Arg("name", ""))
		s.policies.mu.Unlock()
		return "ok"
	case "load":
		return s.setLoad(c)
	case "job":
		id, policy := c.Arg("id", ""), c.Arg("policy", "")
		s.jobs[id] = policy
		a := s.c.Allowance(id, policy)
		return fmt.Sprintf("%s: %d×%.2f", id, a.Workers, a.Duty)
	case "forget":
		delete(s.jobs, c.Arg("id", ""))
		s.c.Forget(c.Arg("id", ""))
		return "ok"
	case "tick":
		return s.tick(c)
	case "status":
		return s.status()
	case "latency":
		return s.setLatency(c)
	case "run":
		return s.runFor(c)
	}
	s.t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}

func (s *throttleScenario) setup(c tdCase) string {
	var err error
	if s.zone, err = time.LoadLocation(c.Arg("zone", "UTC")); err != nil {
		s.t.Fatalf("%s: %v", c.Pos, err)
	}
	if s.now, err = time.Parse(time.RFC3339, c.Arg("start", "2026-03-02T10:00:00Z")); err != nil {
		s.t.Fatalf("%s: %v", c.Pos, err)
	}
	if s.every, err = time.ParseDuration(c.Arg("every", "5s")); err != nil {
		s.t.Fatalf("%s: %v", c.Pos, err)
	}
	s.sampler = &scriptSampler{}
	s.policies = &memPolicies{policies: map[string]Policy{}}
	s.latency = &scriptLatency{}
	s.jobs = map[string]string{}
	s.lastTick = s.now
	s.c, err = NewController(ControllerConfig{
		Sampler: s.sampler, Policies: s.policies, Zone: s.zone, Latency: s.latency,
		Now: func() time.Time { return s.now },
	})
	if err != nil {
		s.t.Fatalf("%s: %v", c.Pos, err)
	}
	return "ok"
}

func (s *throttleScenario) setLoad(c tdCase) string {
	var l Load
	if v, ok := c.Args["cpu"]; ok {
		pct, err := strconv.ParseFloat(v, 64)
		if err != nil {
			s.t.Fatalf("%s: cpu: %v", c.Pos, err)
		}
		l.CPU = pct / 100
	}
	if v, ok := c.Args["qos"]; ok {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			s.t.Fatalf("%s: qos: %v", c.Pos, err)
		}
		l.QoSQueued = n
	}
	for _, line := range c.Input {
		f := strings.Fields(line)
		if len(f) != 4 {
			s.t.Fatalf("%s: drive line %q: want DRIVE CLASS iops=X qd=Y", c.Pos, line)
		}
		d := DriveLoad{Drive: f[0], Class: f[1]}
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				s.t.Fatalf("%s: %q: %v", c.Pos, kv, err)
			}
			switch k {
			case "iops":
				d.IOPS = n
			case "qd":
				d.QueueDepth = n
			default:
				s.t.Fatalf("%s: unknown drive field %q", c.Pos, k)
			}
		}
		l.Drives = append(l.Drives, d)
	}
	var err error
	switch msg := c.Arg("error", ""); msg {
	case "":
	case "warmup":
		err = ErrSampleWarmup
	default:
		err = errors.New(msg)
	}
	s.sampler.mu.Lock()
	s.sampler.load, s.sampler.err = l, err
	s.sampler.mu.Unlock()
	return "ok"
}

func (s *throttleScenario) tick(c tdCase) string {
	n, err := strconv.Atoi(c.Arg("n", "1"))
	if err != nil {
		s.t.Fatalf("%s: n: %v", c.Pos, err)
	}
	var out []string
	for i := 0; i < n; i++ {
		if at, ok := c.Args["at"]; ok && i == 0 {
			if s.now, err = time.Parse(time.RFC3339, at); err != nil {
				s.t.Fatalf("%s: at: %v", c.Pos, err)
			}
		} else {
			s.now = s.now.Add(s.every)
		}
		// The runner asks every second; once before each tick stands in.
		for _, id := range slices.Sorted(maps.Keys(s.jobs)) {
			s.c.Allowance(id, s.jobs[id])
		}
		if err := s.c.Tick(context.Background()); err != nil {
			out = append(out, "tick error: "+err.Error())
		}
		s.lastTick = s.now
		for _, j := range s.c.Status().Jobs {
			what := "hold, " + j.Pressure
			if j.Changed.Equal(s.now) {
				what = j.Reason
			}
			out = append(out, fmt.Sprintf("%s %s %s %s = %s | %s",
				s.now.In(s.zone).Format("Mon 15:04:05"), j.Job, j.Level, formatWorkers(j.Target), allowed(j), what))
		}
	}
	return strings.Join(out, "\n")
}

func (s *throttleScenario) setLatency(c tdCase) string {
	var figs []PoolLatency
	for _, line := range c.Input {
		f := strings.Fields(line)
		if len(f) != 4 || !strings.HasPrefix(f[3], "p99=") {
			s.t.Fatalf("%s: latency line %q: want POOL CLASS NODE p99=DURATION", c.Pos, line)
		}
		d, err := time.ParseDuration(strings.TrimPrefix(f[3], "p99="))
		if err != nil {
			s.t.Fatalf("%s: %q: %v", c.Pos, line, err)
		}
		figs = append(figs, PoolLatency{Pool: f[0], Class: f[1], Node: f[2], P99: d})
	}
	s.latency.mu.Lock()
	s.latency.figs = figs
	s.latency.mu.Unlock()
	return "ok"
}

func (s *throttleScenario) runFor(c tdCase) string {
	total, err := time.ParseDuration(c.Arg("for", ""))
	if err != nil {
		s.t.Fatalf("%s: for: %v", c.Pos, err)
	}
	check, err := time.ParseDuration(c.Arg("check", LatencyCheckInterval.String()))
	if err != nil || check <= 0 {
		s.t.Fatalf("%s: check: %v", c.Pos, err)
	}
	var out []string
	for end := s.now.Add(total); s.now.Before(end); {
		s.now = s.now.Add(check)
		for _, id := range slices.Sorted(maps.Keys(s.jobs)) {
			s.c.Allowance(id, s.jobs[id])
		}
		s.c.CheckLatency()
		what := "check"
		if s.now.Sub(s.lastTick) >= s.every {
			if err := s.c.Tick(context.Background()); err != nil {
				out = append(out, "tick error: "+err.Error())
			}
			s.lastTick, what = s.now, "tick"
		}
		for _, j := range s.c.Status().Jobs {
			if j.Changed.Equal(s.now) {
				out = append(out, fmt.Sprintf("%s %-5s %s %s %s = %s | %s",
					s.now.In(s.zone).Format("15:04:05.0"), what, j.Job, j.Level, formatWorkers(j.Target), allowed(j), j.Reason))
			}
		}
	}
	if len(out) == 0 {
		return "no change"
	}
	return strings.Join(out, "\n")
}

// allowed is a job's allowance: workers × duty, and its byte rate if any.
func allowed(j JobThrottle) string {
	s := fmt.Sprintf("%d×%.2f", j.Workers, j.Duty)
	if j.BytesPerSec > 0 {
		s += " at " + formatRate(j.BytesPerSec) + "/s"
	}
	return s
}

func (s *throttleScenario) status() string {
	st := s.c.Status()
	var b strings.Builder
	fmt.Fprintf(&b, "tick %s cpu %.0f%%", st.Tick.In(s.zone).Format("Mon 2006-01-02 15:04:05 MST"), st.Load.CPU*100)
	for _, d := range st.Load.Drives {
		fmt.Fprintf(&b, " %s(%s) %g iops qd %g", d.Drive, d.Class, d.IOPS, d.QueueDepth)
	}
	if st.LoadError != "" {
		fmt.Fprintf(&b, " load error: %s", st.LoadError)
	}
	if st.PolicyError != "" {
		fmt.Fprintf(&b, " policy error: %s", st.PolicyError)
	}
	for _, j := range st.Jobs {
		win := j.Window
		if win == "" {
			win = "default"
		}
		fmt.Fprintf(&b, "\n%s: policy %s level %s (%s) bounds %s-%s target %s = %s\n  pressure: %s\n  changed %s: %s",
			j.Job, j.Policy, j.Level, win, formatWorkers(j.MinWorkers), formatWorkers(j.MaxWorkers),
			formatWorkers(j.Target), allowed(j), j.Pressure,
			j.Changed.In(s.zone).Format("Mon 15:04:05"), j.Reason)
		if st.LatencyCheck.IsZero() {
			continue // no latency checked in this scenario: as before
		}
		fmt.Fprintf(&b, "\n  client p99 target: %s", j.ClientP99)
		if j.LatencyBackoff != "" {
			fmt.Fprintf(&b, "\n  latency back-off: %s", j.LatencyBackoff)
		}
	}
	if !st.LatencyCheck.IsZero() {
		fmt.Fprintf(&b, "\nlatency checked %s:", st.LatencyCheck.In(s.zone).Format("15:04:05.0"))
		for _, l := range st.Latency {
			fmt.Fprintf(&b, " %s;", l)
		}
	}
	return b.String()
}

// newTestController returns a controller over a scripted sampler and an
// in-memory policy store, with a clock the test moves.
func newTestController(t *testing.T, now *time.Time) (*Controller, *scriptSampler, *memPolicies) {
	t.Helper()
	sampler := &scriptSampler{}
	policies := &memPolicies{policies: map[string]Policy{}}
	c, err := NewController(ControllerConfig{
		Sampler: sampler, Policies: policies, Zone: time.UTC,
		Now: func() time.Time { return *now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, sampler, policies
}

func TestControllerConfig(t *testing.T) {
	if _, err := NewController(ControllerConfig{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no sampler: %v, want ErrInvalid", err)
	}
	bad := DefaultThrottleLaw()
	bad.Backoff = 2
	if _, err := NewController(ControllerConfig{Sampler: &scriptSampler{}, Law: bad}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad law: %v, want ErrInvalid", err)
	}
	// Without a policy store the built-ins work.
	c, err := NewController(ControllerConfig{Sampler: &scriptSampler{}})
	if err != nil {
		t.Fatal(err)
	}
	if !c.KnownPolicy(PolicyOffHours) || c.KnownPolicy("nightly") {
		t.Error("KnownPolicy without a store: want built-ins only")
	}
	if err := c.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestControllerKnownPolicy checks a policy created after the last tick is
// known at once (one listing), so a job can be submitted with it.
func TestControllerKnownPolicy(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	c, _, policies := newTestController(t, &now)
	if !c.KnownPolicy(PolicyLow) || policies.lists != 0 {
		t.Fatalf("built-in: known, with %d listings; want no listing", policies.lists)
	}
	if c.KnownPolicy("nightly") || policies.lists != 1 {
		t.Fatalf("missing policy: known, or %d listings (want 1)", policies.lists)
	}
	p, err := NewPolicy("nightly", "", LevelHigh, nil)
	if err != nil {
		t.Fatal(err)
	}
	policies.put(p)
	if !c.KnownPolicy("nightly") {
		t.Fatal("a policy created after the last tick is not known")
	}
	// Known now: the job starts at its level, not as low.
	if a := c.Allowance("j1", "nightly"); a != (job.Allowance{Workers: 2, Duty: 1}) {
		t.Fatalf("Allowance = %+v, want high's minimum", a)
	}
}

// TestControllerExpiry checks a job the runner stopped asking about is
// dropped after the expiry, and one it asks about is kept.
func TestControllerExpiry(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	c, _, _ := newTestController(t, &now)
	c.Allowance("gone", PolicyLow)
	c.Allowance("kept", PolicyLow)
	for range 3 {
		now = now.Add(DefaultThrottleExpiry / 2)
		c.Allowance("kept", PolicyLow)
		if err := c.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for _, j := range c.Status().Jobs {
		ids = append(ids, j.Job)
	}
	if !slices.Equal(ids, []string{"kept"}) {
		t.Fatalf("jobs after expiry: %v, want [kept]", ids)
	}
}

// TestControllerWarmup checks the first sample's ErrSampleWarmup holds the
// jobs without being reported as a tick error.
func TestControllerWarmup(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	c, sampler, _ := newTestController(t, &now)
	sampler.err = ErrSampleWarmup
	before := c.Allowance("j1", PolicyMedium)
	if err := c.Tick(context.Background()); err != nil {
		t.Fatalf("Tick during warmup: %v", err)
	}
	if a := c.Allowance("j1", PolicyMedium); a != before {
		t.Fatalf("allowance moved during warmup: %+v → %+v", before, a)
	}
	if st := c.Status(); st.LoadError == "" {
		t.Fatal("Status does not show the warmup")
	}
}

// TestControllerRun drives Run through its tick channel. Each send returns
// once Run has received it, and Run receives the next only after the
// previous Tick finished, so after the last send and Run's return every
// tick is complete: no sleeps.
func TestControllerRun(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	c, sampler, policies := newTestController(t, &now)
	sampler.load = Load{CPU: 0.1}
	c.Allowance("j1", PolicyMedium)
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, ticks)
	}()
	for range 3 {
		ticks <- now
	}
	cancel()
	<-done
	if policies.lists != 3 {
		t.Fatalf("%d ticks ran, want 3", policies.lists)
	}
	if a := c.Allowance("j1", PolicyMedium); a.Workers != 4 {
		t.Fatalf("after 3 quiet ticks a medium job has %+v, want 4 workers", a)
	}
}

// TestControllerConcurrent runs the runner's calls against ticks, for the
// race detector.
func TestControllerConcurrent(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	clock := sync.Mutex{}
	sampler := &scriptSampler{load: Load{CPU: 0.5, Drives: []DriveLoad{{Drive: "d1", Class: "hdd", QueueDepth: 3}}}}
	c, err := NewController(ControllerConfig{
		Sampler: sampler, Policies: &memPolicies{policies: map[string]Policy{}},
		Now: func() time.Time { clock.Lock(); defer clock.Unlock(); return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("j%d", i)
			for range 200 {
				a := c.Allowance(id, []string{PolicyLow, PolicyHigh}[i%2])
				if a.Workers < 0 || a.Workers > MaxWorkersPerNode || !(a.Duty > 0 && a.Duty <= 1) {
					t.Errorf("%s: allowance %+v out of its domain", id, a)
					return
				}
				_ = c.Status()
				if i == 0 {
					c.KnownPolicy("nightly")
				}
			}
		}()
	}
	for range 100 {
		clock.Lock()
		now = now.Add(DefaultThrottleInterval)
		clock.Unlock()
		if err := c.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// TestControllerPolicyListFailure checks a failed listing keeps the last
// listed policies in use, and is reported.
func TestControllerPolicyListFailure(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	c, _, policies := newTestController(t, &now)
	p, err := NewPolicy("nightly", "Asia/Tokyo", LevelHigh, nil)
	if err != nil {
		t.Fatal(err)
	}
	policies.put(p)
	c.Allowance("j1", "nightly")
	if err := c.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	policies.err = errors.New("etcd unavailable")
	now = now.Add(DefaultThrottleInterval)
	if err := c.Tick(context.Background()); err == nil || !strings.Contains(err.Error(), "etcd unavailable") {
		t.Fatalf("Tick = %v, want the listing error", err)
	}
	st := c.Status()
	if st.PolicyError == "" || len(st.Jobs) != 1 || st.Jobs[0].Level != LevelHigh {
		t.Fatalf("after a failed listing: %+v, want job j1 still at high and the error shown", st)
	}
}
