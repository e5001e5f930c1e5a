package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// A synthetic domain for engine tests: each phase of a fake job type has
// items 0..n-1 (every key in its range is an item, so the domain is
// uniform), and the domain records every processing of every item with a
// global sequence number and the node that did it. Tests steer the engine
// through hooks called inside Process (block a node, fail an item, signal
// a point), never through sleeps.

// event is one processing of an item.
type event struct {
	seq   uint64
	node  string
	job   JobID
	phase int
	item  uint64
}

// domain is shared by every node of a test through their Env.
type domain struct {
	mu     sync.Mutex
	seq    uint64
	events []event
	dead   map[string]bool
	// hook runs before an item is recorded; an error fails the item, and
	// it may block (honouring ctx).
	hook func(ctx context.Context, node string, job JobID, phase int, item uint64) error
}

func newDomain() *domain { return &domain{dead: map[string]bool{}} }

func (d *domain) setHook(h func(ctx context.Context, node string, job JobID, phase int, item uint64) error) {
	d.mu.Lock()
	d.hook = h
	d.mu.Unlock()
}

// kill makes node's later Process calls block until cancelled and record
// nothing, as if the node had died: it returns the sequence number of the
// crash.
func (d *domain) kill(node string) uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dead[node] = true
	return d.seq
}

func (d *domain) now() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seq
}

func (d *domain) process(ctx context.Context, node string, job JobID, phase int, item uint64) error {
	d.mu.Lock()
	h := d.hook
	d.mu.Unlock()
	if h != nil {
		if err := h(ctx, node, job, phase, item); err != nil {
			return err
		}
	}
	d.mu.Lock()
	if d.dead[node] {
		d.mu.Unlock()
		<-ctx.Done()
		return ctx.Err()
	}
	defer d.mu.Unlock()
	d.seq++
	d.events = append(d.events, event{d.seq, node, job, phase, item})
	return nil
}

// snapshot returns the events so far.
func (d *domain) snapshot() []event {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]event(nil), d.events...)
}

// fakeEnv is a node's Env.
type fakeEnv struct {
	node string
	d    *domain
	log  *slog.Logger
}

func (e *fakeEnv) Node() string      { return e.node }
func (e *fakeEnv) Log() *slog.Logger { return e.log }

// fakeType is a job type of phases over the domain.
type fakeType struct {
	name   string
	set    ExclusionSet
	phases []Phase
	frees  bool
}

func (t *fakeType) Name() string      { return t.name }
func (t *fakeType) Set() ExclusionSet { return t.set }
func (t *fakeType) Phases() []Phase   { return t.phases }
func (t *fakeType) FreesSpace() bool  { return t.frees }

var (
	_ Type       = (*fakeType)(nil)
	_ SpaceSaver = (*fakeType)(nil)
)

// fakePhase has items 0..n-1 (or, if keys is set, those of keys below n,
// in order), split into tasks tasks (0: as suggested).
type fakePhase struct {
	name  string
	idx   int
	n     uint64
	tasks int
	keys  []uint64
	// serial makes its tasks serial (TaskSpec.Serial).
	serial bool
}

func (p *fakePhase) Name() string { return p.name }

func (p *fakePhase) Split(_ context.Context, _ Env, job *Job) ([]TaskSpec, error) {
	n := p.tasks
	if n == 0 {
		n = job.Parallelism
	}
	specs := SplitRange("", 0, p.n, n)
	for i := range specs {
		specs[i].Serial = p.serial
	}
	return specs, nil
}

func (p *fakePhase) Items(_ context.Context, _ Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	var out []uint64
	if p.keys != nil {
		for _, k := range p.keys {
			if k >= from && k < to && k < p.n && len(out) < limit {
				out = append(out, k)
			}
		}
		return out, nil
	}
	for k := from; k < to && k < p.n && len(out) < limit; k++ {
		out = append(out, k)
	}
	return out, nil
}

func (p *fakePhase) Process(ctx context.Context, env Env, job *Job, _ string, item uint64) (ItemResult, error) {
	fe := env.(*fakeEnv)
	if err := fe.d.process(ctx, fe.node, job.ID, p.idx, item); err != nil {
		return ItemResult{}, err
	}
	return ItemResult{Items: 1, Bytes: 100}, nil
}

// newFakeType returns a type whose phase i has sizes[i] items.
func newFakeType(name string, set ExclusionSet, sizes ...uint64) *fakeType {
	t := &fakeType{name: name, set: set}
	for i, n := range sizes {
		t.phases = append(t.phases, &fakePhase{name: fmt.Sprintf("p%d", i), idx: i, n: n})
	}
	return t
}

