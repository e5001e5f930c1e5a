package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/events"
	"github.com/weftfs/weft/internal/impact"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/jobs"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
	"github.com/weftfs/weft/internal/runner"
)

// jobEnv is what job phases get on this node: it implements job.Env and
// jobs.Env.
type jobEnv struct {
	node      string
	log       *slog.Logger
	meta      *meta.Meta
	restriper *restripe.Restriper
	cluster   *cluster.Store
	files     *client.Client
	jobs      *job.Engine // set once the engine exists

	// dial connects to a node's block service as this node.
	dial func(addr string) (*block.Client, error)

	mu    sync.Mutex
	conns map[string]*block.Client // by gRPC address
}

var (
	_ jobs.Env        = (*jobEnv)(nil)
	_ jobs.TierEnv    = (*jobEnv)(nil)
	_ jobs.FsckEnv    = (*jobEnv)(nil)
	_ job.LeaseSource = (*cluster.Session)(nil)
)

func (e *jobEnv) Node() string                   { return e.node }
func (e *jobEnv) Log() *slog.Logger              { return e.log }
func (e *jobEnv) Meta() *meta.Meta               { return e.meta }
func (e *jobEnv) Restriper() *restripe.Restriper { return e.restriper }
func (e *jobEnv) Cluster() *cluster.Store        { return e.cluster }
func (e *jobEnv) Files() *client.Client          { return e.files }

// JobData is the job engine's per-job data.
func (e *jobEnv) JobData() jobs.TierData { return e.jobs }

// RecordEvent records ev in the job engine's event log.
func (e *jobEnv) RecordEvent(ctx context.Context, ev job.Event) (job.Event, error) {
	return e.jobs.RecordEvent(ctx, ev)
}

// Blocks returns a cached client of node's block service.
func (e *jobEnv) Blocks(ctx context.Context, node string) (*block.Client, error) {
	nodes, err := e.cluster.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	addr := ""
	for _, n := range nodes {
		if n.Name == node {
			addr = n.GRPCAddr
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("server: no node %q in the cluster", node)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.conns[addr]; c != nil {
		return c, nil
	}
	c, err := e.dial(addr)
	if err != nil {
		return nil, err
	}
	if e.conns == nil {
		e.conns = map[string]*block.Client{}
	}
	e.conns[addr] = c
	return c, nil
}

// close closes the cached block clients.
func (e *jobEnv) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.conns {
		_ = c.Close()
	}
	e.conns = nil
}

// driveLoads adapts the node's drive I/O counters to the throttle: the
// rates between the previous call's snapshots and now.
type driveLoads struct {
	drives func() []*drive.Drive // the node's drives now (drives are added at run time)

	mu   sync.Mutex
	prev map[drive.ID]drive.Counters
}

func (d *driveLoads) DriveLoads() []impact.DriveLoad {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.prev == nil {
		d.prev = map[drive.ID]drive.Counters{}
	}
	var out []impact.DriveLoad
	for _, dr := range d.drives() {
		cur := dr.Counters()
		prev, ok := d.prev[dr.ID()]
		d.prev[dr.ID()] = cur
		if !ok {
			continue
		}
		r := cur.Since(prev)
		out = append(out, impact.DriveLoad{
			Drive: dr.ID().String(), Class: string(dr.Identity().Class),
			IOPS: r.Read.IOPS + r.Write.IOPS, QueueDepth: r.Read.QueueDepth + r.Write.QueueDepth,
		})
	}
	return out
}

// startJobs starts the node's job engine: its throttle (impact policies
// over the node's CPU and drive load) and its engine member (director, and
// coordinator when elected), with weft's job types registered.
func (s *Server) startJobs(ctx context.Context) error {
	sampler := impact.NewSampler(impact.ProcStat{}, &driveLoads{drives: s.openDriveList})
	sampler.SetQueueSource(s.qos) // a job whose I/O QoS queues gets no more workers
	ctl, err := impact.NewController(impact.ControllerConfig{
		Sampler:  sampler,
		Policies: impact.NewPolicyStore(s.etcd),
		Logger:   s.log,
		Latency:  s.qos.lat, // the cluster's client p99 per pool (latency.go)
	})
	if err != nil {
		return err
	}
	s.throttle = ctl
	rs, err := restripe.New(restripe.Config{Meta: s.meta, Client: s.files, Log: s.log})
	if err != nil {
		return err
	}
	env := &jobEnv{node: s.cfg.Name, log: s.log.With("role", "job"), meta: s.meta, restriper: rs, cluster: s.store, files: s.files, dial: s.dialBlocks}
	s.jobEnv = env
	if s.jobs, err = job.New(job.Config{Client: s.etcd, Node: s.cfg.Name, Env: env, Throttle: ctl, Log: s.log, Lease: s.session}); err != nil {
		return err
	}
	env.jobs = s.jobs
	if err := jobs.Register(s.jobs); err != nil {
		return err
	}
	if err := ctl.Tick(ctx); err != nil {
		s.log.Warn("throttle", "err", err)
	}
	// The throttle ticks at its interval whether a tick failed or not: a
	// tick moves each job's workers one step, so ticking faster after
	// errors would move them faster.
	every := impact.DefaultThrottleInterval
	if _, err := s.run.Go("throttle", throttleWorker{ctl}, runner.Options{Idle: every, Delay: every, MinBackoff: every, MaxBackoff: every}); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	// Client latency is checked between ticks, and can only cut (see
	// impact/throttle_latency.go): the tick still decides growth.
	every = impact.LatencyCheckInterval
	if _, err := s.run.Go("throttle-latency", latencyWorker{ctl}, runner.Options{Idle: every, Delay: every, MinBackoff: every, MaxBackoff: every}); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if err := s.jobs.Start(ctx); err != nil {
		return err
	}
	every = events.Interval(s.cfg.RepairGrace)
	watcher := events.New(events.Config{Store: s.store, Jobs: s.jobs, RepairGrace: s.cfg.RepairGrace, Log: s.log,
		Allocated: func(ctx context.Context) (int64, error) {
			st, err := s.meta.StatFS(ctx)
			return st.Total.Allocated, err
		},
		Protection: s.protection})
	if _, err := s.run.Go("events", watcher, runner.Options{Idle: every, Delay: every, MinBackoff: every, MaxBackoff: every}); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	// Every node runs it; it acts only while the node is coordinator.
	every = job.CallbackInterval
	if _, err := s.run.Go("callbacks", s.jobs.CallbackWorker(), runner.Options{Idle: every, Delay: every}); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// throttleWorker is the node's "throttle" worker: a step is one tick of
// the job throttle (sample the load, refresh the policies, move each job's
// workers one step).
type throttleWorker struct{ ctl *impact.Controller }

func (w throttleWorker) Step(ctx context.Context) (runner.State, error) {
	if err := w.ctl.Tick(ctx); err != nil {
		return runner.Idle, fmt.Errorf("job throttle: tick: %w", err)
	}
	return runner.Idle, nil
}

// watchedIndexEntries bounds what the events worker reads of the
// protection index at each check (every few seconds): it needs to know
// whether the index is empty and how new its entries are, not the exact
// count of a large one.
const watchedIndexEntries = 10000

// protection reads the namespace's protection index for the events
// worker.
func (s *Server) protection(ctx context.Context) (events.Protection, error) {
	st, err := s.meta.ProtectionStats(ctx, watchedIndexEntries)
	return events.Protection{Files: st.UnderFiles, Stripes: st.UnderStripes, Bytes: st.UnderBytes, Newest: st.NewestUnder,
		Incomplete: st.Incomplete, IncompleteSince: st.IncompleteSince}, err
}
