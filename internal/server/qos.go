package server

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/runner"
)

// QoS on a node (package qos): the block service passes every block data
// I/O through s.qos (a qos.Gate counting into its qos.Stats); two workers
// keep it current:
//
//	qos-follow  follows the QoS configuration (cluster.QoSFollower)
//	qos-share   every QoSShareInterval: learns the pools of the node's
//	            drives and, while QoS is enabled, publishes the node's
//	            demand, reads the other nodes' and sets the gate to this
//	            node's shares (woken at once by a change); the same record
//	            carries the node's client p99 per pool for the job
//	            throttles (latency.go), published also with QoS disabled
//	            while the node has client I/O (and once more after), and
//	            read while it has jobs
//
// While the configuration limits the maintenance class, the node's job
// client sends its I/O through the block services, short-circuit reads
// and staged writes included (client.Config.LocalIO): QoS is enforced
// there.

// QoSShareInterval is how often a node re-shares the cluster-wide limits.
const QoSShareInterval = time.Second

// qosNode is a node's QoS state.
type qosNode struct {
	gate   *qos.Gate
	follow *cluster.QoSFollower
	// lat is the cluster's client latency as the job throttle reads it
	// (latency.go), kept current by qos-share.
	lat *latencyView
	// share is the qos-share worker's handle, woken when the configuration
	// changes so that a new limit holds at once.
	share *runner.Handle
	// sentP99 is whether the node's last published record had client
	// latency figures: it then publishes once more when they are gone, so
	// that the other nodes drop them at once rather than when they go
	// stale. Only the qos-share worker's step touches it.
	sentP99 bool
}

// newQoS makes the node's gate and follower (the workers start with
// startQoS).
func (s *Server) newQoS() *qosNode {
	q := &qosNode{gate: qos.NewGate(qos.NewStats())}
	q.lat = newLatencyView(s.cfg.Name, q.gate.Stats())
	q.follow = cluster.NewQoSFollower(s.store, s.log, func(qos.Config) {
		if q.share != nil {
			q.share.Wake()
		}
	})
	return q
}

// startQoS loads the configuration and starts the two workers.
func (s *Server) startQoS(ctx context.Context) error {
	if err := s.qos.follow.Load(ctx); err != nil {
		return err
	}
	h, err := s.run.Go("qos-share", qosShareWorker{s}, runner.Options{Idle: QoSShareInterval, MinBackoff: QoSShareInterval, MaxBackoff: QoSShareInterval})
	if err != nil {
		return err
	}
	s.qos.share = h
	_, err = s.run.Go("qos-follow", s.qos.follow, runner.Options{})
	return err
}

// qosShareWorker is the node's "qos-share" worker.
type qosShareWorker struct{ s *Server }

var _ runner.Worker = qosShareWorker{}

// Step re-shares: the node's pools, its demand published, everyone's
// read, its shares set. A failure keeps the shares it had.
func (w qosShareWorker) Step(ctx context.Context) (runner.State, error) {
	s := w.s
	ctx, cancel := context.WithTimeout(ctx, 2*QoSShareInterval)
	defer cancel()
	drives, err := s.store.ListDrives(ctx)
	if err != nil {
		return runner.Idle, err
	}
	pools := map[drive.ID]string{}
	classes := map[string]string{}
	var names []string
	for _, d := range drives {
		if d.Status == cluster.StatusRemoved {
			continue
		}
		classes[d.Pool] = d.Class
		if d.Node != s.cfg.Name {
			continue
		}
		pools[d.ID] = d.Pool
		if !slices.Contains(names, d.Pool) {
			names = append(names, d.Pool)
		}
	}
	slices.Sort(names)
	s.blocks.SetPools(pools)
	s.qos.lat.setClasses(classes)
	cfg := s.qos.follow.Current()
	// Limits to share: QoS enabled with a finite limit somewhere. Enabled
	// with every class unlimited, as disabled, the gate limits nothing
	// and the nodes neither publish nor read demand for it (a write to
	// etcd per node and second that would buy nothing).
	limited := slices.ContainsFunc(qos.Classes(), cfg.Limits)
	if !limited {
		// Nothing to share: the gate limits nothing. (When limits apply,
		// the first shares also count the records that nodes with client
		// I/O keep publishing for their latency, up to a second old.)
		s.qos.gate.SetLimits(nil)
	}
	now := time.Now()
	jobs := s.throttle != nil && s.throttle.Active()
	held := s.qos.gate.Limits()
	own := qos.NodeDemand{At: now.UTC(), Pools: names, Demand: qos.MeasureDemand(s.qos.gate.Stats(), s.qos.gate.Waiting(), now),
		ClientP99: s.qos.lat.ownFigures(), Held: qos.HeldList(held)}
	var errPub error
	if limited || len(own.ClientP99) > 0 || s.qos.sentP99 {
		errPub = s.session.PublishQoSDemand(ctx, own)
		if errPub == nil {
			s.qos.sentP99 = len(own.ClientP99) > 0
		}
	}
	if !limited && !jobs {
		s.qos.lat.update(nil)
		return runner.Idle, errPub
	}
	all, err := s.store.QoSDemands(ctx)
	if err != nil {
		return runner.Idle, errors.Join(errPub, err)
	}
	s.qos.lat.update(all)
	if limited {
		targets := qos.Shares(cfg, s.cfg.Name, names, all)
		s.qos.gate.SetLimits(qos.Bound(cfg, s.cfg.Name, names, all, targets, held))
	}
	return runner.Idle, errPub
}

// MaintenanceQueued is the number of the jobs' I/Os the node's QoS holds
// back now (impact.QueueSource): the job throttle does not add workers
// while it is 1 or more.
func (q *qosNode) MaintenanceQueued() float64 {
	var n int64
	for k, w := range q.gate.Waiting() {
		if k.Class == qos.Maintenance {
			n += w
		}
	}
	return float64(n)
}

// QoSSamples returns the node's per-second QoS statistics of the last
// seconds seconds (admin.QoSNode).
func (s *Server) QoSSamples(seconds int) []qos.Sample {
	return s.qos.gate.Stats().Seconds(time.Now(), seconds)
}

// QoSFine returns the node's fine QoS statistics of the last seconds
// seconds and their overflow (admin.QoSNode).
func (s *Server) QoSFine(seconds int) ([]qos.FineSample, int64) {
	return s.qos.gate.Stats().FineSeconds(time.Now(), seconds)
}

// QoSLimits returns the shares of the limits the node holds now
// (admin.QoSNode).
func (s *Server) QoSLimits() map[qos.Key]qos.Limit { return s.qos.gate.Limits() }
