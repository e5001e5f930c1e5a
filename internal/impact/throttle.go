package impact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/job"
)

// DefaultThrottleInterval is the tick the server should drive the
// Controller with: short enough that a client load spike is answered within
// seconds (the job engines we learn from sample every 20 s and decide every 60 s; a job that
// halves per tick needs three ticks to get out of the way), long enough
// that a sample averages over many drive operations.
const DefaultThrottleInterval = 5 * time.Second

// DefaultThrottleExpiry is how long the Controller keeps a job nobody asked
// an Allowance for (a job that ended without Forget).
const DefaultThrottleExpiry = 10 * time.Minute

// LoadSampler samples the node's load since its previous call; *Sampler is
// one.
type LoadSampler interface {
	Sample() (Load, error)
}

// PolicyLister lists the impact policies; *PolicyStore is one. It may
// return policies along with an error (those it could read).
type PolicyLister interface {
	List(ctx context.Context) ([]Policy, error)
}

var (
	_ LoadSampler       = (*Sampler)(nil)
	_ PolicyLister      = (*PolicyStore)(nil)
	_ job.Throttle      = (*Controller)(nil)
	_ job.PolicyChecker = (*Controller)(nil)
)

// policyRefreshTimeout bounds the policy listing KnownPolicy does when it
// does not know a name.
const policyRefreshTimeout = 5 * time.Second

// ControllerConfig wires a Controller. Zero fields take the defaults.
type ControllerConfig struct {
	// Sampler measures the node's load at each tick. Required.
	Sampler LoadSampler
	// Policies lists the custom policies at each tick; nil means
	// built-ins only.
	Policies PolicyLister
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Zone is the cluster's time zone, for policies without their own;
	// nil means time.Local.
	Zone *time.Location
	// Law is how workers move; the zero value means DefaultThrottleLaw().
	Law ThrottleLaw
	// Expiry is how long a job nobody asked about is kept; 0 means
	// DefaultThrottleExpiry.
	Expiry time.Duration
	// Logger receives tick errors when they change; nil discards them.
	Logger *slog.Logger
	// Latency reports the pools' client latency for CheckLatency; nil
	// means no latency targets are checked.
	Latency LatencySource
}

// Controller is the node's throttle: for each job running here it keeps a
// number of workers, possibly fractional, between the bounds of the level
// the job's impact policy selects now, and moves it at each tick by the
// node's load (see ThrottleLaw). It implements Throttle for the runner.
//
// Allowance is cheap (a map lookup under a mutex) and never does I/O; Tick
// does the sampling and the policy listing outside the lock. Changes to a
// job's policy, to a policy's definition, or a window boundary take effect
// at the next tick. All methods are safe for concurrent use.
type Controller struct {
	sampler  LoadSampler
	policies PolicyLister
	latency  LatencySource
	now      func() time.Time
	zone     *time.Location
	law      ThrottleLaw
	expiry   time.Duration
	log      *slog.Logger

	zmu   sync.Mutex                // guards zones
	zones map[string]*time.Location // loaded zones by name, kept across ticks

	mu        sync.Mutex
	jobs      map[string]*jobThrottle
	known     map[string]knownPolicy // built-ins and the last listed customs
	tick      time.Time
	load      Load
	loadErr   error
	policyErr error

	latencyFigs []PoolLatency // read at the last CheckLatency
	latencyAt   time.Time
}

// jobThrottle is the controller's state of one job.
type jobThrottle struct {
	policy   string // the policy the runner last asked with
	applied  string // the policy the current impact comes from
	impact   Impact
	window   string // the applied window in compact syntax; "" for the default
	workers  float64
	pressure string
	reason   string
	changed  time.Time
	asked    time.Time
	latency  latencyState // throttle_latency.go
	// rate is the byte rate a latency back-off holds the job's I/O on
	// this node to, at its level's minimum workers; 0: none.
	rate float64
	// raised is when the workers last rose (a tick's growth or a latency
	// return), from raisedFrom; zero if they never did.
	raised     time.Time
	raisedFrom float64
}

// knownPolicy is a policy with its zone loaded, so that Allowance and the
// step never read zone files under the lock.
type knownPolicy struct {
	Policy
	loc  *time.Location
	note string // set when loc is the cluster's zone because the policy's did not load
}

