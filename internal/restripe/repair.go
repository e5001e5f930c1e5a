package restripe

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/placement"
)

// A Restriper re-protects stripes copy-on-write, for the repair, drain,
// integrityscan, mediascan and rebalance jobs, one stripe (or file) per
// call (repairOnce has the steps of one attempt, each a function):
//
//  1. read the stripe map (generation g) and pick the units to rebuild:
//     unplaced ones, those on drives the topology says are down, those on
//     drives the caller calls bad (draining, suspended, failed), and those
//     found damaged; and, for a stripe whose units sit on too few nodes
//     for the tolerance its pool could give it (written while a node was
//     down), the units to copy to other nodes (placement.Spread);
//  2. copy the ones whose old block still reads (a drain costs one read per
//     unit), read enough of the others to reconstruct the rest
//     (Reed–Solomon, or another copy of a mirror), and check every rebuilt
//     unit against the CRC its stripe map records;
//  3. place the new units (placement's repair mode: off the drives, and as
//     far as the pool allows the nodes, of the units kept; never on a bad,
//     down or unusable drive), put them (durable when acknowledged);
//  4. commit the stripe map only if the stripe is still at generation g.
//     Kept units keep their blocks; meta queues the replaced blocks for
//     deletion in the same transaction.
//
// A lost compare-and-swap (a client or another restriper committed the
// stripe meanwhile) queues the new blocks for deletion (the client's
// CommitStripes does) and starts over from the new map, which may no longer
// need repair. Units that cannot be placed (too few drives) keep their old
// entry, so a stripe is never left worse than it was, and the result says
// it is still under-protected.

// maxRepairAttempts bounds the attempts of one stripe repair when its
// generation keeps moving.
const maxRepairAttempts = 4

// maxPutRounds bounds re-placing units whose put failed, in one attempt.
const maxPutRounds = 3

// commitBatch is how many stripes of a file RepairFile commits in one
// transaction: a repaired stripe's own commit was a third of its time
// (37 ms a stripe on the test machine: 10 reading and rebuilding, 13
// storing, 14 committing), and one transaction of eight costs about what
// one of one does. Eight stripes stay far under a transaction's limits
// (etcd's default 128 operations).
const commitBatch = 8

// RepairResult is what RepairStripe did to one stripe. Items are
// idempotent: repairing a repaired stripe reports NothingToDo.
type RepairResult struct {
	LIN    meta.LIN `json:"lin"`
	Stripe uint64   `json:"stripe"`
	// Gen is the stripe's generation afterwards (the one read if nothing
	// was committed).
	Gen uint64 `json:"gen"`
	// NothingToDo: no unit needed repair (or the stripe no longer exists:
	// a truncate removed it).
	NothingToDo bool `json:"nothing_to_do,omitempty"`
	// Committed: a new stripe map was committed.
	Committed bool `json:"committed,omitempty"`
	// Rebuilt counts units reconstructed from the other units (a missing
	// copy of a mirror copied from another copy); Moved counts units copied
	// as they were from a bad drive that still serves them (drain).
	Rebuilt int `json:"rebuilt"`
	Moved   int `json:"moved"`
	// BytesRead and BytesWritten are the unit bytes read from and put to
	// block services, over all attempts.
	BytesRead    int64 `json:"bytes_read"`
	BytesWritten int64 `json:"bytes_written"`
	// Attempts counts commit attempts (more than 1 after generation
	// conflicts).
	Attempts int `json:"attempts"`
	// StillUnderProtected: some unit is still unplaced, on a down or bad
	// drive, or damaged, because no eligible drive was left for it; Left
	// counts them and Reason says why. Run the repair again once drives
	// are added or back.
	StillUnderProtected bool   `json:"still_under_protected,omitempty"`
	Left                int    `json:"left,omitempty"`
	Reason              string `json:"reason,omitempty"`
	// Tolerance is what the stripe survives afterwards, counting only
	// units on drives that are up and not bad (-1: not readable).
	Tolerance placement.Tolerance `json:"tolerance"`
	// BelowTarget: the stripe's placement afterwards still survives fewer
	// drive or node failures than Target, what its pool could give it (the
	// pool has no eligible drive on another node now: a node is down, or
	// full). Its entry in the protection index stays.
	BelowTarget bool                `json:"below_target,omitempty"`
	Target      placement.Tolerance `json:"target"`
	// Units lists the units that needed repair, in the order they were
	// given drives, with what became of each.
	Units []UnitRepair `json:"units,omitempty"`
}

