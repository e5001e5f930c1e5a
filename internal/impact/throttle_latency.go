package impact

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Client latency: the controller's fast path.
//
// The tick (DefaultThrottleInterval) moves workers from the node's CPU and
// drive load, which a job's own I/O is part of and which it reads over
// seconds. A client's latency is the signal the throttle exists for, and a
// client load spike should clear a low job out of the way in a second or
// two, not in three ticks. So the server calls CheckLatency every
// LatencyCheckInterval with the latest client p99 of every pool on every
// node (LatencySource), and CheckLatency may only cut:
//
//   - A job whose policy sets a target for a pool (Policy.ClientTarget,
//     by the pool's drive class) that some node's p99 passes is cut at
//     once by the law's Backoff (not below its level's minimum), and cut
//     again every LatencySettle while a pool stays over: the time the
//     figures need to show the effect of a cut (their window, plus the
//     second a remote figure takes to be published).
//   - A job already at its level's minimum that keeps the clients over
//     target has its I/O slowed instead, if its level allows
//     (Level.MinRate: low does): its transfers on the node go through a
//     byte rate (job.Allowance.BytesPerSec, spent evenly: runner.Spend),
//     LatencyRateStart of the class at the first such cut, halved at each
//     next one, not below the level's MinRate. Fewer workers
//     space a job's work out; they do not soften it: each stripe is still
//     read, rebuilt and written at full speed, and a client's latency
//     tail is what it meets during those bursts. On the test machine a
//     repair at a quarter worker and one at a sixteenth raised a steady
//     reader's p99 alike (1.3×); the same repair's I/O held to 20 MB/s
//     evenly, 1.08×. The return below lifts the rate with the workers.
//   - Meanwhile the tick may still cut the job on load, never grow it.
//   - Once every pool has stayed at or under its target for LatencyHold,
//     the job gets back the workers it had before the first cut (within
//     its level's bounds), unless QoS holds back maintenance I/O at the
//     last tick: then it stays where it is and the tick decides, as for
//     any growth. A figure above the target during the hold starts it
//     again, so a p99 going back and forth across the target holds the
//     job down rather than making it flap.
//   - A back-off that starts within LatencyRelapse of the job's last rise
//     in workers (a tick's growth or a return) is put down to that rise:
//     the job returns only to the workers it had before it, not to the
//     level that put the clients over target, and the tick does not grow
//     it for LatencyProbe after that return. So a job whose own I/O is
//     what slows the clients settles just under that level, probing it
//     again every half minute, rather than swinging between it and half
//     of it every few seconds. A client spike that happens to start so
//     soon after a rise costs the job that one step for half a minute.
//
// Every node's figure counts, not only this node's: a job's I/O touches
// the drives of every node serving a pool, so a spike on any of them is
// one this node's workers may be feeding.

// LatencyCheckInterval is how often the server should call CheckLatency:
// with client p99 figures a second or less old, a job backs off within
// about 1.5 s of a client latency spike anywhere in the cluster.
const LatencyCheckInterval = 500 * time.Millisecond

// LatencySettle is the least time between two latency cuts of one job.
const LatencySettle = 2 * time.Second

// LatencyHold is how long every pool must stay at or under a job's target
// before the job gets its workers back. With figures up to 2 s behind
// their I/O plus a second to be published, a job returns about 6 s after
// a spike ends.
const LatencyHold = 3 * time.Second

// LatencyRelapse is how soon after a rise in a job's workers a back-off
// is put down to that rise: the time the new workers' I/O takes to show
// in the figures (within their 2 s window, a second to be published, half
// a second to be checked), with some room.
const LatencyRelapse = 5 * time.Second

// LatencyRateStart is the byte rate per node of a job's first cut below
// its level's minimum (see the package comment above), by the drive
// class of the pool whose clients are over target: about a tenth of
// what one such drive moves, so the first cut is already gentle, and
// each further cut halves it.
func LatencyRateStart(class string) float64 {
	switch class {
	case DriveClassNVMe:
		return 128 << 20
	case DriveClassSSD:
		return 32 << 20
	}
	return 8 << 20
}

