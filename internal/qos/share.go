package qos

import (
	"slices"
	"time"
)

// FloorFraction is the part of a cluster-wide limit that is split evenly
// among the nodes serving the pool whatever their demand, so that a node
// whose demand starts is not held at zero for the second until its
// demand is seen; the rest is split in proportion to demand.
const FloorFraction = 0.1

// KeyDemand is a node's demand on one Key over the last second: the I/Os
// and bytes it served plus those waiting in QoS when measured.
type KeyDemand struct {
	Pool  string  `json:"pool"`
	Class Class   `json:"class"`
	Ops   float64 `json:"ops"`
	Bytes float64 `json:"bytes"`
}

// DemandVersion is the "v" of NodeDemand records.
const DemandVersion = 1

// NodeDemand is what a node publishes once a second (under its lease):
// the pools its drives are in, its demand on each Key it saw I/O on, and
// the client latency of each pool it served enough client I/O of
// (Stats.ClientP99), for the job throttles of the other nodes.
//
// ClientP99 was added without a version bump: a reader that does not
// know it loses nothing it used; it only does not see the latency. Held
// likewise: a record without it (an older node, or one that holds no
// limit yet) is counted as holding its Share (Bound).
type NodeDemand struct {
	V         int           `json:"v"`
	Node      string        `json:"node"`
	At        time.Time     `json:"at"`
	Pools     []string      `json:"pools"`
	Demand    []KeyDemand   `json:"demand,omitempty"`
	ClientP99 []PoolLatency `json:"client_p99,omitempty"`
	// Held are the shares the node held when it published (Gate.Limits).
	Held []KeyLimit `json:"held,omitempty"`
}

// KeyLimit is a share held on one Key.
type KeyLimit struct {
	Pool  string `json:"pool"`
	Class Class  `json:"class"`
	Limit
}

// HeldList is held as NodeDemand.Held, sorted.
func HeldList(held map[Key]Limit) []KeyLimit {
	out := make([]KeyLimit, 0, len(held))
	for k, l := range held {
		out = append(out, KeyLimit{Pool: k.Pool, Class: k.Class, Limit: l})
	}
	slices.SortFunc(out, func(a, b KeyLimit) int {
		if a.Pool != b.Pool {
			return cmpStr(a.Pool, b.Pool)
		}
		return cmpStr(string(a.Class), string(b.Class))
	})
	return out
}

// MeasureDemand returns the demand of the last complete second before now
// (what Stats counted then, both directions) plus the I/Os waiting now.
// A waiting I/O counts as one op and no bytes (its size is not kept).
func MeasureDemand(s *Stats, waiting map[Key]int64, now time.Time) []KeyDemand {
	sum := map[Key]*KeyDemand{}
	get := func(k Key) *KeyDemand {
		if sum[k] == nil {
			sum[k] = &KeyDemand{Pool: k.Pool, Class: k.Class}
		}
		return sum[k]
	}
	for _, smp := range s.Seconds(now, 1) {
		d := get(Key{smp.Pool, smp.Class})
		d.Ops += float64(smp.Ops)
		d.Bytes += float64(smp.Bytes)
	}
	for k, n := range waiting {
		get(k).Ops += float64(n)
	}
	out := make([]KeyDemand, 0, len(sum))
	for _, d := range sum {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b KeyDemand) int {
		if a.Pool != b.Pool {
			return cmpStr(a.Pool, b.Pool)
		}
		return cmpStr(string(a.Class), string(b.Class))
	})
	return out
}

// Share returns one node's share of a cluster-wide limit: with n nodes
// serving the pool (all, the demand of each, own's among them), each
// gets limit × FloorFraction / n, and the rest is split in proportion to
// demand (evenly when nobody has any). The shares of the n nodes sum to
// limit. A lone node (n ≤ 1) gets the whole limit.
func Share(limit, own float64, all []float64) float64 {
	n := float64(len(all))
	if n <= 1 {
		return limit
	}
	var total float64
	for _, d := range all {
		total += max(d, 0)
	}
	if total <= 0 {
		return limit / n
	}
	floor := limit * FloorFraction / n
	return floor + (limit-n*floor)*max(own, 0)/total
}