// UnitRepair is one unit that needed repair.
type UnitRepair struct {
	Unit int `json:"unit"`
	// From is the drive that held the unit (0: it was not placed); To the
	// drive now holding it (0: no eligible drive, left as it was).
	From meta.DriveID `json:"from,omitempty"`
	To   meta.DriveID `json:"to,omitempty"`
	// Moved: copied from From as it was, not rebuilt from other units.
	Moved bool `json:"moved,omitempty"`
	// Why says why the unit needed repair.
	Why string `json:"why"`
}

// FileRepairResult sums RepairStripe over the stripes of one file.
type FileRepairResult struct {
	LIN meta.LIN `json:"lin"`
	// Stripes counts the stripe maps examined; Skipped those that needed
	// nothing (no unit unplaced or on a bad or down drive), without being
	// read.
	Stripes int `json:"stripes"`
	Skipped int `json:"skipped"`
	// Repaired counts stripes whose new map was committed.
	Repaired     int   `json:"repaired"`
	Rebuilt      int   `json:"rebuilt"`
	Moved        int   `json:"moved"`
	BytesRead    int64 `json:"bytes_read"`
	BytesWritten int64 `json:"bytes_written"`
	// UnderProtected counts stripes left needing repair (too few drives);
	// BelowTarget stripes left below their pool's target tolerance (the
	// pool cannot spread them now); Failed counts stripes whose repair
	// returned an error.
	UnderProtected int `json:"under_protected"`
	BelowTarget    int `json:"below_target"`
	Failed         int `json:"failed"`
	// Lost lists the stripes found lost (their errors are *LostError),
	// for the lost-data list.
	Lost []meta.LostStripe `json:"lost,omitempty"`
}

// StripeNeedsRepair reports whether stripe s has a unit that is not placed
// or lies on a drive isBad names. With the predicate of BadDrives it is
// the test RepairFile uses to skip stripes without reading them. It is
// pure.
func StripeNeedsRepair(s meta.Stripe, isBad func(meta.DriveID) bool) bool {
	for _, u := range s.Units {
		if !u.Placed() || (isBad != nil && isBad(u.Drive)) {
			return true
		}
	}
	return false
}

// FileMayNeedRepair reports whether a file may have units on a drive isBad
// names, from its attributes alone (the WDL lists every drive holding a
// unit of the file), so a LIN scan skips the other files without reading
// their stripe maps. Units never placed are in no WDL: stripes with them
// are found with meta's ListUnderProtected, which a repair job scans as
// well. Non-files report false. It is pure.
func FileMayNeedRepair(a meta.Attr, isBad func(meta.DriveID) bool) bool {
	if a.Type != meta.TypeFile || isBad == nil {
		return false
	}
	return slices.ContainsFunc(a.WDL, isBad)
}

// BadDrives returns a predicate, from one snapshot of the topology, that is
// true for the drives bad names (nil: none) and for the drives the
// topology says are down or does not know: the drives whose units
// RepairStripe rebuilds. Pass it to FileMayNeedRepair and
// StripeNeedsRepair. Errors: the topology's; client.ErrClosed.
func (r *Restriper) BadDrives(ctx context.Context, bad func(meta.DriveID) bool) (func(meta.DriveID) bool, error) {
	view, err := r.data.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return func(d meta.DriveID) bool { return !view.Up(d) || (bad != nil && bad(d)) }, nil
}

