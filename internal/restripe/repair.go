package restripe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/placement"
)

// A Restriper re-protects stripes copy-on-write, for the repair, drain,
// integrityscan, mediascan and rebalance jobs, one stripe (or file) per
// call:
//
//  1. read the stripe map (generation g) and pick the units to rebuild:
//     unplaced ones, those on drives the topology says are down, those on
//     drives the caller calls bad (draining, suspended, failed), and those
//     found damaged;
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
// CommitStripe does) and starts over from the new map, which may no longer
// need repair. Units that cannot be placed (too few drives) keep their old
// entry, so a stripe is never left worse than it was, and the result says
// it is still under-protected.

// maxRepairAttempts bounds the attempts of one stripe repair when its
// generation keeps moving.
const maxRepairAttempts = 4

// maxPutRounds bounds re-placing units whose put failed, in one attempt.
const maxPutRounds = 3

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
	// Failed counts stripes whose repair returned an error.
	UnderProtected int `json:"under_protected"`
	Failed         int `json:"failed"`
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
// not placed or on a bad or down drive (BadDrives), reading the stripe
// maps in pages; other stripes are skipped without being read. A stripe
// that fails does not stop the others: the error of the first failure is
// returned (wrapped, with the count) after all were tried, except for
// context errors and client.ErrClosed, which stop at once. Units damaged on a healthy drive are
// not looked for: that is VerifyFile's job.
func (r *Restriper) RepairFile(ctx context.Context, lin meta.LIN, bad func(meta.DriveID) bool) (FileRepairResult, error) {
	res := FileRepairResult{LIN: lin}
	isBad, err := r.BadDrives(ctx, bad)
	if err != nil {
		return res, err
	}
	var first error
	err = r.eachStripe(ctx, lin, func(s meta.Stripe) error {
		res.Stripes++
		if !StripeNeedsRepair(s, isBad) {
			res.Skipped++
			return nil
		}
		rr, err := r.RepairStripe(ctx, lin, s.Index, bad)
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
	})
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

// repairStripe is RepairStripe with damaged units.
func (r *Restriper) repairStripe(ctx context.Context, rq repairRequest) (RepairResult, error) {
	res := RepairResult{LIN: rq.lin, Stripe: rq.index}
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		err := r.repairOnce(ctx, rq, &res)
		if !errors.Is(err, errRepairStale) {
			return res, err
		}
		if attempt >= maxRepairAttempts {
			return res, fmt.Errorf("%w: repairing LIN %d stripe %d: gave up after %d attempts: %w", client.ErrConflict, rq.lin, rq.index, attempt, err)
		}
	}
}

// repairTarget is a unit being rebuilt.
type repairTarget struct {
	unit int
	why  string
	// rank orders placement when drives are short: units whose bytes
	// exist nowhere else first, then units on down drives (they may come
	// back), then units still readable on a bad drive.
	rank int
	data []byte   // the unit's bytes, once read or rebuilt
	segs []uint32 // data's segment CRCs (drive.AppendSegmentCRCs)
	// soft: the old drive is up and not bad (a damaged block): avoid it
	// if the pool allows.
	soft bool
}

// Ranks of repairTarget.
const (
	rankLost = iota
	rankDown
	rankReadable
)

