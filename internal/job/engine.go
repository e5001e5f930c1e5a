package job

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/weftfs/weft/internal/failpoint"
)

// Config configures a node's Engine. Zero durations and sizes take the
// defaults named on each field.
type Config struct {
	// Client is the etcd client; the engine does not close it.
	Client *clientv3.Client
	// Node is this node's name, unique in the cluster.
	Node string
	// Env is handed to every phase call on this node.
	Env Env
	// Throttle decides each manager's workers and duty; nil means
	// FixedThrottle{Workers: 2, Duty: 1}.
	Throttle Throttle
	// Log receives the engine's logs; nil discards them.
	Log *slog.Logger

	// Lease gives the engine the node's liveness lease, which binds its
	// task claims, its status and its coordinator candidacy: a node is
	// alive for the engine exactly when it is for the rest of the cluster,
	// and a crashed node's tasks become claimable, and another node
	// coordinator, when that lease expires. Nil: the engine takes leases
	// of its own (OwnLeases), for tests and tools that run an engine
	// without a node.
	Lease LeaseSource
	// LeaseTTL is the TTL of the engine's own leases when Lease is nil.
	// Default 5 s; whole seconds, at least 1 s.
	LeaseTTL time.Duration
	// Tick is how often the coordinator and directors reconcile without a
	// watch event. Default 1 s.
	Tick time.Duration
	// CheckpointInterval is how often a worker writes its task's cursor
	// and counters: at most this much work is redone after a crash.
	// Default 2 s.
	CheckpointInterval time.Duration
	// AllowanceInterval is how often a manager asks the Throttle. Default 1 s.
	AllowanceInterval time.Duration
	// StatusInterval is how often a director publishes its status. Default 2 s.
	StatusInterval time.Duration
	// BatchSize is how many item keys a worker lists at a time. Default 64.
	BatchSize int
	// MinSteal is the narrowest range a steal leaves or takes. Default 64.
	MinSteal uint64
	// ItemRetries is how many times a failing item (or listing) is retried
	// before it fails its task. 0 means 2; negative means none.
	ItemRetries int
	// RetryBackoff is the pause before the first retry, doubled for each
	// next. Default 100 ms.
	RetryBackoff time.Duration
	// CancelGrace bounds how long a cancel waits for managers to write
	// their final checkpoints before the job is marked cancelled. Default 10 s.
	CancelGrace time.Duration
	// Parallelism is the number of tasks per live node suggested to Split.
	// Default 32.
	Parallelism int
	// KeepEvents is how many entries the event log keeps; older ones are
	// deleted as new ones are recorded. Default DefaultKeepEvents (1000).
	KeepEvents int
	// ScheduleInterval is how often the coordinator looks for job types
	// whose schedule is due (a schedule fires up to this late). Default
	// 20 s.
	ScheduleInterval time.Duration
	// Now is the clock schedules are judged by; nil means time.Now.
	// Tests move it.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.LeaseTTL, 5*time.Second)
	def(&c.Tick, time.Second)
	def(&c.CheckpointInterval, 2*time.Second)
	def(&c.AllowanceInterval, time.Second)
	def(&c.StatusInterval, 2*time.Second)
	def(&c.RetryBackoff, 100*time.Millisecond)
	def(&c.CancelGrace, 10*time.Second)
	def(&c.ScheduleInterval, 20*time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 64
	}
	if c.MinSteal == 0 {
		c.MinSteal = 64
	}
	switch {
	case c.ItemRetries == 0:
		c.ItemRetries = 2
	case c.ItemRetries < 0:
		c.ItemRetries = 0
	}
	if c.Parallelism <= 0 {
		c.Parallelism = 32
	}
	if c.KeepEvents <= 0 {
		c.KeepEvents = DefaultKeepEvents
	}
	if c.Throttle == nil {
		c.Throttle = FixedThrottle{Workers: 2, Duty: 1}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// Engine is one node's part of the job engine: its director (always), the
// coordinator (when elected), and the public calls of the admin API, which
// any node serves by reading and writing etcd.
//
// Locking: all methods are safe for concurrent use. Register job types
// before Start.
type Engine struct {
	cfg Config
	log *slog.Logger

	lease LeaseSource

	mu      sync.Mutex
	types   map[string]Type
	running bool
	cancel  context.CancelFunc
	done    chan struct{}
	dir     *director // the current session's director, for Status

	coordinator atomic.Bool
	// term is this node's current term as coordinator, nil when it is
	// not coordinator (set and cleared with coordinator).
	term atomic.Pointer[coordTerm]
	m    counters
}

// coordTerm is one term of a node as coordinator: its election key and
// that key's create revision. A write compared on it (fence) succeeds
// only while the term lasts: a deposed coordinator can write nothing.
type coordTerm struct {
	key string
	rev int64
}

// fence is the comparison that holds while the term lasts.
func (t *coordTerm) fence() []clientv3.Cmp {
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.rev)}
}