// RepairStripe re-protects stripe index of file lin (see the comment
// above maxRepairAttempts): it rebuilds the units that are not placed, on
// drives the topology says are down, on drives bad names (nil: none;
// draining, suspended or failed drives — the caller decides), or unreadable
// when read, and commits the new map copy-on-write with the generation
// compare-and-swap. Drain is RepairStripe with bad = the draining drives.
//
// It is idempotent: a stripe needing nothing (or gone) reports
// NothingToDo, also when a concurrent writer rewrote it meanwhile. Units
// that no eligible drive can take are left as they were and reported
// (StillUnderProtected, nil error). The committed map only names
// acknowledged blocks; blocks written for a commit that did not happen are
// queued for deletion.
//
// Errors: client.ErrUnavailable when fewer units are readable than needed
// to rebuild (the map is unchanged; bring drives or nodes back);
// client.ErrCorrupt for a malformed map, or when a rebuilt unit disagrees
// with the CRC its map records (the surviving units are inconsistent: run
// VerifyStripe); client.ErrConflict when the stripe kept changing;
// client.ErrInvalid for a LIN that is not a regular file;
// client.ErrClosed; meta's errors (meta.ErrNotFound: the file was
// deleted) and context errors, wrapped.
func (r *Restriper) RepairStripe(ctx context.Context, lin meta.LIN, index uint64, bad func(meta.DriveID) bool) (RepairResult, error) {
	return r.repairStripe(ctx, repairRequest{lin: lin, index: index, bad: bad})
}

// UnitMove names a unit to move by the drive and block its stripe map
// records, with why (shown in results and logs).
type UnitMove struct {
	Drive meta.DriveID
	Block meta.BlockID
	Why   string
}

// MoveUnits copies the named units of stripe index of lin to other drives
// and commits the new map copy-on-write, as RepairStripe does (the same
// generation compare-and-swap, retries and delete queue), for rebalance:
// the units are fine where they are but should be elsewhere. allow, if not
// nil, limits the drives they may go to; a unit no allowed drive can take
// (placement's node-spread rules included) stays where it is. A unit the
// map no longer names (the stripe was rewritten meanwhile) is not moved.
// Units on down drives and unplaced units of the stripe are repaired on
// the way.
func (r *Restriper) MoveUnits(ctx context.Context, lin meta.LIN, index uint64, units []UnitMove, allow func(meta.DriveID) bool) (RepairResult, error) {
	move := make(map[unitID]string, len(units))
	for _, u := range units {
		move[unitID{u.Drive, u.Block}] = u.Why
	}
	return r.repairStripe(ctx, repairRequest{lin: lin, index: index, move: move, allow: allow})
}

// RepairDamaged rebuilds the unit of stripe index of lin whose block is
// block on drive d, known bad for the reason why (a drive scan found its
// checksums wrong), through RepairStripe's copy-on-write path: the unit
// is rebuilt from the others (never copied from the bad block), placed
// away from d if the pool allows, and the stripe map committed if its
// generation is unchanged; the commit queues the bad block for deletion.
// If the stripe map no longer names d and block (a writer or restriper
// replaced it meanwhile) nothing is done (NothingToDo). Idempotent.
//
// Errors: those of RepairStripe (client.ErrUnavailable when too few
// other units read: the map is unchanged; meta.ErrNotFound when the file
// is gone).
func (r *Restriper) RepairDamaged(ctx context.Context, lin meta.LIN, index uint64, d meta.DriveID, block meta.BlockID, why string) (RepairResult, error) {
	if why == "" {
		why = "damaged"
	}
	return r.repairStripe(ctx, repairRequest{lin: lin, index: index, damaged: map[unitID]string{{d, block}: why}})
}