// repairOnce is one attempt of repairStripe. It updates res and returns
// errRepairStale (wrapped) when the attempt must start over.
func (r *Restriper) repairOnce(ctx context.Context, rq repairRequest, res *RepairResult) error {
	lin := rq.lin
	res.Committed, res.NothingToDo, res.Rebuilt, res.Moved = false, false, 0, 0
	res.StillUnderProtected, res.Left, res.Reason, res.Units = false, 0, "", nil
	a, err := r.meta.GetAttr(ctx, lin)
	if err != nil {
		return fmt.Errorf("restripe: repairing LIN %d: %w", lin, err)
	}
	if a.Type != meta.TypeFile {
		return fmt.Errorf("%w: repairing LIN %d: a %s, not a regular file", client.ErrInvalid, lin, a.Type)
	}
	got, err := r.meta.GetStripes(ctx, lin, rq.index, 1)
	if err != nil {
		return fmt.Errorf("restripe: repairing LIN %d stripe %d: %w", lin, rq.index, err)
	}
	if len(got) == 0 || got[0].Index != rq.index {
		res.NothingToDo = true
		return nil
	}
	s := got[0]
	res.Gen = s.Gen
	l, err := client.StoredLayout(lin, s)
	if err != nil {
		return err
	}
	view, err := r.data.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("restripe: repairing LIN %d stripe %d: %w", lin, s.Index, err)
	}
	isBad := func(d meta.DriveID) bool { return rq.bad != nil && rq.bad(d) }

	// 1. The units to rebuild.
	var targets []*repairTarget
	byUnit := map[int]*repairTarget{}
	add := func(i int, rank int, soft bool, why string) {
		t := &repairTarget{unit: i, why: why, rank: rank, soft: soft}
		targets = append(targets, t)
		byUnit[i] = t
	}
	for i, u := range s.Units {
		switch {
		case !u.Placed():
			add(i, rankLost, false, "not placed")
		case rq.damaged[unitID{u.Drive, u.Block}] != "":
			add(i, rankLost, view.Up(u.Drive) && !isBad(u.Drive), rq.damaged[unitID{u.Drive, u.Block}])
		case !view.Up(u.Drive):
			add(i, rankDown, false, fmt.Sprintf("drive %d is down", u.Drive))
		case isBad(u.Drive):
			add(i, rankReadable, false, fmt.Sprintf("drive %d is to be emptied", u.Drive))
		case rq.move[unitID{u.Drive, u.Block}] != "":
			add(i, rankReadable, false, rq.move[unitID{u.Drive, u.Block}])
		}
	}
	if len(targets) == 0 {
		res.NothingToDo = true
		res.Tolerance = healthyTolerance(s, l, view, isBad)
		return nil
	}

	// Without a drive to take any of them, leave the stripe as it is
	// without reading it (a repair job may retry it often).
	req, soft := r.repairPlacement(rq, a.Pool, s, l, view, targets)
	if drives, _, err := placeAvoiding(req, soft); len(drives) == 0 {
		if err != nil && !errors.Is(err, placement.ErrNotEnoughDrives) {
			return fmt.Errorf("restripe: placing the repair of LIN %d stripe %d: %w", lin, s.Index, err)
		}
		res.StillUnderProtected, res.Left = true, len(targets)
		res.Reason = fmt.Sprintf("%d units found no eligible drive: %v", len(targets), err)
		res.Tolerance = healthyTolerance(s, l, view, isBad)
		res.Units = unitRepairs(s, targets, nil)
		return nil
	}

	// 2. Their bytes: copied where the old block still reads, else rebuilt.
	shards := make([][]byte, l.Width())
	var direct []int
	for _, t := range targets {
		if t.rank == rankReadable {
			direct = append(direct, t.unit)
		}
	}
	failed := map[int]error{}
	res.BytesRead += r.readUnits(ctx, lin, s, view, direct, shards, failed)
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, i := range direct {
		if shards[i] != nil {
			byUnit[i].data = shards[i]
		} else {
			byUnit[i].rank = rankLost
			byUnit[i].why += fmt.Sprintf(", and unreadable: %v", failed[i])
		}
	}
	need := slices.ContainsFunc(targets, func(t *repairTarget) bool { return t.data == nil })
	if need {
		present := 0
		for _, sh := range shards {
			if sh != nil {
				present++
			}
		}
		// Surviving units, data units first (they are in index order).
		var order []int
		for i, u := range s.Units {
			if byUnit[i] == nil && u.Placed() {
				order = append(order, i)
			}
		}
		for present < l.Needed() && len(order) > 0 {
			take := order[:min(l.Needed()-present, len(order))]
			order = order[len(take):]
			res.BytesRead += r.readUnits(ctx, lin, s, view, take, shards, failed)
			if err := ctx.Err(); err != nil {
				return err
			}
			for _, i := range take {
				if shards[i] != nil {
					present++
					continue
				}
				// A survivor that does not read is rebuilt too.
				add(i, rankLost, view.Up(s.Units[i].Drive) && !isBad(s.Units[i].Drive), fmt.Sprintf("unreadable: %v", failed[i]))
			}
		}
		if present < l.Needed() {
			if r.mapMoved(ctx, lin, s, failed) {
				return fmt.Errorf("%w: blocks of generation %d are gone", errRepairStale, s.Gen)
			}
			return fmt.Errorf("%w: repairing LIN %d stripe %d (%v): %d units readable, %d needed (%s); bring the drives or nodes back up, then repair again",
				client.ErrUnavailable, lin, s.Index, l, present, l.Needed(), reasons(failed))
		}
		if err := r.codec.Reconstruct(shards, l); err != nil {
			return fmt.Errorf("%w: repairing LIN %d stripe %d: %w", client.ErrUnavailable, lin, s.Index, err)
		}
	}
	crcs := map[int]uint32{}
	for _, t := range targets {
		if t.data == nil {
			t.data = shards[t.unit]
		}
		t.segs, crcs[t.unit] = drive.AppendSegmentCRCs(nil, t.data)
		old := s.Units[t.unit]
		if old.Placed() && rq.damaged[unitID{old.Drive, old.Block}] == "" && crcs[t.unit] != old.CRC {
			return fmt.Errorf("%w: repairing LIN %d stripe %d: unit %d as rebuilt does not match the CRC its stripe map records; the surviving units disagree: verify the stripe (integrityscan)",
				client.ErrCorrupt, lin, s.Index, t.unit)
		}
	}

	// 3. Place and put the new units.
	slices.SortStableFunc(targets, func(x, y *repairTarget) int { return x.rank - y.rank })
	fresh, maybe, written, left, err := r.placeRepair(ctx, rq, a.Pool, s, l, view, targets, crcs)
	res.BytesWritten += written
	if err != nil {
		r.enqueueOrphans(ctx, lin, s.Index, append(maybe, unitsOf(fresh)...))
		return err
	}
	if len(maybe) > 0 {
		r.enqueueOrphans(ctx, lin, s.Index, maybe)
	}
	if left != "" {
		res.Reason = left
	}
	if len(fresh) == 0 {
		res.StillUnderProtected, res.Left = true, len(targets)
		res.Tolerance = healthyTolerance(s, l, view, isBad)
		res.Units = unitRepairs(s, targets, fresh)
		return nil
	}

	// 4. Commit copy-on-write.
	ns := s
	ns.Units = slices.Clone(s.Units)
	for i, u := range fresh {
		ns.Units[i] = u
	}
	// A move is optional: it never costs the stripe protection (when the
	// allowed drives are all on a node the stripe already loads, say).
	if before, after := healthyTolerance(s, l, view, isBad), healthyTolerance(ns, l, view, isBad); len(rq.move) > 0 &&
		(after.Drives < before.Drives || after.Nodes < before.Nodes) {
		r.enqueueOrphans(ctx, lin, s.Index, unitsOf(fresh))
		res.Left, res.Tolerance = len(targets), before
		res.Reason = fmt.Sprintf("not moved: the stripe would survive %v instead of %v", after, before)
		res.Units = unitRepairs(s, targets, nil)
		return nil
	}
	// The commit queues the new blocks for deletion if it surely did not
	// happen, and leaves them for the collect job if it may have.
	committed, err := r.data.CommitStripe(ctx, lin, ns, s.Gen, unitsOf(fresh), meta.CommitOptions{Restripe: true})
	if err != nil {
		if errors.Is(err, meta.ErrStripeConflict) {
			return fmt.Errorf("%w: %w", errRepairStale, err)
		}
		return fmt.Errorf("restripe: committing the repair of LIN %d stripe %d: %w", lin, s.Index, err)
	}
	res.Committed, res.Gen = true, committed.Gen
	for _, t := range targets {
		if _, ok := fresh[t.unit]; !ok {
			res.Left++
			continue
		}
		if t.rank == rankReadable {
			res.Moved++
		} else {
			res.Rebuilt++
		}
	}
	res.StillUnderProtected = res.Left > 0
	res.Tolerance = healthyTolerance(committed, l, view, isBad)
	res.Units = unitRepairs(s, targets, fresh)
	r.log.Debug("stripe repaired", "lin", uint64(lin), "stripe", s.Index, "gen", committed.Gen,
		"rebuilt", res.Rebuilt, "moved", res.Moved, "left", res.Left)
	return nil
}