// LatencyRateMin is level low's MinRate, the lowest byte rate per node a
// latency back-off cuts a job to: a repair still moves 1 GiB in a
// quarter hour per node.
const LatencyRateMin = 1 << 20

// LatencyProbe is how long the tick does not grow a job after a return
// from a back-off put down to the job's own rise (see LatencyRelapse):
// the job probes the level that slowed the clients at most that often.
const LatencyProbe = 30 * time.Second

// PoolLatency is one node's client latency on one pool.
type PoolLatency struct {
	Pool string
	// Class is the drive class of the pool ("nvme", "ssd", "hdd"),
	// which selects the level's target.
	Class string
	Node  string
	// P99 is the 99th percentile of the clients' block I/O time at the
	// node's drives of the pool, over the last second or two.
	P99 time.Duration
}

// String is "pool P (CLASS, node N) p99 D".
func (l PoolLatency) String() string {
	return fmt.Sprintf("pool %s (%s, node %s) p99 %v", l.Pool, l.Class, l.Node, l.P99)
}

// LatencySource reports the latest client latency of the pools: at most
// one figure per pool and node, none older than a few seconds, none for
// a pool without client I/O. It must be cheap and must not block on I/O.
type LatencySource interface {
	ClientLatency() []PoolLatency
}

// latencyState is a job's client latency back-off.
type latencyState struct {
	over    bool      // in a back-off: no growth until it ends
	before  float64   // workers before its first cut
	cut     time.Time // the last cut
	clear   time.Time // since when every pool is under target; zero while one is over
	desc    string    // the last "client p99 … > target …"
	relapse string    // why before is lower than the workers at the first cut; "" if it is not
	// noGrowth is until when the tick does not grow the job (after a
	// return from a relapse), and noGrowthWhy says why.
	noGrowth    time.Time
	noGrowthWhy string
}