// RepairFile runs RepairStripe over every stripe of lin that has a unit
// not placed or on a bad or down drive (BadDrives), or whose placement is
// below its pool's target tolerance, reading the stripe maps in pages;
// other stripes are skipped without being read. The new maps are
// committed commitBatch stripes to a transaction; a batch in which a
// stripe moved meanwhile commits none, and each of its stripes is
// repaired again alone. Between stripes it rests at the job worker's
// duty cycle (runner.Rest). A stripe it checks and
// does not commit (nothing to do, or the pool cannot place it better now)
// gets its protection-index entry set right (indexed if below its target,
// not otherwise: a stripe written by format 1, a pool that lost a node).
// A stripe that fails does not stop the others: the error of the first
// failure is returned (wrapped, with the count) after all were tried,
// except for context errors and client.ErrClosed, which stop at once;
// stripes found lost are listed in the result. Units damaged on a
// healthy drive are not looked for: that is VerifyFile's job.
func (r *Restriper) RepairFile(ctx context.Context, lin meta.LIN, bad func(meta.DriveID) bool) (FileRepairResult, error) {
	res := FileRepairResult{LIN: lin}
	attr, err := r.meta.GetAttr(ctx, lin)
	if err != nil {
		return res, fmt.Errorf("restripe: repairing LIN %d: %w", lin, err)
	}
	view, err := r.data.Snapshot(ctx)
	if err != nil {
		return res, err
	}
	isBad := func(d meta.DriveID) bool { return !view.Up(d) || (bad != nil && bad(d)) }
	entries, err := r.meta.UnderProtectedStripes(ctx, lin)
	if err != nil {
		return res, fmt.Errorf("restripe: repairing LIN %d: %w", lin, err)
	}
	indexed := make(map[uint64]bool, len(entries))
	for _, e := range entries {
		indexed[e.Index] = true
	}
	var first error
	// done accounts for the repair of stripe s (its tolerance as read was
	// tol): what rr says, and err. It returns an error only to stop the
	// file (context errors, a closed client).
	done := func(s meta.Stripe, tol meta.StripeTolerance, rr RepairResult, err error) error {
		if err == nil && !rr.Committed && rr.Gen == s.Gen && (tol.Below() || s.Missing() > 0) != indexed[s.Index] {
			// Checked, not committed: the index says what it is.
			if _, err := r.meta.SetStripeTolerance(ctx, lin, s.Index, s.Gen, tol); err != nil {
				return fmt.Errorf("restripe: repairing LIN %d stripe %d: %w", lin, s.Index, err)
			}
		}
		if rr.BelowTarget {
			res.BelowTarget++
		}
		var lost *LostError
		if errors.As(err, &lost) {
			res.Lost = append(res.Lost, lost.Stripe)
		}
		res.Rebuilt += rr.Rebuilt
		res.Moved += rr.Moved
		res.BytesRead += rr.BytesRead
		res.BytesWritten += rr.BytesWritten
		if rr.Committed {
			res.Repaired++
		}
		if rr.StillUnderProtected {
			res.UnderProtected++
		}
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, client.ErrClosed) {
				return err
			}
			res.Failed++
			if first == nil {
				first = err
			}
		}
		return nil
	}
	// The stripes whose new units are stored wait for their commit, up to
	// commitBatch of them: one transaction.
	type waiting struct {
		s   meta.Stripe
		tol meta.StripeTolerance
		rr  RepairResult
		p   *prepared
	}
	var batch []*waiting
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		ps := make([]*prepared, len(batch))
		for i, w := range batch {
			ps[i] = w.p
		}
		committed, err := r.commit(ctx, lin, ps)
		b := batch
		batch = nil
		for i, w := range b {
			werr := err
			switch {
			case err == nil:
				w.p.finish(r, committed[i])
			case errors.Is(err, errRepairStale) || errors.Is(err, meta.ErrTooLarge):
				// The batch failed as a whole (its fresh blocks are
				// queued for deletion): each stripe starts again alone.
				werr = r.attempts(ctx, repairRequest{lin: lin, index: w.s.Index, bad: bad}, &w.rr, err)
			}
			if e := done(w.s, w.tol, w.rr, werr); e != nil {
				return e
			}
		}
		return nil
	}
	err = r.eachStripe(ctx, lin, func(s meta.Stripe) error {
		res.Stripes++
		tol, err := view.StripeTolerance(attr.Pool, lin, s)
		if err != nil {
			return err
		}
		if !StripeNeedsRepair(s, isBad) && !tol.Below() {
			if indexed[s.Index] { // an entry that no longer holds
				if _, err := r.meta.SetStripeTolerance(ctx, lin, s.Index, s.Gen, tol); err != nil {
					return fmt.Errorf("restripe: repairing LIN %d stripe %d: %w", lin, s.Index, err)
				}
			}
			res.Skipped++
			return nil
		}
		w := &waiting{s: s, tol: tol, rr: RepairResult{LIN: lin, Stripe: s.Index, Attempts: 1}}
		rq := repairRequest{lin: lin, index: s.Index, bad: bad, seen: &seenStripe{attr: attr, s: s}}
		p, err := r.prepareOnce(ctx, rq, &w.rr)
		switch {
		case errors.Is(err, errRepairStale):
			err = r.attempts(ctx, rq, &w.rr, err)
		case err == nil && p != nil:
			w.p = p
			if batch = append(batch, w); len(batch) >= commitBatch {
				return flush()
			}
			return nil
		}
		return done(s, tol, w.rr, err)
	})
	if err == nil {
		err = flush()
	}
	for _, w := range batch { // stopped before their commit
		r.enqueueOrphans(ctx, lin, w.s.Index, unitsOf(w.p.fresh))
	}
	if err != nil {
		return res, err
	}
	if first != nil {
		return res, fmt.Errorf("restripe: repair of LIN %d: %d of %d stripes failed, the first: %w", lin, res.Failed, res.Stripes, first)
	}
	return res, nil
}

