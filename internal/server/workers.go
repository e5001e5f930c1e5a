package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/grpc"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/runner"
)

// A node's background work runs as workers of its runner (s.run, package
// runner), listed by `weft node workers`:
//
//	block-service  serves the block service (gRPC); one blocking step
//	admin-api      serves the admin API and /metrics (HTTP); one blocking step
//	etcd-member    waits for the embedded etcd member to fail (fatal); one blocking step
//	lease          renews the node's lease when it is lost (cluster.Session)
//	publish        publishes the drives' usage every UsageInterval
//	drainer        frees the drives' queued deletes (drainer.go)
//	throttle       ticks the job throttle every impact.DefaultThrottleInterval (jobs.go)
//	throttle-latency
//	               checks the clients' p99 for the job throttle every
//	               impact.LatencyCheckInterval (latency.go)
//	events         turns cluster events into jobs on the coordinator (package events)
//	callbacks      runs the administrators' callbacks for new events on the
//	               coordinator (job.CallbackWorker); idle on other nodes
//	qos-follow     follows the QoS configuration (qos.go)
//	qos-share      re-shares the cluster-wide QoS limits every second (qos.go)
//
// The runner is created first and stopped in shutdown after the job
// engine, before the lease is revoked and the etcd client closed: every
// worker but the two servers uses etcd, and the lease worker must not
// take a new lease after the revoke. The servers are shut down gracefully
// before, which ends their steps.

var (
	_ runner.Worker = serveWorker{}
	_ runner.Worker = memberWorker{}
	_ runner.Worker = publishWorker{}
	_ runner.Worker = drainWorker{}
	_ runner.Worker = throttleWorker{}
	_ runner.Worker = latencyWorker{}
)

// startWorkers starts the node's own workers (lease, throttle, events and
// callbacks are started with the session and the job engine).
func (s *Server) startWorkers() error {
	type start struct {
		name string
		w    runner.Worker
		o    runner.Options
	}
	every := s.cfg.UsageInterval
	starts := []start{
		{"block-service", serveWorker{s: s, what: "block service", serve: func() error { return s.grpc.Serve(s.grpcLis) }, stop: s.grpc.Stop}, runner.Options{}},
		{"admin-api", serveWorker{s: s, what: "admin API", serve: func() error { return s.admin.Serve(s.adminListener()) }, stop: func() { s.admin.Close() }}, runner.Options{}},
		// A failed publication is tried again at the next interval, as
		// before the runner; the drive keys would otherwise go stale.
		{"publish", publishWorker{s}, runner.Options{Idle: every, Delay: every, MinBackoff: every, MaxBackoff: every}},
		{"drainer", drainWorker{s}, runner.Options{Idle: drainIdle, MinBackoff: drainIdle, MaxBackoff: drainIdle}},
	}
	if s.member != nil {
		starts = append(starts, start{"etcd-member", memberWorker{s}, runner.Options{}})
	}
	for _, st := range starts {
		if _, err := s.run.Go(st.name, st.w, st.o); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	return nil
}

// serveWorker serves a listener in one blocking step, until the server is
// shut down (shutdown does it gracefully first; a stop of the runner
// forces it). An error other than the server closing, outside a shutdown,
// is fatal for the node.
type serveWorker struct {
	s     *Server
	what  string
	serve func() error
	stop  func()
}

func (w serveWorker) Step(ctx context.Context) (runner.State, error) {
	defer context.AfterFunc(ctx, w.stop)()
	err := w.serve()
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		return runner.Done, nil
	}
	select {
	case <-w.s.stop:
		return runner.Done, nil
	default:
	}
	err = fmt.Errorf("server: %s: %w", w.what, err)
	w.s.fatal <- err
	return runner.Done, err
}

// memberWorker waits, in one blocking step, for the embedded etcd member
// to fail, which is fatal for the node.
type memberWorker struct{ s *Server }

func (w memberWorker) Step(ctx context.Context) (runner.State, error) {
	select {
	case err := <-w.s.member.Err():
		select {
		case <-w.s.stop: // the member stopped with the node (Crash)
			return runner.Done, nil
		default:
		}
		err = fmt.Errorf("server: embedded etcd: %w", err)
		w.s.fatal <- err
		return runner.Done, err
	case <-ctx.Done():
		return runner.Done, nil
	}
}

// publishWorker is the node's "publish" worker: a step publishes every
// drive's usage and health, each within UsageInterval.
type publishWorker struct{ s *Server }

func (w publishWorker) Step(ctx context.Context) (runner.State, error) {
	ctx, cancel := context.WithTimeout(ctx, w.s.cfg.UsageInterval)
	defer cancel()
	var errs []error
	for _, d := range w.s.openDriveList() {
		errs = append(errs, w.s.publishUsage(ctx, d))
	}
	return runner.Idle, errors.Join(errs...)
}

// publishDrive publishes one drive's usage, or its error (drive down),
// and logs a failure.
func (s *Server) publishDrive(ctx context.Context, d *drive.Drive) {
	if err := s.publishUsage(ctx, d); err != nil {
		s.log.Warn("publish drive usage", "drive", d.ID(), "err", err)
	}
}