// NewController returns a controller; drive it with Run or Tick. It fails
// (ErrInvalid) without a Sampler or with a law that does not validate.
func NewController(cfg ControllerConfig) (*Controller, error) {
	if cfg.Sampler == nil {
		return nil, fmt.Errorf("%w: throttle controller: no load sampler", ErrInvalid)
	}
	c := &Controller{
		sampler: cfg.Sampler, policies: cfg.Policies, latency: cfg.Latency,
		now: cfg.Now, zone: cfg.Zone, law: cfg.Law, expiry: cfg.Expiry, log: cfg.Logger,
		jobs: map[string]*jobThrottle{}, zones: map[string]*time.Location{},
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.zone == nil {
		c.zone = time.Local
	}
	if c.law == (ThrottleLaw{}) {
		c.law = DefaultThrottleLaw()
	}
	if err := c.law.Validate(); err != nil {
		return nil, err
	}
	if c.expiry <= 0 {
		c.expiry = DefaultThrottleExpiry
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.known = c.compile(nil)
	return c, nil
}

// Allowance returns what jobID may use on this node now. A job the
// controller has not seen starts at its level's minimum workers (a
// quarter worker if that minimum is 0); policy is remembered and, if it
// differs from the job's current one, applied at the next tick. A policy
// the controller does not know runs the job at level low until it does.
func (c *Controller) Allowance(jobID string, policy string) job.Allowance {
	c.mu.Lock()
	_, seen := c.jobs[jobID]
	_, known := c.known[policy]
	c.mu.Unlock()
	if !seen && !known {
		// A policy created a moment ago, not listed at the last tick: list
		// once (as KnownPolicy does, bounded) rather than start the job at
		// the fallback level nobody chose.
		c.KnownPolicy(policy)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	j := c.jobs[jobID]
	if j == nil {
		j = &jobThrottle{policy: policy, applied: policy, changed: now}
		imp, win, note := c.resolve(policy, now)
		j.impact, j.window = imp, win
		lv := imp.Level
		j.workers = lv.MinWorkers
		if j.workers == 0 {
			j.workers = min(c.law.FractionStep, lv.MaxWorkers)
		}
		j.reason = "start: " + describeImpact(policy, imp, win, note)
		j.pressure = "unknown: no tick yet"
		c.jobs[jobID] = j
	}
	j.policy, j.asked = policy, now
	a := allowanceOf(j.workers)
	a.BytesPerSec = j.rate
	return a
}

// KnownPolicy reports whether name is a built-in or custom policy, for the
// engine to refuse a job with an unknown one. A name missing from the
// policies listed at the last tick triggers one listing (bounded by a few
// seconds) so that a policy created a moment ago is accepted.
func (c *Controller) KnownPolicy(name string) bool {
	c.mu.Lock()
	_, ok := c.known[name]
	c.mu.Unlock()
	if ok || c.policies == nil {
		return ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), policyRefreshTimeout)
	defer cancel()
	pols, err := c.policies.List(ctx)
	if err != nil && pols == nil {
		return false
	}
	known := c.compile(pols)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.known = known
	_, ok = known[name]
	return ok
}

// Active reports whether the controller throttles any job now (one the
// runner asked an allowance for and did not forget).
func (c *Controller) Active() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.jobs) > 0
}

// Forget drops jobID's state (the runner calls it when the job stops here).
// Forgetting an unknown job does nothing.
func (c *Controller) Forget(jobID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.jobs, jobID)
}

// Run calls Tick at each value from ticks until ctx is done, logging tick
// errors when they change. The server passes a time.Ticker's channel at
// DefaultThrottleInterval.
func (c *Controller) Run(ctx context.Context, ticks <-chan time.Time) {
	var last string
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			err := c.Tick(ctx)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if msg != last {
				if err != nil {
					c.log.Warn("job throttle: tick", "err", err)
				} else {
					c.log.Info("job throttle: tick errors cleared")
				}
				last = msg
			}
		}
	}
}