// repairRequest is one stripe to repair.
type repairRequest struct {
	lin   meta.LIN
	index uint64
	bad   func(meta.DriveID) bool // drives to move units off; may be nil
	// damaged lists units known to be bad (found by VerifyStripe), by
	// drive and block, with why: they are rebuilt, not copied, while the
	// stripe map still names them.
	damaged map[unitID]string
	// move lists units to copy elsewhere although they are fine (a
	// rebalance), by drive and block, with why.
	move map[unitID]string
	// allow, if set, limits the drives new units may go to (a rebalance
	// fills only drives below the pool's mean).
	allow func(meta.DriveID) bool
	// seen, if set, is the stripe's map and its file's attributes as the
	// caller has just read them (RepairFile's page of maps): the first
	// attempt works from them rather than reading both again, two etcd
	// round trips of the four a repaired stripe costs. A map changed since
	// fails the commit's generation compare-and-swap, and the next attempt
	// reads afresh.
	seen *seenStripe
}

// seenStripe is a stripe map and its file's attributes, read by the caller.
type seenStripe struct {
	attr meta.Attr
	s    meta.Stripe
}

// unitID names a unit's block: a stripe map that names the same drive and
// block names the same bytes.
type unitID struct {
	drive meta.DriveID
	block meta.BlockID
}

// errRepairStale says an attempt found the stripe changed under it (a lost
// compare-and-swap, or blocks gone because the map moved): start over.
var errRepairStale = errors.New("restripe: stripe changed during repair")

// repairStripe runs attempts of rq (repairOnce), each from a fresh read of
// the stripe, until one does not find the stripe changed under it, at most
// maxRepairAttempts: RepairStripe, MoveUnits and RepairDamaged are
// requests to it.
func (r *Restriper) repairStripe(ctx context.Context, rq repairRequest) (RepairResult, error) {
	res := RepairResult{LIN: rq.lin, Stripe: rq.index}
	err := r.attempts(ctx, rq, &res, nil)
	return res, err
}

// attempts runs attempts of rq after the res.Attempts made already (the
// last of which found the stripe changed: stale), each from a fresh read
// of the stripe, until one does not find the stripe changed under it, at
// most maxRepairAttempts in all.
func (r *Restriper) attempts(ctx context.Context, rq repairRequest, res *RepairResult, stale error) error {
	for {
		if res.Attempts >= maxRepairAttempts {
			return fmt.Errorf("%w: repairing LIN %d stripe %d: gave up after %d attempts: %w", client.ErrConflict, rq.lin, rq.index, res.Attempts, stale)
		}
		res.Attempts++
		err := r.repairOnce(ctx, rq, res)
		if !errors.Is(err, errRepairStale) {
			return err
		}
		stale = err
	}
}