// readUnits reads the given units of s whole, in parallel, into shards
// (nil for a unit that failed, with its error in failed), and returns the
// bytes read. The reads check block identity and the map's CRC
// (client.Client.ReadUnit): a rebuild must not start from a unit that is
// not the one committed.
func (r *Restriper) readUnits(ctx context.Context, lin meta.LIN, s meta.Stripe, view *client.Snapshot, units []int, shards [][]byte, failed map[int]error) int64 {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
	)
	for _, i := range units {
		u := s.Units[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := r.data.ReadUnit(ctx, view, client.UnitRef{LIN: lin, Stripe: s.Index, Index: i, Unit: u})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[i] = err
				return
			}
			shards[i] = data
			total += int64(len(data))
		}()
	}
	wg.Wait()
	return total
}

// mapMoved reports whether a failure to read s may come from a stale map:
// a unit was not found and the stripe's generation has moved since.
func (r *Restriper) mapMoved(ctx context.Context, lin meta.LIN, s meta.Stripe, failed map[int]error) bool {
	notFound := false
	for _, err := range failed {
		notFound = notFound || errors.Is(err, drive.ErrNotFound)
	}
	if !notFound {
		return false
	}
	got, err := r.meta.GetStripes(ctx, lin, s.Index, 1)
	return err == nil && (len(got) == 0 || got[0].Index != s.Index || got[0].Gen != s.Gen)
}