// Tick samples the node's load, refreshes the custom policies, and moves
// every job's workers one step. It always completes the step: when the load
// cannot be sampled every job holds its workers (bounded by its level, which
// still follows windows and policy changes); when the policies cannot be
// listed the last listed ones stay in use. It returns those errors joined
// (not ErrSampleWarmup, which is expected once), for the caller to log.
func (c *Controller) Tick(ctx context.Context) error {
	now := c.now()
	load, loadErr := c.sampler.Sample()
	var known map[string]knownPolicy
	var policyErr error
	if c.policies != nil {
		var pols []Policy
		pols, policyErr = c.policies.List(ctx)
		if policyErr == nil || pols != nil {
			known = c.compile(pols)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if known != nil {
		c.known = known
	}
	c.tick, c.load, c.loadErr, c.policyErr = now, load, loadErr, policyErr
	for id, j := range c.jobs {
		if now.Sub(j.asked) > c.expiry {
			delete(c.jobs, id)
			continue
		}
		c.step(j, now)
	}
	if errors.Is(loadErr, ErrSampleWarmup) {
		loadErr = nil
	}
	return errors.Join(loadErr, policyErr)
}

// compile returns the built-ins and customs by name with their zones
// loaded (a built-in wins over a custom of the same name). A zone that does
// not load falls back to the cluster's, with a note. Locking: takes c.zmu,
// not c.mu: loading a zone reads a file.
func (c *Controller) compile(customs []Policy) map[string]knownPolicy {
	c.zmu.Lock()
	defer c.zmu.Unlock()
	known := map[string]knownPolicy{}
	for _, p := range slices.Concat(customs, BuiltinPolicies()) {
		kp := knownPolicy{Policy: p, loc: c.zone}
		if p.TimeZone != "" {
			if loc, ok := c.zones[p.TimeZone]; ok {
				kp.loc = loc
			} else if loc, err := p.Location(c.zone); err == nil {
				c.zones[p.TimeZone], kp.loc = loc, loc
			} else {
				kp.note = fmt.Sprintf("%v; using the cluster's zone", err)
			}
		}
		known[p.Name] = kp
	}
	return known
}

// step moves j one tick. Locking: c.mu held.
func (c *Controller) step(j *jobThrottle, now time.Time) {
	imp, win, note := c.resolve(j.policy, now)
	var why []string
	levelChanged := j.applied != j.policy || j.impact != imp || j.window != win
	if levelChanged {
		d := describeImpact(j.policy, imp, win, note)
		if j.applied != j.policy {
			d = "policy changed from " + j.applied + "; " + d
		}
		why = append(why, d)
	}
	j.applied, j.impact, j.window = j.policy, imp, win
	w := clampWorkers(j.workers, imp.Level)
	if c.loadErr != nil {
		j.pressure = "unknown: " + c.loadErr.Error()
	} else {
		p, desc := c.law.assess(c.load, imp.Level.Thresholds)
		j.pressure = p.String() + ": " + desc
		switch {
		case p == pressureOver:
		case j.latency.over:
			// A client latency back-off is on: the load may cut, not grow.
			p = pressureNear
			j.pressure = "near: client latency back-off (" + j.latency.desc + "); load " + j.pressure
		case p == pressureUnder && now.Before(j.latency.noGrowth):
			p = pressureNear
			j.pressure = "near: " + j.latency.noGrowthWhy + "; load " + j.pressure
		}
		switch nw := c.law.next(w, p, imp.Level); {
		case nw < w:
			why = append(why, "back off: "+desc)
			w = nw
		case nw > w:
			why = append(why, "grow: busiest "+desc)
			j.raised, j.raisedFrom = now, w
			w = nw
		}
	}
	if w != j.workers || levelChanged {
		j.workers, j.reason, j.changed = w, strings.Join(why, "; "), now
	}
}

// resolve returns the impact of the policy called name at now, the applied
// window in compact syntax ("" for the default), and a note when it had to
// fall back (unknown policy, zone that does not load). Locking: c.mu held.
func (c *Controller) resolve(name string, now time.Time) (Impact, string, string) {
	kp, ok := c.known[name]
	if !ok {
		kp = c.known[PolicyLow]
		kp.note = fmt.Sprintf("%v %q: running as %s", ErrUnknownPolicy, name, PolicyLow)
	}
	p, note := kp.Policy, kp.note
	imp, err := p.ImpactAt(now.In(kp.loc))
	if err != nil { // a policy that does not validate: never stored, but be safe
		low, _ := LookupLevel(LevelLow)
		return Impact{Level: low, Window: -1}, "", fmt.Sprintf("%v; running as %s", err, LevelLow)
	}
	win := ""
	if imp.Window >= 0 {
		win = p.Windows[imp.Window].String()
	}
	return imp, win, note
}

// describeImpact says which level a policy selected and why.
func describeImpact(policy string, imp Impact, win, note string) string {
	s := fmt.Sprintf("policy %s: level %s %s-%s workers", policy, imp.Level.Name,
		formatWorkers(imp.Level.MinWorkers), formatWorkers(imp.Level.MaxWorkers))
	if win != "" {
		s += " (window " + win + ")"
	} else {
		s += " (default)"
	}
	if note != "" {
		s += "; " + note
	}
	return s
}

// ThrottleStatus is the controller's state for `weft job status`.
type ThrottleStatus struct {
	// Tick is the time of the last tick; zero before the first.
	Tick time.Time
	// LatencyCheck is the time of the last CheckLatency, and Latency the
	// client latency figures it read (pools with client I/O only).
	LatencyCheck time.Time     `json:",omitzero"`
	Latency      []PoolLatency `json:",omitempty"`
	// Load is the node's load sampled at the last tick.
	Load Load
	// LoadError and PolicyError are the last tick's sampling and policy
	// listing errors, empty when none.
	LoadError, PolicyError string
	// Jobs are the jobs the controller throttles, by job id.
	Jobs []JobThrottle
}

// JobThrottle is one job's throttle state.
type JobThrottle struct {
	Job    string
	Policy string // the policy in effect
	Level  string
	// Window is the policy window that applies, in compact syntax; empty
	// when the policy's default level applies.
	Window string
	// MinWorkers and MaxWorkers are the bounds in effect.
	MinWorkers, MaxWorkers float64
	// Target is the fractional worker count; Workers and Duty are the
	// allowance it gives.
	Target  float64
	Workers int
	Duty    float64
	// Pressure is the last tick's verdict on the load against the level's
	// thresholds ("under", "near", "over", "unknown") and its busiest
	// signal.
	Pressure string
	// Reason says why the allowance last changed, and Changed when.
	Reason  string
	Changed time.Time
	// ClientP99 describes the client latency targets in effect: the
	// policy's own, or its level's per drive class.
	ClientP99 string
	// LatencyBackoff is set while the job is held down for client
	// latency: the last "client p99 X > target Y on pool P (node N)".
	LatencyBackoff string `json:",omitempty"`
	// BytesPerSec is the byte rate the back-off holds the job's I/O on
	// this node to, at its level's minimum workers (0: none).
	BytesPerSec float64 `json:",omitempty"`
}

// Status returns a snapshot of the controller's state.
func (c *Controller) Status() ThrottleStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := ThrottleStatus{Tick: c.tick, Load: c.load, LatencyCheck: c.latencyAt, Latency: slices.Clone(c.latencyFigs)}
	st.Load.Drives = slices.Clone(c.load.Drives)
	if c.loadErr != nil {
		st.LoadError = c.loadErr.Error()
	}
	if c.policyErr != nil {
		st.PolicyError = c.policyErr.Error()
	}
	for id, j := range c.jobs {
		a := allowanceOf(j.workers)
		st.Jobs = append(st.Jobs, JobThrottle{
			Job: id, Policy: j.applied, Level: j.impact.Level.Name, Window: j.window,
			MinWorkers: j.impact.Level.MinWorkers, MaxWorkers: j.impact.Level.MaxWorkers,
			Target: j.workers, Workers: a.Workers, Duty: a.Duty, BytesPerSec: j.rate,
			Pressure: j.pressure, Reason: j.reason, Changed: j.changed,
			ClientP99: describeTargets(c.policyOf(j.applied), j.impact.Level),
		})
		if j.latency.over {
			st.Jobs[len(st.Jobs)-1].LatencyBackoff = j.latency.desc
		}
	}
	slices.SortFunc(st.Jobs, func(a, b JobThrottle) int { return strings.Compare(a.Job, b.Job) })
	return st
}