// CheckLatency reads the client latency figures and cuts, or gives back,
// the workers of each job as the package comment above says. It does
// nothing without a LatencySource. Call it every LatencyCheckInterval.
func (c *Controller) CheckLatency() {
	if c.latency == nil {
		return
	}
	figs := c.latency.ClientLatency()
	slices.SortFunc(figs, func(a, b PoolLatency) int {
		if a.Pool != b.Pool {
			return strings.Compare(a.Pool, b.Pool)
		}
		return strings.Compare(a.Node, b.Node)
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.latencyFigs, c.latencyAt = figs, now
	for _, j := range c.jobs {
		c.checkLatency(j, figs, now)
	}
}

// worstLatency returns the figure furthest over its target for j (the
// highest ratio of p99 to target, first on ties), its target, and whether
// it is over. Locking: c.mu held.
func (c *Controller) worstLatency(j *jobThrottle, figs []PoolLatency) (PoolLatency, time.Duration, bool) {
	p := c.policyOf(j.applied)
	var worst PoolLatency
	var target time.Duration
	ratio := 0.0
	for _, f := range figs {
		t := p.ClientTarget(j.impact.Level, f.Class)
		if t <= 0 {
			continue
		}
		if r := float64(f.P99) / float64(t); r > ratio {
			worst, target, ratio = f, t, r
		}
	}
	return worst, target, ratio > 1
}

// policyOf returns the policy called name, or low when it is unknown (as
// resolve does). Locking: c.mu held.
func (c *Controller) policyOf(name string) Policy {
	if kp, ok := c.known[name]; ok {
		return kp.Policy
	}
	return c.known[PolicyLow].Policy
}

// checkLatency applies figs to j at now. Locking: c.mu held.
func (c *Controller) checkLatency(j *jobThrottle, figs []PoolLatency, now time.Time) {
	lat := &j.latency
	if f, target, over := c.worstLatency(j, figs); over {
		lat.clear = time.Time{}
		lat.desc = fmt.Sprintf("client p99 %v > target %v on pool %s (node %s)", f.P99, target, f.Pool, f.Node)
		j.pressure = "over: " + lat.desc
		if lat.over && now.Sub(lat.cut) < LatencySettle {
			return
		}
		if !lat.over {
			lat.over, lat.before, lat.relapse = true, j.workers, ""
			if !j.raised.IsZero() && now.Sub(j.raised) < LatencyRelapse && j.raisedFrom < j.workers {
				lat.before = j.raisedFrom
				lat.relapse = fmt.Sprintf(" (not %s: the clients went over target %v after the rise from %s)",
					formatWorkers(j.workers), now.Sub(j.raised).Round(100*time.Millisecond), formatWorkers(j.raisedFrom))
			}
		}
		lat.cut = now
		if w := clampWorkers(c.law.roundDown(j.workers*c.law.Backoff), j.impact.Level); w < j.workers {
			j.workers, j.reason, j.changed = w, "back off: "+lat.desc, now
			return
		}
		// At the level's minimum: slow the job's I/O, if the level lets.
		floor := j.impact.Level.MinRate
		if floor <= 0 {
			return
		}
		r := max(LatencyRateStart(f.Class), floor)
		if j.rate > 0 {
			r = max(j.rate/2, floor)
		}
		if r != j.rate {
			j.rate, j.changed = r, now
			j.reason = fmt.Sprintf("back off: %s; at its level's minimum of %s workers: I/O at %s a second on this node",
				lat.desc, formatWorkers(j.impact.Level.MinWorkers), formatRate(r))
		}
		return
	}
	if !lat.over {
		return
	}
	if lat.clear.IsZero() {
		lat.clear = now
	}
	if now.Sub(lat.clear) < LatencyHold {
		j.pressure = fmt.Sprintf("near: client p99 under target since %s, holding for %v (last: %s)",
			lat.clear.Format("15:04:05.0"), LatencyHold, lat.desc)
		return
	}
	lat.over = false
	lifted := ""
	if j.rate > 0 {
		lifted = fmt.Sprintf(", its I/O no longer held to %s a second", formatRate(j.rate))
		j.rate, j.changed = 0, now
		j.reason = fmt.Sprintf("return: client p99 under target on every pool for %v%s", LatencyHold, lifted)
	}
	if lat.relapse != "" {
		lat.noGrowth = now.Add(LatencyProbe)
		lat.noGrowthWhy = fmt.Sprintf("no growth until %s: more workers put the clients over target at %s", lat.noGrowth.Format("15:04:05"), lat.cut.Format("15:04:05"))
	}
	back := clampWorkers(max(lat.before, j.workers), j.impact.Level)
	if back <= j.workers {
		return
	}
	if c.loadErr == nil && c.load.QoSQueued >= 1 {
		j.reason, j.changed = fmt.Sprintf("client p99 under target for %v; QoS holds back %.0f maintenance I/Os: staying at %s workers, not back to %s",
			LatencyHold, c.load.QoSQueued, formatWorkers(j.workers), formatWorkers(back)), now
		return
	}
	j.raised, j.raisedFrom = now, j.workers
	j.workers, j.changed = back, now
	j.reason = fmt.Sprintf("return: client p99 under target on every pool for %v: back to %s workers%s%s", LatencyHold, formatWorkers(back), lat.relapse, lifted)
}

// formatRate is a byte rate in MiB or KiB.
func formatRate(r float64) string {
	if r >= 1<<20 {
		return fmt.Sprintf("%.4g MiB", r/(1<<20))
	}
	return fmt.Sprintf("%.4g KiB", r/(1<<10))
}

// describeTargets says what client latency targets p sets at level lv.
func describeTargets(p Policy, lv Level) string {
	if p.ClientP99 != nil {
		return FormatClientP99(p.ClientP99)
	}
	th := lv.Thresholds
	if th.NVMe.ClientP99 == 0 && th.SSD.ClientP99 == 0 && th.HDD.ClientP99 == 0 {
		return "none (level " + lv.Name + ")"
	}
	f := func(d time.Duration) string {
		if d == 0 {
			return "none"
		}
		return d.String()
	}
	return fmt.Sprintf("nvme %s, ssd %s, hdd %s (level %s)", f(th.NVMe.ClientP99), f(th.SSD.ClientP99), f(th.HDD.ClientP99), lv.Name)
}