// placeRepair places the targets (in rank order: the first get drives when
// they are short) and puts their bytes, re-placing a unit whose put fails
// up to maxPutRounds rounds. It returns the new units by unit index, the
// units of failed puts (they may have left a block), the bytes written,
// and why some targets got no drive or could not be written ("" if all
// were written). The caller keeps the old entry of those.
func (r *Restriper) placeRepair(ctx context.Context, rq repairRequest, pool string, s meta.Stripe, l erasure.StripeLayout, view *client.Snapshot, targets []*repairTarget, crcs map[int]uint32) (fresh map[int]meta.Unit, maybe []meta.Unit, written int64, left string, err error) {
	base, soft := r.repairPlacement(rq, pool, s, l, view, targets)
	hard, kept := base.Exclude, base.Existing
	fresh = map[int]meta.Unit{}
	nodes := map[int]string{}
	pending := targets
	var (
		lastErr, placeErr error
		noDrive           int
	)
	for round := 1; len(pending) > 0 && round <= maxPutRounds; round++ {
		existing := slices.Clone(kept)
		for i, u := range fresh {
			existing = append(existing, placement.Unit{Drive: placement.DriveID(u.Drive), Node: nodes[i]})
		}
		req := base
		req.Width, req.Exclude, req.Existing = len(pending), hard, existing
		drives, dnodes, perr := placeAvoiding(req, soft)
		if perr != nil && !errors.Is(perr, placement.ErrNotEnoughDrives) {
			return fresh, maybe, written, "", fmt.Errorf("restripe: placing the repair of LIN %d stripe %d: %w", rq.lin, s.Index, perr)
		}
		if len(drives) < len(pending) {
			noDrive += len(pending) - len(drives)
			if placeErr = perr; placeErr == nil {
				placeErr = fmt.Errorf("%w: %d eligible drives for %d units", placement.ErrNotEnoughDrives, len(drives), len(pending))
			}
		}
		placed := pending[:len(drives)]
		units := make([]meta.Unit, len(placed))
		errs := make([]error, len(placed))
		var wg sync.WaitGroup
		for j, t := range placed {
			units[j] = meta.Unit{Drive: meta.DriveID(drives[j]), Block: meta.BlockID(drive.NewBlockID()), Length: uint32(l.UnitLen), CRC: crcs[t.unit]}
			ref := client.UnitRef{LIN: rq.lin, Stripe: s.Index, Index: t.unit, Unit: units[j]}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[j] = r.data.PutUnit(ctx, view, ref, s.Gen+1, t.data, t.segs)
			}()
		}
		wg.Wait()
		var retry []*repairTarget
		for j, t := range placed {
			if errs[j] != nil {
				hard = append(hard, drives[j])
				maybe = append(maybe, units[j])
				lastErr = fmt.Errorf("unit %d on drive %d (node %s): %w", t.unit, units[j].Drive, dnodes[j], errs[j])
				retry = append(retry, t)
				continue
			}
			fresh[t.unit], nodes[t.unit] = units[j], dnodes[j]
			written += int64(len(t.data))
		}
		if err := ctx.Err(); err != nil {
			return fresh, maybe, written, "", err
		}
		pending = retry
	}
	var why []string
	if noDrive > 0 {
		why = append(why, fmt.Sprintf("%d of %d units found no eligible drive: %v", noDrive, len(targets), placeErr))
	}
	if len(pending) > 0 {
		why = append(why, fmt.Sprintf("%d units could not be written, the last: %v", len(pending), lastErr))
	}
	return fresh, maybe, written, strings.Join(why, "; "), nil
}

