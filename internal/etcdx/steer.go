package etcdx

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/weftfs/weft/internal/runner"
)

// How a client is steered off members that would hold its requests (see
// Steerer and docs/architecture.md, "Partitions"):
//
//   - SteerInterval: every member is asked for its status this often.
//   - SteerProbeTimeout: a member that does not answer within this long is
//     left out until it answers again (a cut-off member; the connection's
//     keepalive gives up on it only after 2 s).
//   - SteerMaxLag: a member whose applied index is more than this many
//     entries behind the highest commit index any member reports is left
//     out. A member in step lags by a few entries (the time between two
//     probes' answers under load: tens); one back from a partition lags by
//     everything committed meanwhile (tens of thousands after 45 s under
//     load) and holds every request sent to it until it has received and
//     applied a snapshot of the database — seconds for a database of
//     hundreds of MiB. etcd itself refuses requests only past 5000.
const (
	SteerInterval     = 500 * time.Millisecond
	SteerProbeTimeout = time.Second
	SteerMaxLag       = 1000
)

// Steerer keeps a client's requests on the etcd members that can serve
// them at once: every SteerInterval it asks each of the client's
// endpoints for its status and sets the client's endpoints to those that
// answered, have a leader and have applied nearly everything committed.
// When no member qualifies (a node cut off from the others asks its own
// member, which has no leader) the client keeps every endpoint: steering
// never leaves it with nothing to try.
//
// Without it, a member that returns from a partition is used again by the
// balancer as soon as its connection is back, about a second after the
// heal, while it is still being sent a snapshot: reads sent to it wait for
// their 3 s attempt timeout, writes until it has applied the snapshot, and
// every mount and node stalled for 4–5 s (TestPartitionHeal).
//
// A Steerer is a runner.Worker: Steer starts one. It probes over
// connections of its own, one per endpoint, so that it can ask the members
// it has taken out of the client's balancer; they are closed with the
// client.
//
// Locking: mu guards conns and closed; the rest is the stepping
// goroutine's.
type Steerer struct {
	cli *clientv3.Client
	all []string // every endpoint, in the client's order
	log *slog.Logger

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // by endpoint, dialled on first use
	closed bool                        // the client is closed

	out map[string]string // why each left-out endpoint is out
}

// Steer starts a Steerer of cli (over the endpoints it has now) as the
// worker "etcd-steer" of run, if cli has more than one endpoint to choose
// from.
func Steer(run *runner.Runner, cli *clientv3.Client, log *slog.Logger) error {
	if len(cli.Endpoints()) < 2 {
		return nil
	}
	if _, err := run.Go("etcd-steer", NewSteerer(cli, log), runner.Options{Idle: SteerInterval}); err != nil {
		return fmt.Errorf("etcdx: %w", err)
	}
	return nil
}

// NewSteerer returns a Steerer of cli over the endpoints cli has now.
func NewSteerer(cli *clientv3.Client, log *slog.Logger) *Steerer {
	if log == nil {
		log = slog.Default()
	}
	all := cli.Endpoints()
	s := &Steerer{cli: cli, all: all, log: log, conns: map[string]*grpc.ClientConn{}, out: map[string]string{}}
	context.AfterFunc(cli.Ctx(), s.closeConns)
	return s
}

// closeConns closes the probe connections, for good.
func (s *Steerer) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.conns {
		c.Close()
	}
	clear(s.conns)
}

var _ runner.Worker = (*Steerer)(nil)

// Step probes every member once and sets the client's endpoints.
func (s *Steerer) Step(ctx context.Context) (runner.State, error) {
	probes := AskStatus(ctx, s.all, SteerProbeTimeout, s.status)
	if ctx.Err() != nil || s.cli.Ctx().Err() != nil {
		return runner.Done, nil
	}
	fit, out := choose(s.all, probes, SteerMaxLag)
	if len(fit) == 0 {
		// Nothing qualifies: try everything, as without steering.
		if len(s.out) < len(s.all) {
			s.log.Warn("no etcd member can serve this client's requests at once: using every one", "endpoints", s.all, "why", out)
		}
		fit = s.all
	} else {
		for _, ep := range s.all {
			why, was := s.out[ep]
			switch now, isOut := out[ep]; {
			case isOut && !was:
				s.log.Info("etcd member left out of this client's requests", "endpoint", ep, "why", now)
			case !isOut && was:
				s.log.Info("etcd member used again", "endpoint", ep, "was", why)
			}
		}
	}
	s.out = out
	if !slices.Equal(fit, s.cli.Endpoints()) {
		s.cli.SetEndpoints(fit...)
	}
	return runner.Idle, nil
}

// status asks ep's member for its status over the probe connection.
func (s *Steerer) status(ctx context.Context, ep string) (*pb.StatusResponse, error) {
	conn, err := s.conn(ep)
	if err != nil {
		return nil, err
	}
	return pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{})
}

// conn returns the probe connection to ep, dialling it the first time
// (the dial does not wait for the member).
func (s *Steerer) conn(ep string) (*grpc.ClientConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("etcdx: the client is closed")
	}
	if c := s.conns[ep]; c != nil {
		return c, nil
	}
	c, err := s.cli.Dial(ep)
	if err != nil {
		return nil, fmt.Errorf("etcdx: dial %s: %w", ep, err)
	}
	s.conns[ep] = c
	return c, nil
}

// choose returns the endpoints (in the order of all) whose member
// answered, has a leader, and has applied all but maxLag of the highest
// commit index any member with a leader reported; and, for each of the
// others, why it is out.
func choose(all []string, probes []MemberStatus, maxLag uint64) (fit []string, out map[string]string) {
	var top uint64
	by := map[string]MemberStatus{}
	for _, p := range probes {
		by[p.Endpoint] = p
		if p.Err == nil && p.Resp.Leader != 0 {
			top = max(top, p.Resp.RaftIndex)
		}
	}
	out = map[string]string{}
	for _, ep := range all {
		p, ok := by[ep]
		switch {
		case !ok:
			out[ep] = "not probed"
		case p.Err != nil:
			out[ep] = fmt.Sprintf("no answer to a status request: %v", p.Err)
		case p.Resp.Leader == 0:
			out[ep] = "it has no leader"
		case p.Resp.RaftAppliedIndex+maxLag < top:
			applied := p.Resp.RaftAppliedIndex
			out[ep] = fmt.Sprintf("catching up: applied index %d, %d behind the commit index %d", applied, top-applied, top)
		default:
			fit = append(fit, ep)
		}
	}
	return fit, out
}
