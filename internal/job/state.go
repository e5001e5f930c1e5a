package job

import (
	"fmt"
	"strconv"
)

// JobID identifies a job: allocated from a cluster-wide counter, never
// reused, shown in decimal.
type JobID uint64

// String returns the id in decimal.
func (id JobID) String() string { return strconv.FormatUint(uint64(id), 10) }

// ParseJobID parses a decimal job id.
func ParseJobID(s string) (JobID, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%w: job id %q: want a positive decimal number", ErrInvalid, s)
	}
	return JobID(n), nil
}

// State is a job's state.
//
//	queued ──────────► running ──► succeeded | failed
//	  ▲  │               │  ▲
//	  │  │   (scheduler) ▼  │
//	  │  │          system_paused
//	  │  ▼
//	paused ◄── (user, from queued, running, system_paused)
//
// Resume moves paused to queued; Cancel moves any live state to
// cancelling, which the coordinator finishes as cancelled once the
// managers have checkpointed. Terminal states never change.
type State string

// The job states.
const (
	Queued       State = "queued"        // waiting for a slot
	Running      State = "running"       // managers work on its tasks
	Paused       State = "paused"        // by a user; Resume continues it
	SystemPaused State = "system_paused" // preempted, excluded or low space; resumes by itself
	Cancelling   State = "cancelling"    // cancel requested; managers stopping
	Cancelled    State = "cancelled"
	Succeeded    State = "succeeded"
	Failed       State = "failed"
)

// Terminal reports whether s is an end state.
func (s State) Terminal() bool { return s == Cancelled || s == Succeeded || s == Failed }

// live reports whether s is a state the scheduler considers for a slot.
func (s State) live() bool { return s == Queued || s == Running || s == SystemPaused }

func (s State) valid() bool {
	switch s {
	case Queued, Running, Paused, SystemPaused, Cancelling, Cancelled, Succeeded, Failed:
		return true
	}
	return false
}

// transitions lists, for each state, the states it may move to.
func transitions(from State) []State {
	switch from {
	case Queued:
		return []State{Running, Paused, Cancelling, Failed}
	case Running:
		return []State{Paused, SystemPaused, Cancelling, Succeeded, Failed}
	case Paused:
		return []State{Queued, Cancelling}
	case SystemPaused:
		return []State{Running, Paused, Cancelling, Failed}
	case Cancelling:
		return []State{Cancelled}
	}
	return nil
}

// CanTransition reports whether a job in state from may move to state to.
func CanTransition(from, to State) bool {
	for _, s := range transitions(from) {
		if s == to {
			return true
		}
	}
	return false
}

// PhaseState is the state of one phase of a job.
type PhaseState string

// The phase states.
const (
	PhasePending   PhaseState = "pending"
	PhaseRunning   PhaseState = "running"
	PhaseSucceeded PhaseState = "succeeded"
	PhaseFailed    PhaseState = "failed"
	PhaseCancelled PhaseState = "cancelled"
)
