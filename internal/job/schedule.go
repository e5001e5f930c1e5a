package job

import (
	"cmp"
	"fmt"
	"slices"
)

// schedJob is a job as the scheduler sees it.
type schedJob struct {
	ID         JobID
	Set        ExclusionSet
	Priority   int // 1 highest
	State      State
	FreesSpace bool
	Reason     string // the job's current reason, to report only changes
}

// schedInput is everything a scheduling decision depends on.
type schedInput struct {
	Jobs              []schedJob
	MaxRunning        int
	RestripeExclusive bool
	LowSpace          bool
}

// decision changes a job's state (To != From) or only its reason (To ==
// From: why a job keeps waiting).
type decision struct {
	ID       JobID
	From, To State
	Reason   string
}

// schedule decides which of the live jobs (queued, running, system-paused)
// run. It is a pure function of its input:
//
//   - In low-space mode only jobs that free space may run; others that run
//     are paused by the system and resume when the mode ends.
//   - Candidates are taken by priority (1 first), a running job before a
//     waiting one of the same priority (no churn among equals), then by id
//     (first submitted first).
//   - A candidate is admitted while fewer than MaxRunning are admitted and
//     it conflicts with none admitted: two jobs in the mark set conflict;
//     two in the restripe set conflict when RestripeExclusive.
//   - Running jobs not admitted are paused by the system (preempted);
//     admitted waiting jobs start.
//
// Decisions are returned in id order.
func schedule(in schedInput) []decision {
	max := in.MaxRunning
	if max < 1 {
		max = 1
	}
	jobs := slices.Clone(in.Jobs)
	slices.SortFunc(jobs, func(a, b schedJob) int {
		if c := cmp.Compare(a.Priority, b.Priority); c != 0 {
			return c
		}
		if ar, br := a.State == Running, b.State == Running; ar != br {
			if ar {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.ID, b.ID)
	})
	var admitted []schedJob
	exclusive := SetMark
	if in.RestripeExclusive {
		exclusive |= SetRestripe
	}
	// conflict returns an admitted job j may not run with, and the sets
	// they share.
	conflict := func(j schedJob) (schedJob, ExclusionSet) {
		for _, a := range admitted {
			if shared := j.Set & a.Set & exclusive; shared != 0 {
				return a, shared
			}
		}
		return schedJob{}, 0
	}
	slotsFull := fmt.Sprintf("job slots full (max_running %d) with jobs of higher or equal priority", max)
	type waiter struct {
		j      schedJob
		reason string
	}
	var waiting []waiter
	var out []decision
	// lastNew is the lowest-priority job admitted that was not running:
	// the one a preempted job yields its slot to.
	var lastNew schedJob
	for _, j := range jobs {
		if !j.State.live() {
			continue
		}
		reason := ""
		if in.LowSpace && !j.FreesSpace {
			reason = "low-space mode: only jobs that free space run"
		} else if a, shared := conflict(j); shared != 0 {
			reason = fmt.Sprintf("exclusion set %s held by job %d", shared, a.ID)
		} else if len(admitted) >= max {
			reason = slotsFull
		}
		if reason != "" {
			waiting = append(waiting, waiter{j, reason})
			continue
		}
		admitted = append(admitted, j)
		if j.State != Running {
			lastNew = j
			out = append(out, decision{ID: j.ID, From: j.State, To: Running})
		}
	}
	for _, w := range waiting {
		to, reason := w.j.State, w.reason
		if to == Running {
			to = SystemPaused
			if reason == slotsFull && lastNew.ID != 0 {
				reason = preempted(lastNew)
			}
		}
		if to == SystemPaused && reason == slotsFull && slices.ContainsFunc(admitted, func(a schedJob) bool { return w.j.Reason == preempted(a) }) {
			reason = w.j.Reason // still waiting for the job that took its slot: say so
		}
		if to == w.j.State && reason == w.j.Reason {
			continue
		}
		out = append(out, decision{ID: w.j.ID, From: w.j.State, To: to, Reason: reason})
	}
	slices.SortFunc(out, func(a, b decision) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// preempted is the reason of a job paused for j to run in its slot.
func preempted(j schedJob) string {
	return fmt.Sprintf("preempted by job %d (priority %d)", j.ID, j.Priority)
}