// currentTerm returns this node's term as coordinator, nil when it is not
// coordinator.
func (e *Engine) currentTerm() *coordTerm { return e.term.Load() }

// New returns an Engine for cfg. It does not touch etcd until Start.
func New(cfg Config) (*Engine, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: job engine needs an etcd client", ErrInvalid)
	}
	if cfg.Node == "" {
		return nil, fmt.Errorf("%w: job engine needs the node's name", ErrInvalid)
	}
	if cfg.Env == nil {
		return nil, fmt.Errorf("%w: job engine on node %s needs an Env", ErrInvalid, cfg.Node)
	}
	if cfg.LeaseTTL > 0 && cfg.LeaseTTL < time.Second {
		return nil, fmt.Errorf("%w: lease TTL %s is below 1s", ErrInvalid, cfg.LeaseTTL)
	}
	cfg.setDefaults()
	lease := cfg.Lease
	if lease == nil {
		lease = &ownLeases{cli: cfg.Client, ttl: cfg.LeaseTTL, node: cfg.Node}
	}
	return &Engine{cfg: cfg, lease: lease, log: cfg.Log.With("node", cfg.Node), types: map[string]Type{}}, nil
}

// Register adds a job type. It refuses a malformed name, phases or
// default schedule (ErrInvalid) and a name registered before (ErrExists).
// Every node must register the same types.
func (e *Engine) Register(t Type) error {
	name := t.Name()
	if !validName(name) {
		return fmt.Errorf("%w: job type name %q: use 1-32 of a-z, 0-9, '-', '_'", ErrInvalid, name)
	}
	if len(t.Phases()) == 0 {
		return fmt.Errorf("%w: job type %s has no phases", ErrInvalid, name)
	}
	if s := defaultSchedule(t); s != "" {
		if _, err := ParseCron(s); err != nil {
			return fmt.Errorf("default schedule of job type %s: %w", name, err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.types[name]; ok {
		return fmt.Errorf("%w: job type %s", ErrExists, name)
	}
	e.types[name] = t
	return nil
}

// typeOf returns the registered type name, or nil.
func (e *Engine) typeOf(name string) Type {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.types[name]
}

// typeNames returns the registered type names, sorted.
func (e *Engine) typeNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for n := range e.types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Start takes the node's lease (Config.Lease), starts the director and
// campaigns for coordinator. It returns once the lease is held; the rest
// runs until Stop. If the lease is ever lost (etcd unreachable past the
// TTL), the node drops its tasks (others reclaim them from their
// checkpoints), waits for the next lease and carries on.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		return fmt.Errorf("%w: engine on node %s already started", ErrInvalid, e.cfg.Node)
	}
	sess, err := e.lease.Current(ctx)
	if err != nil {
		return fmt.Errorf("job: lease for node %s: %w", e.cfg.Node, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	e.running, e.cancel, e.done = true, cancel, make(chan struct{})
	go e.life(runCtx, sess)
	return nil
}

// Stop stops the engine gracefully: managers stop at their next item,
// checkpoint and release their tasks, and the coordinator resigns; the
// lease is released (LeaseSource.Release: an own lease is revoked, the
// node's stays with the node). It returns when everything has stopped, or
// with an error when ctx ends first (without a quorum every final write
// waits out its own timeout: a node that must stop does not wait for all
// of them; what was not written is redone from the last checkpoint by
// whoever claims the tasks next). Stopping twice is a no-op.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.running {
		e.mu.Unlock()
		return nil
	}
	e.running = false
	cancel, done := e.cancel, e.done
	e.mu.Unlock()
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("job: engine on node %s did not stop in time (its final checkpoints and resignation may be lost): %w", e.cfg.Node, ctx.Err())
	}
}

