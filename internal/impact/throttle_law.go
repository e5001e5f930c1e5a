package impact

import (
	"fmt"
	"math"

	"github.com/weftfs/weft/internal/job"
)

// ThrottleLaw is how the controller moves a job's workers at each tick, from
// the node's load against the thresholds of the job's level. It is additive
// increase, multiplicative decrease (as TCP's congestion control) with a
// hold band between them:
//
//   - over: some signal (CPU, or a drive's IOPS or queue depth) is above its
//     threshold: workers × Backoff, rounded down to a whole worker (or, under
//     one worker, to a multiple of FractionStep), not below the level's
//     minimum. Halving clears a client load spike in a few ticks (16 → 2
//     workers in three ticks, 15 s at the default interval), which is what
//     keeps client latency bounded.
//   - near: the busiest signal is between GrowBelow and 1 of its threshold,
//     or QoS holds back at least one of the jobs' I/Os on the node
//     (Load.QoSQueued): hold. A job whose I/O QoS queues would only queue
//     more with more workers. The job's own I/O is part of the load it measures; without the
//     band a job alone on a node would grow until it tripped its own
//     threshold, halve, and saw-tooth. With it, it settles below.
//   - under: every signal is below GrowBelow of its threshold: + Step
//     worker, or + FractionStep while under one worker, not above the
//     level's maximum. Growing one worker per tick (2 → 16 in 70 s) lets
//     the load of each new worker show in the next sample before the next
//     one starts.
//
// Fractional workers run as a duty cycle (see allowanceOf), so the lowest
// setting, a quarter worker, still makes progress.
type ThrottleLaw struct {
	// Backoff multiplies the workers when over a threshold, in (0, 1).
	Backoff float64
	// GrowBelow is the fraction of every threshold the load must be under
	// for workers to grow, in (0, 1].
	GrowBelow float64
	// Step is the workers added per tick at or above one worker.
	Step float64
	// FractionStep is the workers added per tick under one worker, and the
	// grid fractional workers are rounded down to, in (0, 1].
	FractionStep float64
}

// DefaultThrottleLaw returns the law the controller uses unless configured:
// Backoff 0.5, GrowBelow 0.8, Step 1, FractionStep 0.25.
func DefaultThrottleLaw() ThrottleLaw {
	return ThrottleLaw{Backoff: 0.5, GrowBelow: 0.8, Step: 1, FractionStep: 0.25}
}

// Validate returns an error wrapping ErrInvalid naming the first field out
// of range.
func (l ThrottleLaw) Validate() error {
	switch {
	case !(l.Backoff > 0 && l.Backoff < 1):
		return fmt.Errorf("%w: throttle backoff %v: want between 0 and 1", ErrInvalid, l.Backoff)
	case !(l.GrowBelow > 0 && l.GrowBelow <= 1):
		return fmt.Errorf("%w: throttle grow-below %v: want above 0, at most 1", ErrInvalid, l.GrowBelow)
	case !(l.Step > 0 && l.Step <= MaxWorkersPerNode):
		return fmt.Errorf("%w: throttle step %v: want above 0, at most %d", ErrInvalid, l.Step, MaxWorkersPerNode)
	case !(l.FractionStep > 0 && l.FractionStep <= 1):
		return fmt.Errorf("%w: throttle fraction step %v: want above 0, at most 1", ErrInvalid, l.FractionStep)
	}
	return nil
}

// pressure is how the node's load compares with a level's thresholds.
type pressure int

const (
	pressureUnder pressure = iota // every signal below GrowBelow of its threshold
	pressureNear                  // the busiest between GrowBelow and its threshold
	pressureOver                  // some signal above its threshold
)

func (p pressure) String() string {
	return [...]string{"under", "near", "over"}[p]
}

// assess compares load with th and returns the pressure and a description
// of the busiest signal (the highest ratio of value to threshold; the first
// one, CPU then drives in order, on ties). Signals whose threshold is 0 are
// not checked.
func (l ThrottleLaw) assess(load Load, th Thresholds) (pressure, string) {
	worst, desc := -1.0, "no load measured"
	check := func(value, limit float64, describe func() string) {
		if limit <= 0 {
			return
		}
		if r := value / limit; r > worst {
			worst, desc = r, describe()
		}
	}
	check(load.CPU, th.CPU, func() string {
		return fmt.Sprintf("cpu %.0f%% (limit %.0f%%)", load.CPU*100, th.CPU*100)
	})
	for _, d := range load.Drives {
		dt := th.ForClass(d.Class)
		check(d.QueueDepth, dt.QueueDepth, func() string {
			return fmt.Sprintf("drive %s (%s) queue depth %.1f (limit %g)", d.Drive, d.Class, d.QueueDepth, dt.QueueDepth)
		})
		check(d.IOPS, dt.IOPS, func() string {
			return fmt.Sprintf("drive %s (%s) %.0f iops (limit %g)", d.Drive, d.Class, d.IOPS, dt.IOPS)
		})
	}
	switch {
	case worst > 1:
		return pressureOver, desc
	case worst >= l.GrowBelow:
		return pressureNear, desc
	case load.QoSQueued >= 1:
		return pressureNear, fmt.Sprintf("QoS holds back %.0f maintenance I/Os (the maintenance limit, not the load: more workers would only wait)", load.QoSQueued)
	}
	return pressureUnder, desc
}

// next returns the workers after one tick at pressure p, from w, within
// lv's bounds.
func (l ThrottleLaw) next(w float64, p pressure, lv Level) float64 {
	switch p {
	case pressureOver:
		w = l.roundDown(w * l.Backoff)
	case pressureUnder:
		if w < 1 {
			w = min(1, w+l.FractionStep)
		} else {
			w += l.Step
		}
	}
	return clampWorkers(w, lv)
}

// roundDown rounds w down to a whole worker, or under one worker to a
// multiple of FractionStep. The small epsilon keeps 0.75/0.25 from
// becoming 2.9999….
func (l ThrottleLaw) roundDown(w float64) float64 {
	const eps = 1e-9
	if w >= 1 {
		return math.Floor(w + eps)
	}
	return math.Floor(w/l.FractionStep+eps) * l.FractionStep
}

// clampWorkers returns w within lv's bounds.
func clampWorkers(w float64, lv Level) float64 {
	return max(lv.MinWorkers, min(lv.MaxWorkers, w))
}

// allowanceOf turns fractional workers into whole workers and a duty cycle
// with the same total work: w ≤ 0 is no worker (Duty 1, unused); otherwise
// ⌈w⌉ workers each working w/⌈w⌉ of each second (0.5 → 1 at 0.5, 2.5 → 3
// at 0.833…, 4 → 4 at 1).
func allowanceOf(w float64) job.Allowance {
	if w <= 0 {
		return job.Allowance{Workers: 0, Duty: 1}
	}
	n := math.Ceil(w - 1e-9)
	return job.Allowance{Workers: int(n), Duty: min(1, w/n)}
}