// Shares returns the limits node holds under cfg: for each pool its drives
// are in (pools) and each class that cfg limits there, its Share of each
// axis among the nodes whose demand records (demands, node's own
// included or not) say they serve the pool. It is empty when cfg is not
// enabled.
func Shares(cfg Config, node string, pools []string, demands []NodeDemand) map[Key]Limit {
	out := map[Key]Limit{}
	if !cfg.Enabled {
		return out
	}
	for _, p := range pools {
		for _, c := range Classes() {
			l := cfg.Resolve(p, c)
			if l.Unlimited() {
				continue
			}
			var ops, bytes []float64
			var ownOps, ownBytes float64
			self := false
			for _, nd := range demands {
				if !slices.Contains(nd.Pools, p) {
					continue
				}
				var d KeyDemand
				for _, kd := range nd.Demand {
					if kd.Pool == p && kd.Class == c {
						d = kd
					}
				}
				ops, bytes = append(ops, d.Ops), append(bytes, d.Bytes)
				if nd.Node == node {
					self, ownOps, ownBytes = true, d.Ops, d.Bytes
				}
			}
			if !self { // not published yet: count this node with no demand
				ops, bytes = append(ops, 0), append(bytes, 0)
			}
			var s Limit
			if l.IOPS > 0 {
				s.IOPS = Share(l.IOPS, ownOps, ops)
			}
			if l.BytesPerSec > 0 {
				s.BytesPerSec = Share(l.BytesPerSec, ownBytes, bytes)
			}
			out[Key{Pool: p, Class: c}] = s
		}
	}
	return out
}

// Bound returns the shares node may hold now, given the shares it aims at
// (targets, from Shares) and those it holds (own): a share falls to its
// target at once, but rises only into the slack — the cluster-wide limit
// less what every node holds (own, and the others' Held as they last
// published it) — and only by its target's part of the slack. Targets are
// computed from demand records up to a second old, so that at the start
// of a load every node may see only its own demand and aim at nearly the
// whole limit; without the bound their shares summed to up to n times the
// limit for that second. A share rises to its target within a round or
// two (a node aiming lower releases first). A node whose record has no
// Held is counted as holding its Share of the records' demand.
func Bound(cfg Config, node string, pools []string, demands []NodeDemand, targets, own map[Key]Limit) map[Key]Limit {
	out := make(map[Key]Limit, len(targets))
	for k, t := range targets {
		l := cfg.Resolve(k.Pool, k.Class)
		var others Limit
		for _, nd := range demands {
			if nd.Node == node || !slices.Contains(nd.Pools, k.Pool) {
				continue
			}
			h, ok := heldOf(nd, k)
			if !ok {
				h = Shares(cfg, nd.Node, []string{k.Pool}, demands)[k]
			}
			others.IOPS += h.IOPS
			others.BytesPerSec += h.BytesPerSec
		}
		o := own[k]
		out[k] = Limit{
			IOPS:        bound(l.IOPS, t.IOPS, o.IOPS, others.IOPS),
			BytesPerSec: bound(l.BytesPerSec, t.BytesPerSec, o.BytesPerSec, others.BytesPerSec),
		}
	}
	return out
}

// heldOf is the share nd says it held on k.
func heldOf(nd NodeDemand, k Key) (Limit, bool) {
	for _, h := range nd.Held {
		if h.Pool == k.Pool && h.Class == k.Class {
			return h.Limit, true
		}
	}
	return Limit{}, false
}

// bound is one axis of Bound: limit is the cluster-wide one (0: none),
// target the share aimed at, own the share held (0: none), others what
// the other nodes hold.
func bound(limit, target, own, others float64) float64 {
	if limit <= 0 || target <= 0 {
		return target
	}
	if target <= own {
		return target
	}
	slack := max(limit-own-others, 0)
	// Never 0: a zero Limit is "unlimited".
	return max(min(target, own+slack*target/limit), limit*minShare)
}

// minShare is the least part of a limit a node's share falls to while it
// waits for slack (a share of 0 would read as unlimited).
const minShare = 1e-3
