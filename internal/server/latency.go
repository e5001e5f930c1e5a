package server

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/impact"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/runner"
)

// Client latency for the job throttle.
//
// Each node's block service measures the drive time of the clients'
// (other-class) block I/O per pool (qos.Stats.ClientP99: the p99 over the
// second in progress and the one before). The throttle of every node
// reads the figures of every node, not only its own: a job's workers on
// one node read and write the drives of all the nodes serving a pool, so
// a spike on any of them may be theirs to relieve, and the client whose
// I/O suffers may be served by a node where the job has little to do.
//
//   - Own figure: read from the node's Stats at each check, as fresh as it
//     gets.
//   - Others' figures: the qos-share worker publishes the node's figures in
//     its QoS demand record once a second while QoS is enabled (as before)
//     or the node served enough client I/O to have a figure (and once
//     more when it has none left, so that the others drop it at once), and
//     reads everyone's while QoS is enabled or the node's throttle has
//     jobs: a cluster without client I/O and without QoS writes nothing, one
//     without jobs reads nothing. A remote figure is at most about a second
//     older than its node's.
//   - The pool's drive class (which selects a level's target) comes from
//     the drive records the qos-share worker lists anyway.
//
// The "throttle-latency" worker calls the controller's CheckLatency every
// impact.LatencyCheckInterval with them (see impact/throttle_latency.go
// for what it does).

// latencyStale is how long a remote node's figures count after its record
// last changed: three of its publications missed. The age is measured on
// this node's clock from when the record was seen to change, so the
// nodes' clocks need not agree.
const latencyStale = 3 * QoSShareInterval

// latencyView is what the node knows of the cluster's client latency.
//
// Locking: mu guards everything; ClientLatency holds it while it copies.
type latencyView struct {
	node  string
	stats *qos.Stats
	now   func() time.Time

	mu      sync.Mutex
	classes map[string]string // pool → drive class
	remote  map[string]remoteLatency
}

// remoteLatency is one other node's last published figures.
type remoteLatency struct {
	at   time.Time // the record's time, as published
	seen time.Time // when this node first saw a record with that time
	figs []qos.PoolLatency
}

var _ impact.LatencySource = (*latencyView)(nil)

func newLatencyView(node string, stats *qos.Stats) *latencyView {
	return &latencyView{node: node, stats: stats, now: time.Now, classes: map[string]string{}, remote: map[string]remoteLatency{}}
}

// setClasses records the drive class of each pool.
func (v *latencyView) setClasses(classes map[string]string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.classes = classes
}

// update takes the other nodes' figures from the demand records just
// read; a node without a record is forgotten.
func (v *latencyView) update(records []qos.NodeDemand) {
	now := v.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	next := make(map[string]remoteLatency, len(records))
	for _, r := range records {
		if r.Node == v.node {
			continue
		}
		seen := now
		if old, ok := v.remote[r.Node]; ok && old.at.Equal(r.At) {
			seen = old.seen
		}
		next[r.Node] = remoteLatency{at: r.At, seen: seen, figs: r.ClientP99}
	}
	v.remote = next
}

// ClientLatency returns this node's figures, measured now, and the other
// nodes' last published ones that are not stale (impact.LatencySource).
func (v *latencyView) ClientLatency() []impact.PoolLatency {
	now := v.now()
	own := v.stats.ClientP99(now)
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []impact.PoolLatency
	add := func(node string, l qos.PoolLatency) {
		out = append(out, impact.PoolLatency{Pool: l.Pool, Class: v.classes[l.Pool], Node: node, P99: l.P99})
	}
	for _, pool := range slices.Sorted(maps.Keys(own)) {
		add(v.node, own[pool])
	}
	for _, node := range slices.Sorted(maps.Keys(v.remote)) {
		r := v.remote[node]
		if now.Sub(r.seen) > latencyStale {
			continue
		}
		for _, l := range r.figs {
			add(node, l)
		}
	}
	return out
}

// ownFigures returns the node's figures to publish, by pool name.
func (v *latencyView) ownFigures() []qos.PoolLatency {
	own := v.stats.ClientP99(v.now())
	out := make([]qos.PoolLatency, 0, len(own))
	for _, pool := range slices.Sorted(maps.Keys(own)) {
		out = append(out, own[pool])
	}
	return out
}

// latencyWorker is the node's "throttle-latency" worker: a step is one
// client latency check of the job throttle (in memory: the figures were
// fetched by qos-share).
type latencyWorker struct{ ctl *impact.Controller }

var _ runner.Worker = latencyWorker{}

func (w latencyWorker) Step(context.Context) (runner.State, error) {
	w.ctl.CheckLatency()
	return runner.Idle, nil
}