// life runs the node's roles for one lease at a time until ctx ends.
func (e *Engine) life(ctx context.Context, sess *concurrency.Session) {
	defer close(e.done)
	for {
		lctx, lcancel := context.WithCancel(ctx)
		d := newDirector(e, sess)
		e.mu.Lock()
		e.dir = d
		e.mu.Unlock()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); d.run(lctx) }()
		go func() { defer wg.Done(); e.campaign(lctx, sess) }()
		select {
		case <-ctx.Done():
		case <-sess.Done():
			e.log.Warn("job engine lease lost; dropping tasks until the node has a new lease")
		}
		lcancel()
		wg.Wait()
		if ctx.Err() != nil {
			e.lease.Release(sess, true) // claims and candidacy go at once
			return
		}
		e.lease.Release(sess, false)
		for {
			var err error
			if sess, err = e.lease.Current(ctx); err == nil {
				break
			}
			e.log.Warn("job engine lease", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// campaign makes this node coordinator whenever it wins the election, until
// ctx ends or the session is lost.
func (e *Engine) campaign(ctx context.Context, sess *concurrency.Session) {
	el := concurrency.NewElection(sess, electionPrefix)
	for ctx.Err() == nil {
		if err := el.Campaign(ctx, e.cfg.Node); err != nil {
			if ctx.Err() != nil {
				return
			}
			e.log.Warn("coordinator election", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-sess.Done():
				return
			case <-time.After(e.cfg.Tick):
			}
			continue
		}
		// Failpoint job/after-elect: elected, not yet coordinating. A
		// crash leaves the election key until the node's lease expires;
		// then the next candidate takes over from etcd's state. Its error
		// gives the role up again: resign, campaign anew after a tick.
		if err := failpoint.Eval("job/after-elect"); err != nil {
			e.log.Warn("coordinator election: not taking over", "err", err)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.LeaseTTL)
			el.Resign(rctx)
			cancel()
			select {
			case <-ctx.Done():
				return
			case <-sess.Done():
				return
			case <-time.After(e.cfg.Tick):
			}
			continue
		}
		e.m.coordinatorTerms.Add(1)
		e.term.Store(&coordTerm{key: el.Key(), rev: el.Rev()})
		e.coordinator.Store(true)
		e.log.Info("job coordinator elected")
		c := newCoordinator(e, el.Key(), el.Rev())
		err := c.run(ctx, sess.Done())
		e.coordinator.Store(false)
		e.term.Store(nil)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.LeaseTTL)
		el.Resign(rctx) // no-op when the key is gone; lets a successor in at once on Stop
		cancel()
		// Failpoint job/after-resign: the election key is gone, a
		// successor may be coordinating already; a crash here leaves the
		// node's task claims until its lease expires. Only its crash and
		// panic actions mean something; an error is ignored.
		_ = failpoint.Eval("job/after-resign")
		if ctx.Err() != nil {
			return
		}
		e.log.Warn("job coordinator stepped down", "err", err)
	}
}

// now is the time the engine stamps on records.
func now() time.Time { return time.Now().UTC() }

// IsCoordinator reports whether this node is the coordinator now.
func (e *Engine) IsCoordinator() bool { return e.coordinator.Load() }

// Node returns the node's name.
func (e *Engine) Node() string { return e.cfg.Node }

// retry runs f up to 1+ItemRetries times, pausing between attempts,
// while ctx lives.
func (e *Engine) retry(ctx context.Context, f func() error) error {
	backoff := e.cfg.RetryBackoff
	var err error
	for attempt := 0; ; attempt++ {
		if err = f(); err == nil || ctx.Err() != nil || attempt >= e.cfg.ItemRetries {
			return err
		}
		e.m.itemRetries.Add(1)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
}