// testCluster is n engines ("nodes") on one etcd, each with its own client
// (so that a node can be killed by closing it) and lease.
type testCluster struct {
	t       *testing.T
	etcd    *etcdtest.Cluster
	d       *domain
	engines []*Engine
	clients []*clientv3.Client
	cfg     func(*Config)
	types   []Type
}

func testLogger() *slog.Logger {
	if os.Getenv("WEFT_JOB_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// newTestCluster starts n engines with short timings; tune adjusts each
// node's config.
func newTestCluster(t *testing.T, n int, tune func(*Config), types ...Type) *testCluster {
	t.Helper()
	c := &testCluster{t: t, etcd: etcdtest.NewCluster(t, 1), d: newDomain(), cfg: tune, types: types}
	for i := range n {
		c.add(fmt.Sprintf("n%d", i+1))
	}
	return c
}

func (c *testCluster) add(node string) *Engine {
	c.t.Helper()
	cli := c.etcd.Client(c.t)
	cfg := Config{
		Client: cli, Node: node, Env: &fakeEnv{node: node, d: c.d, log: testLogger()},
		Throttle: FixedThrottle{Workers: 2, Duty: 1}, Log: testLogger(),
		LeaseTTL: 2 * time.Second, Tick: 50 * time.Millisecond, CheckpointInterval: 100 * time.Millisecond,
		AllowanceInterval: 50 * time.Millisecond, StatusInterval: 100 * time.Millisecond,
		BatchSize: 16, MinSteal: 8, ItemRetries: -1, RetryBackoff: time.Millisecond,
		CancelGrace: 5 * time.Second, Parallelism: 4,
	}
	if c.cfg != nil {
		c.cfg(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, typ := range c.types {
		if err := e.Register(typ); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := e.Start(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { e.Stop(context.Background()) })
	c.engines = append(c.engines, e)
	c.clients = append(c.clients, cli)
	return e
}

// cut kills node i as a power cut would: its Process calls stop recording
// and its etcd client goes away without revoking its lease (which expires
// after the TTL); its goroutines run on, unable to do anything, until the
// test stops the engine. It returns the domain sequence number of the
// crash.
func (c *testCluster) cut(i int) uint64 {
	seq := c.d.kill(c.engines[i].Node())
	c.clients[i].Close()
	return seq
}

// waitFor polls cond until it holds, failing the test after 30 s.
func (c *testCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitState waits until job id is in one of states, through engine e.
func (c *testCluster) waitState(e *Engine, id JobID, states ...State) JobView {
	c.t.Helper()
	var v JobView
	defer func() {
		if c.t.Failed() {
			c.t.Logf("job %d last seen: %+v", id, v)
		}
	}()
	c.waitFor(fmt.Sprintf("job %d to be %v", id, states), func() bool {
		var err error
		v, err = e.Get(context.Background(), id)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return false
			}
			c.t.Fatalf("get job %d: %v", id, err)
		}
		for _, s := range states {
			if v.State == s {
				return true
			}
		}
		if v.State.Terminal() {
			c.t.Fatalf("job %d ended %s (%s), want %v", id, v.State, v.Reason, states)
		}
		return false
	})
	return v
}

// coverage counts, per item of a job's phase, the processings recorded
// after sequence number since.
func coverage(evs []event, job JobID, phase int, since uint64) map[uint64]int {
	out := map[uint64]int{}
	for _, ev := range evs {
		if ev.job == job && ev.phase == phase && ev.seq > since {
			out[ev.item]++
		}
	}
	return out
}

// requireAll fails unless every item 0..n-1 of the phase was processed.
func requireAll(t *testing.T, evs []event, job JobID, phase int, n uint64) {
	t.Helper()
	cov := coverage(evs, job, phase, 0)
	var missing []uint64
	for k := range n {
		if cov[k] == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
		t.Fatalf("job %d phase %d: %d of %d items never processed, first %v", job, phase, len(missing), n, missing[:min(10, len(missing))])
	}
}

// requireOnce fails unless every item of a phase was processed exactly
// once: what steals must guarantee when no node crashes.
func requireOnce(t *testing.T, evs []event, job JobID, phase int, n uint64) {
	t.Helper()
	requireAll(t, evs, job, phase, n)
	var twice []uint64
	for k, c := range coverage(evs, job, phase, 0) {
		if c > 1 {
			twice = append(twice, k)
		}
	}
	if len(twice) > 0 {
		sort.Slice(twice, func(i, j int) bool { return twice[i] < twice[j] })
		t.Fatalf("job %d phase %d: %d items processed more than once, first %v", job, phase, len(twice), twice[:min(10, len(twice))])
	}
}

// gate blocks the hooks that wait on it until opened.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate  { return &gate{ch: make(chan struct{})} }
func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }
func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
