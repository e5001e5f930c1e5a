package policy

import (
	"cmp"
	"fmt"
	"slices"
)

// PoolSpace is a pool's size and the bytes used in it.
type PoolSpace struct {
	Size, Used int64
}

// Candidate is a file a MIGRATE rule matched, for Rule.Plan.
type Candidate struct {
	// Weight is the rule's Weight for the file.
	Weight float64
	// Allocated is the bytes moving the file frees in the source pool.
	Allocated int64
	// TargetBytes is the bytes it will take in the target pool, which
	// differ from Allocated when the protection changes; 0 means
	// Allocated.
	TargetBytes int64
}

// StopReason says why a plan ends where it does.
type StopReason uint8

const (
	// StopNotTriggered: the source pool is not above the THRESHOLD's high
	// mark, so nothing moves.
	StopNotTriggered StopReason = iota + 1
	// StopLow: the source pool is projected at or below the low mark.
	StopLow
	// StopCandidates: every candidate was taken, or left because it would
	// take the target past its LIMIT (Plan.Skipped counts those).
	StopCandidates
)

// String returns the reason in words ("reached low").
func (s StopReason) String() string {
	switch s {
	case StopNotTriggered:
		return "not triggered"
	case StopLow:
		return "reached low"
	case StopCandidates:
		return "out of candidates"
	}
	return fmt.Sprintf("StopReason(%d)", uint8(s))
}

// Plan is what a MIGRATE rule moves out of one source pool.
type Plan struct {
	// Triggered is true when the migration runs: always for a rule
	// without THRESHOLD, else when the source pool's used share is above
	// the high mark.
	Triggered bool
	// Take lists the candidates to move (indexes into the candidates
	// given), highest weight first; candidates of equal weight keep their
	// order.
	Take []int
	// Bytes is the sum of the taken candidates' Allocated.
	Bytes int64
	// SourceUsed and TargetUsed are the pools' projected used bytes once
	// the taken candidates have moved.
	SourceUsed, TargetUsed int64
	// Skipped counts candidates passed over because they would take the
	// target pool past its LIMIT (100% without one); smaller ones after
	// them may still be taken.
	Skipped int
	// Stop says why the plan ends.
	Stop StopReason
}

// Plan plans the rule's migration out of one source pool, given the
// source's and the target's space and the files the rule matched there
// with their weights: for a rule with THRESHOLD(high, low) nothing moves
// unless the source's used share is above high, and candidates are then
// taken in weight order, highest first, until the source is projected at
// or below low; a rule without THRESHOLD takes every candidate. A
// candidate is taken only if the target stays at or below the rule's
// LIMIT (100% without one) with it. A pool of size 0 is never above a
// threshold and takes nothing.
//
// Plan is pure: the tier job and `policy test` get the same answer. It
// returns ErrNotMigrate for a rule of another kind.
func (r *Rule) Plan(src, dst PoolSpace, cands []Candidate) (Plan, error) {
	if r.kind != KindMigrate {
		return Plan{}, fmt.Errorf("%w: rule %s is a %s rule", ErrNotMigrate, quote(r.name), r.kind)
	}
	limit := 100.0
	if r.hasLimit {
		limit = r.limit
	}
	return plan(r.hasThreshold, r.high, r.low, limit, src, dst, cands), nil
}

// above reports whether used is more than pct percent of size.
func above(used, size int64, pct float64) bool {
	return float64(used)*100 > pct*float64(size)
}

func plan(threshold bool, high, low, limit float64, src, dst PoolSpace, cands []Candidate) Plan {
	pl := Plan{SourceUsed: src.Used, TargetUsed: dst.Used, Stop: StopCandidates}
	if threshold && (src.Size <= 0 || !above(src.Used, src.Size, high)) {
		pl.Stop = StopNotTriggered
		return pl
	}
	pl.Triggered = true
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(cands[b].Weight, cands[a].Weight) })
	for _, i := range order {
		if threshold && !above(pl.SourceUsed, src.Size, low) {
			pl.Stop = StopLow
			return pl
		}
		c := cands[i]
		freed := max(c.Allocated, 0)
		takes := c.TargetBytes
		if takes <= 0 {
			takes = freed
		}
		if dst.Size <= 0 || above(pl.TargetUsed+takes, dst.Size, limit) {
			pl.Skipped++
			continue
		}
		pl.Take = append(pl.Take, i)
		pl.Bytes += freed
		pl.SourceUsed -= freed
		pl.TargetUsed += takes
	}
	if threshold && !above(pl.SourceUsed, src.Size, low) {
		pl.Stop = StopLow
	}
	return pl
}