// repairPlacement returns the placement request for the targets of s
// (repair mode: the other placed units in Existing; the drives bad names
// and the old drives of the targets in Exclude) and the drives to avoid
// only while others are eligible: the old drives of damaged units on
// drives that are otherwise fine.
func (r *Restriper) repairPlacement(rq repairRequest, pool string, s meta.Stripe, l erasure.StripeLayout, view *client.Snapshot, targets []*repairTarget) (placement.Request, []placement.DriveID) {
	isTarget := map[int]bool{}
	var hard, soft []placement.DriveID
	for _, t := range targets {
		isTarget[t.unit] = true
		if old := s.Units[t.unit]; old.Placed() {
			if t.soft {
				soft = append(soft, placement.DriveID(old.Drive))
			} else {
				hard = append(hard, placement.DriveID(old.Drive))
			}
		}
	}
	cands := view.Candidates(pool)
	for _, cd := range cands {
		if (rq.bad != nil && rq.bad(meta.DriveID(cd.ID))) || (rq.allow != nil && !rq.allow(meta.DriveID(cd.ID))) {
			hard = append(hard, cd.ID)
		}
	}
	var kept []placement.Unit
	for i, u := range s.Units {
		if !isTarget[i] && u.Placed() {
			kept = append(kept, placement.Unit{Drive: placement.DriveID(u.Drive), Node: view.Node(u.Drive)})
		}
	}
	return placement.Request{
		Candidates: cands, Width: len(targets), Min: 1, Needed: l.Needed(), UnitBytes: int64(l.UnitLen) + drive.HeaderAlign,
		Exclude: hard, Existing: kept, Label: fmt.Sprintf("repair of %v in pool %s", l, pool), Rand: r.rng(),
	}, soft
}

// placeAvoiding is placement.Place that also avoids the drives in soft
// while the pool has others: units it cannot place that way are placed
// again without that restriction. It returns the drives and their nodes,
// in unit order, possibly fewer than req.Width, and Place's error when it
// placed none.
func placeAvoiding(req placement.Request, soft []placement.DriveID) ([]placement.DriveID, []string, error) {
	first := req
	first.Exclude = append(slices.Clone(req.Exclude), soft...)
	res, err := placement.Place(first)
	var drives []placement.DriveID
	var nodes []string
	if err == nil {
		drives, nodes = res.Drives, res.Nodes
	} else if !errors.Is(err, placement.ErrNotEnoughDrives) {
		return nil, nil, err
	}
	if len(drives) == req.Width || len(soft) == 0 {
		return drives, nodes, err
	}
	second := req
	second.Width = req.Width - len(drives)
	second.Min = 1
	second.Existing = slices.Clone(req.Existing)
	second.Exclude = slices.Clone(req.Exclude)
	for i, d := range drives {
		second.Existing = append(second.Existing, placement.Unit{Drive: d, Node: nodes[i]})
	}
	res2, err2 := placement.Place(second)
	if err2 != nil {
		if len(drives) > 0 {
			err2 = nil
		}
		return drives, nodes, err2
	}
	return append(drives, res2.Drives...), append(nodes, res2.Nodes...), nil
}

// unitRepairs describes what became of the targets.
func unitRepairs(s meta.Stripe, targets []*repairTarget, fresh map[int]meta.Unit) []UnitRepair {
	out := make([]UnitRepair, len(targets))
	for j, t := range targets {
		out[j] = UnitRepair{Unit: t.unit, From: s.Units[t.unit].Drive, To: fresh[t.unit].Drive, Moved: t.rank == rankReadable, Why: t.why}
	}
	return out
}

// unitsOf returns the units of a map by unit index, in index order.
func unitsOf(m map[int]meta.Unit) []meta.Unit {
	keys := make([]int, 0, len(m))
	for i := range m {
		keys = append(keys, i)
	}
	sort.Ints(keys)
	out := make([]meta.Unit, len(keys))
	for j, i := range keys {
		out[j] = m[i]
	}
	return out
}

// healthyTolerance is the tolerance of s counting only units on drives
// that are up and not bad.
func healthyTolerance(s meta.Stripe, l erasure.StripeLayout, view *client.Snapshot, isBad func(meta.DriveID) bool) placement.Tolerance {
	var units []placement.Unit
	for _, u := range s.Units {
		if u.Placed() && view.Up(u.Drive) && !isBad(u.Drive) {
			units = append(units, placement.Unit{Drive: placement.DriveID(u.Drive), Node: view.Node(u.Drive)})
		}
	}
	return placement.ComputeTolerance(units, l.Needed())
}
