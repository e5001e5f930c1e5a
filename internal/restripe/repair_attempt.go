package restripe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/placement"
)

// repairTarget is a unit being rebuilt, copied or moved.
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

// attempt is one attempt of repairStripe at one generation of the stripe:
// what it read (the file's pool, the stripe map s and its layout l, and
// the topology snapshot every decision of the attempt uses), the units it
// works on, and their bytes. res is the caller's result, which the steps
// fill in as they go. An attempt is used by one goroutine, except inside
// readUnits and placeRepair, which fan out and gather under their own
// locks.
type attempt struct {
	rq   repairRequest
	res  *RepairResult
	pool string
	s    meta.Stripe
	l    erasure.StripeLayout
	view *client.Snapshot
	// targets are the units that must go elsewhere, in the order they
	// were picked (by rank once placing starts); byUnit indexes them.
	targets []*repairTarget
	byUnit  map[int]*repairTarget
	// shards holds the units' bytes as read or rebuilt, by unit index;
	// failed, the units whose read failed, with why.
	shards [][]byte
	failed map[int]error
}

// isBad reports whether the caller asked for drive d to be emptied.
func (a *attempt) isBad(d meta.DriveID) bool { return a.rq.bad != nil && a.rq.bad(d) }

// add makes unit i a target.
func (a *attempt) add(i, rank int, soft bool, why string) {
	t := &repairTarget{unit: i, why: why, rank: rank, soft: soft}
	a.targets = append(a.targets, t)
	a.byUnit[i] = t
}

// placed returns the tolerance of s as placed (whatever drives are up)
// and its target (Snapshot.StripeTolerance): what the protection index
// records for it.
func (a *attempt) placed(s meta.Stripe) meta.StripeTolerance {
	t, err := a.view.StripeTolerance(a.pool, a.rq.lin, s)
	if err != nil { // the layout was read from this map: cannot happen
		return meta.StripeTolerance{}
	}
	return t
}

// setTarget fills res's target and whether s (the map read, or the one
// committed) is below it.
func (a *attempt) setTarget(s meta.Stripe) {
	t := a.placed(s)
	a.res.Target = placement.Tolerance{Drives: t.Target.Drives, Nodes: t.Target.Nodes}
	a.res.BelowTarget = t.Below()
}

// tolerance is the tolerance of s (the map read, or one to commit)
// counting only units on drives that are up and not to be emptied.
func (a *attempt) tolerance(s meta.Stripe) placement.Tolerance {
	var units []placement.Unit
	for _, u := range s.Units {
		if u.Placed() && a.view.Up(u.Drive) && !a.isBad(u.Drive) {
			units = append(units, placement.Unit{Drive: placement.DriveID(u.Drive), Node: a.view.Node(u.Drive)})
		}
	}
	return placement.ComputeTolerance(units, a.l.Needed())
}

// repairOnce is one attempt of repairStripe. Its steps, each of which may
// end the attempt: read the stripe and the topology (readAttempt); pick
// the units that must go elsewhere (pickTargets); give up before reading
// anything when no drive can take any of them (placeable); get their
// bytes, copied or rebuilt (gather), and check them against the map
// (checkRebuilt); place and store them (storeTargets); drop a move that
// would cost the stripe protection (costlyMove); commit copy-on-write on
// the generation read (commit); account for what was done (report).
//
// It resets and fills res, and returns errRepairStale (wrapped) when the
// attempt must start over from a fresh map. Whatever it returns, every
// block it stored is either named by the committed map, queued for
// deletion, or (after a commit whose outcome is unknown) left for the
// collect job.
func (r *Restriper) repairOnce(ctx context.Context, rq repairRequest, res *RepairResult) error {
	p, err := r.prepareOnce(ctx, rq, res)
	if err != nil || p == nil {
		return err
	}
	committed, err := r.commit(ctx, p.a.rq.lin, []*prepared{p})
	if err != nil {
		return err
	}
	p.finish(r, committed[0])
	return nil
}

// prepared is an attempt whose new units are stored, waiting for the
// commit of the new map ns: fresh are the units ns names that the map
// read does not.
type prepared struct {
	a     *attempt
	ns    meta.Stripe
	fresh map[int]meta.Unit
}

// finish fills the attempt's result after its map was committed as
// committed.
func (p *prepared) finish(r *Restriper, committed meta.Stripe) {
	p.a.report(committed, p.fresh)
	res := p.a.res
	r.log.Debug("stripe repaired", "lin", uint64(p.a.rq.lin), "stripe", p.a.s.Index, "gen", committed.Gen,
		"rebuilt", res.Rebuilt, "moved", res.Moved, "left", res.Left)
}

// prepareOnce is repairOnce up to its commit: it returns the attempt
// with its new units stored, or nil when the attempt ends without a
// commit (nothing to do, nothing placeable, a move not worth it: res
// says what), or its error.
func (r *Restriper) prepareOnce(ctx context.Context, rq repairRequest, res *RepairResult) (*prepared, error) {
	res.Committed, res.NothingToDo, res.Rebuilt, res.Moved = false, false, 0, 0
	res.StillUnderProtected, res.Left, res.Reason, res.Units = false, 0, "", nil
	res.BelowTarget, res.Target = false, placement.Tolerance{}
	a, err := r.readAttempt(ctx, rq, res)
	if err != nil || a == nil {
		return nil, err
	}
	a.pickTargets()
	a.spreadTargets()
	if len(a.targets) == 0 {
		res.NothingToDo = true
		res.Tolerance = a.tolerance(a.s)
		a.setTarget(a.s)
		if res.BelowTarget {
			res.Reason = fmt.Sprintf("below its pool's target %v, and no eligible drive on a less loaded node (nodes down, suspended or full)", res.Target)
		}
		return nil, nil
	}
	if ok, err := r.placeable(a); !ok || err != nil {
		return nil, err
	}
	if err := r.gather(ctx, a); err != nil {
		return nil, err
	}
	crcs, err := a.checkRebuilt()
	if err != nil {
		return nil, err
	}
	fresh, err := r.storeTargets(ctx, a, crcs)
	if err != nil || len(fresh) == 0 {
		return nil, err
	}
	ns := a.s
	ns.Units = slices.Clone(a.s.Units)
	for i, u := range fresh {
		ns.Units[i] = u
	}
	if r.costlyMove(ctx, a, ns, fresh) {
		return nil, nil
	}
	return &prepared{a: a, ns: ns, fresh: fresh}, nil
}

// readAttempt reads what an attempt works from: the file's attributes
// (its pool; it must be a regular file), the map of the stripe
// (res.Gen is set to its generation) and its layout — on a first attempt,
// those the request has seen, if any — and one topology snapshot. It returns a nil attempt and sets res.NothingToDo when the
// stripe no longer exists (a truncate removed it). It changes nothing.
// Errors: client.ErrInvalid for a LIN that is not a regular file;
// client.ErrCorrupt for a malformed map; client.ErrClosed; meta's and the
// topology's errors, wrapped.
func (r *Restriper) readAttempt(ctx context.Context, rq repairRequest, res *RepairResult) (*attempt, error) {
	lin := rq.lin
	var attr meta.Attr
	var s meta.Stripe
	if rq.seen != nil && res.Attempts == 1 && rq.seen.s.Index == rq.index {
		attr, s = rq.seen.attr, rq.seen.s
	} else {
		var err error
		if attr, err = r.meta.GetAttr(ctx, lin); err != nil {
			return nil, fmt.Errorf("restripe: repairing LIN %d: %w", lin, err)
		}
		got, err := r.meta.GetStripes(ctx, lin, rq.index, 1)
		if err != nil {
			return nil, fmt.Errorf("restripe: repairing LIN %d stripe %d: %w", lin, rq.index, err)
		}
		if len(got) == 0 || got[0].Index != rq.index {
			res.NothingToDo = true
			return nil, nil
		}
		s = got[0]
	}
	if attr.Type != meta.TypeFile {
		return nil, fmt.Errorf("%w: repairing LIN %d: a %s, not a regular file", client.ErrInvalid, lin, attr.Type)
	}
	res.Gen = s.Gen
	l, err := client.StoredLayout(lin, s)
	if err != nil {
		return nil, err
	}
	view, err := r.data.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("restripe: repairing LIN %d stripe %d: %w", lin, s.Index, err)
	}
	return &attempt{rq: rq, res: res, pool: attr.Pool, s: s, l: l, view: view, byUnit: map[int]*repairTarget{}}, nil
}

// pickTargets decides, from the map and the snapshot alone, which units
// must go elsewhere, in unit order, each with its rank and why: unplaced
// units and units known damaged are lost (rebuilt; a damaged unit whose
// drive is up and not to be emptied only avoids that drive if the pool
// allows), units on down drives are rebuilt, and units on drives to be
// emptied or named to move are copied as they are.
func (a *attempt) pickTargets() {
	for i, u := range a.s.Units {
		id := unitID{u.Drive, u.Block}
		switch {
		case !u.Placed():
			a.add(i, rankLost, false, "not placed")
		case a.rq.damaged[id] != "":
			a.add(i, rankLost, a.view.Up(u.Drive) && !a.isBad(u.Drive), a.rq.damaged[id])
		case !a.view.Up(u.Drive):
			a.add(i, rankDown, false, fmt.Sprintf("drive %d is down", u.Drive))
		case a.isBad(u.Drive):
			a.add(i, rankReadable, false, fmt.Sprintf("drive %d is to be emptied", u.Drive))
		case a.rq.move[id] != "":
			a.add(i, rankReadable, false, a.rq.move[id])
		}
	}
}

// spreadTargets adds, unless the request names units to move (a
// rebalance decides its own), the units to copy to other nodes so that
// the stripe's units spread as its pool allows (placement.Spread over the
// units staying, with the targets already picked to be placed first, and
// the drives eligible for the repair): a stripe written while a node was
// down sits on too few nodes. They are copied as they are (one read
// each), like a drain's. It adds none when no move raises the stripe's
// node tolerance.
func (a *attempt) spreadTargets() {
	if len(a.rq.move) > 0 {
		return
	}
	var kept []placement.Unit
	var idx []int
	load := map[string]int{}
	for i, u := range a.s.Units {
		if a.byUnit[i] == nil && u.Placed() {
			n := a.view.Node(u.Drive)
			kept = append(kept, placement.Unit{Drive: placement.DriveID(u.Drive), Node: n})
			idx = append(idx, i)
			load[n]++
		}
	}
	cands := a.view.Candidates(a.pool)
	for i, cd := range cands {
		if a.isBad(meta.DriveID(cd.ID)) || (a.rq.allow != nil && !a.rq.allow(meta.DriveID(cd.ID))) {
			cands[i].Usable = false
		}
	}
	for _, k := range placement.Spread(kept, len(a.targets), cands, a.l.Needed(), int64(a.l.UnitLen)+drive.HeaderAlign) {
		n := kept[k].Node
		a.add(idx[k], rankReadable, false, fmt.Sprintf("spread: node %s holds %d of the stripe's %d units", n, load[n], a.l.Width()))
	}
}

// placeable reports whether some eligible drive can take a target. If
// none can, the stripe is left as it is without reading it (a repair job
// may retry it often), and res says why (StillUnderProtected, Left,
// Reason, Tolerance, Units). It reads and writes nothing. Errors:
// placement's, other than placement.ErrNotEnoughDrives.
func (r *Restriper) placeable(a *attempt) (bool, error) {
	req, soft := r.repairPlacement(a)
	drives, _, err := placeAvoiding(req, soft)
	if len(drives) > 0 {
		return true, nil
	}
	if err != nil && !errors.Is(err, placement.ErrNotEnoughDrives) {
		return false, fmt.Errorf("restripe: placing the repair of LIN %d stripe %d: %w", a.rq.lin, a.s.Index, err)
	}
	res := a.res
	res.StillUnderProtected, res.Left = true, len(a.targets)
	res.Reason = fmt.Sprintf("%d units found no eligible drive: %v", len(a.targets), err)
	res.Tolerance = a.tolerance(a.s)
	res.Units = unitRepairs(a.s, a.targets, nil)
	a.setTarget(a.s)
	return false, nil
}

// gather gets the bytes of every target into a.shards. A unit still
// readable on a drive to be emptied is copied as it is (one read per
// unit); if that read fails, the unit is lost. If some target still has
// no bytes, gather reads surviving units, data units first, until enough
// are present to rebuild — a survivor that does not read becomes a
// target too — and reconstructs the stripe (Reed–Solomon, or another copy
// of a mirror). The bytes read are added to res.BytesRead. It writes
// nothing.
//
// Errors: errRepairStale (wrapped) when too few units read because blocks
// are gone and the map has moved meanwhile; client.ErrUnavailable when
// too few units read otherwise (bring drives or nodes back); context
// errors.
func (r *Restriper) gather(ctx context.Context, a *attempt) error {
	s, l, res := a.s, a.l, a.res
	a.shards = make([][]byte, l.Width())
	a.failed = map[int]error{}
	var direct []int
	for _, t := range a.targets {
		if t.rank == rankReadable {
			direct = append(direct, t.unit)
		}
	}
	res.BytesRead += r.readUnits(ctx, a.view, a.rq.lin, a.s, direct, a.shards, a.failed)
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, i := range direct {
		if a.shards[i] != nil {
			a.byUnit[i].data = a.shards[i]
		} else {
			a.byUnit[i].rank = rankLost
			a.byUnit[i].why += fmt.Sprintf(", and unreadable: %v", a.failed[i])
		}
	}
	if !slices.ContainsFunc(a.targets, func(t *repairTarget) bool { return t.data == nil }) {
		return nil
	}
	present := 0
	for _, sh := range a.shards {
		if sh != nil {
			present++
		}
	}
	// Surviving units, data units first (they are in index order).
	var order []int
	for i, u := range s.Units {
		if a.byUnit[i] == nil && u.Placed() {
			order = append(order, i)
		}
	}
	for present < l.Needed() && len(order) > 0 {
		take := order[:min(l.Needed()-present, len(order))]
		order = order[len(take):]
		res.BytesRead += r.readUnits(ctx, a.view, a.rq.lin, a.s, take, a.shards, a.failed)
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, i := range take {
			if a.shards[i] != nil {
				present++
				continue
			}
			// A survivor that does not read is rebuilt too.
			d := s.Units[i].Drive
			a.add(i, rankLost, a.view.Up(d) && !a.isBad(d), fmt.Sprintf("unreadable: %v", a.failed[i]))
		}
	}
	if present < l.Needed() {
		if r.mapMoved(ctx, a) {
			return fmt.Errorf("%w: blocks of generation %d are gone", errRepairStale, s.Gen)
		}
		why, gone := a.unusable()
		if lost := lostOf(a.rq.lin, s, l.Needed(), gone); lost != nil {
			return fmt.Errorf("restripe: repairing LIN %d stripe %d (%v): %w", a.rq.lin, s.Index, l, lost)
		}
		return fmt.Errorf("%w: repairing LIN %d stripe %d (%v): %d units readable, %d needed (%s); bring the drives or nodes back up, then repair again",
			client.ErrUnavailable, a.rq.lin, s.Index, l, present, l.Needed(), unitReasons(why))
	}
	if err := r.codec.Reconstruct(a.shards, l); err != nil {
		return fmt.Errorf("%w: repairing LIN %d stripe %d: %w", client.ErrUnavailable, a.rq.lin, s.Index, err)
	}
	return nil
}

// unusable says, for every unit gather has no bytes of, why (the
// target's reason, or its read's failure), and which of them are gone
// for good: not placed, known damaged, or whose read found the block
// missing or corrupt (a unit on a down or unreachable drive may come
// back).
func (a *attempt) unusable() (why, gone map[int]string) {
	why, gone = map[int]string{}, map[int]string{}
	for i, u := range a.s.Units {
		if a.shards[i] != nil {
			continue
		}
		w := "not read"
		if t := a.byUnit[i]; t != nil {
			w = t.why
		} else if err := a.failed[i]; err != nil {
			w = err.Error()
		}
		why[i] = w
		switch {
		case !u.Placed(), a.rq.damaged[unitID{u.Drive, u.Block}] != "":
			gone[i] = w
		case a.failed[i] != nil && goneFor(a.failed[i]):
			gone[i] = w
		}
	}
	return why, gone
}

// mapMoved reports whether the failures to read a.s may come from a stale
// map: a unit was not found and the stripe's generation has moved since.
func (r *Restriper) mapMoved(ctx context.Context, a *attempt) bool {
	notFound := false
	for _, err := range a.failed {
		notFound = notFound || errors.Is(err, drive.ErrNotFound)
	}
	if !notFound {
		return false
	}
	got, err := r.meta.GetStripes(ctx, a.rq.lin, a.s.Index, 1)
	return err == nil && (len(got) == 0 || got[0].Index != a.s.Index || got[0].Gen != a.s.Gen)
}

// checkRebuilt takes each target's bytes from a.shards (copied ones have
// theirs), computes their segment CRCs and whole-unit CRC, and checks
// that a unit the map places, unless it is known damaged, comes out with
// the CRC the map records. It returns the CRCs by unit index. It reads
// and writes nothing. Errors: client.ErrCorrupt when a rebuilt unit does
// not match: the surviving units disagree, and nothing may be written
// from them.
func (a *attempt) checkRebuilt() (map[int]uint32, error) {
	crcs := map[int]uint32{}
	for _, t := range a.targets {
		if t.data == nil {
			t.data = a.shards[t.unit]
		}
		t.segs, crcs[t.unit] = drive.AppendSegmentCRCs(nil, t.data)
		old := a.s.Units[t.unit]
		if old.Placed() && a.rq.damaged[unitID{old.Drive, old.Block}] == "" && crcs[t.unit] != old.CRC {
			return nil, fmt.Errorf("%w: repairing LIN %d stripe %d: unit %d as rebuilt does not match the CRC its stripe map records; the surviving units disagree: verify the stripe (integrityscan)",
				client.ErrCorrupt, a.rq.lin, a.s.Index, t.unit)
		}
	}
	return crcs, nil
}

// storeTargets places the targets, most precious first (by rank), and
// puts their bytes as new blocks (placeRepair), adding the bytes written
// to res. It returns the new units by unit index; targets that got no
// drive or could not be written keep their old entry, and res.Reason says
// why. When none was stored, it returns none and res says the stripe is
// left as it was (StillUnderProtected, Left, Tolerance, Units). Blocks of
// failed puts are queued for deletion, and so is every block stored when
// it returns an error. Errors: placement's, other than
// placement.ErrNotEnoughDrives; context errors.
func (r *Restriper) storeTargets(ctx context.Context, a *attempt, crcs map[int]uint32) (map[int]meta.Unit, error) {
	res := a.res
	slices.SortStableFunc(a.targets, func(x, y *repairTarget) int { return x.rank - y.rank })
	fresh, maybe, written, left, err := r.placeRepair(ctx, a, crcs)
	res.BytesWritten += written
	if err != nil {
		r.enqueueOrphans(ctx, a.rq.lin, a.s.Index, append(maybe, unitsOf(fresh)...))
		return nil, err
	}
	if len(maybe) > 0 {
		r.enqueueOrphans(ctx, a.rq.lin, a.s.Index, maybe)
	}
	if left != "" {
		res.Reason = left
	}
	if len(fresh) == 0 {
		res.StillUnderProtected, res.Left = true, len(a.targets)
		res.Tolerance = a.tolerance(a.s)
		res.Units = unitRepairs(a.s, a.targets, fresh)
		a.setTarget(a.s)
		return nil, nil
	}
	return fresh, nil
}

// costlyMove reports whether ns, the map to commit, would survive fewer
// drive or node failures than the map read while the request moves units
// (a rebalance): a move is optional and must never cost the stripe
// protection (when the allowed drives are all on a node the stripe
// already loads, say). If so, the fresh blocks are queued for deletion,
// nothing is committed, and res says why.
func (r *Restriper) costlyMove(ctx context.Context, a *attempt, ns meta.Stripe, fresh map[int]meta.Unit) bool {
	if len(a.rq.move) == 0 {
		return false
	}
	before, after := a.tolerance(a.s), a.tolerance(ns)
	if after.Drives >= before.Drives && after.Nodes >= before.Nodes {
		return false
	}
	r.enqueueOrphans(ctx, a.rq.lin, a.s.Index, unitsOf(fresh))
	a.res.Left, a.res.Tolerance = len(a.targets), before
	a.res.Reason = fmt.Sprintf("not moved: the stripe would survive %v instead of %v", after, before)
	a.res.Units = unitRepairs(a.s, a.targets, nil)
	a.setTarget(a.s)
	return true
}

// commit commits the new maps of ps, stripes of lin whose fresh units are
// stored, in one transaction, each on the generation its attempt read,
// keeping the file's times (client.Client.CommitStripes with Restripe),
// with their tolerance as placed (the protection index keeps an entry
// only for a stripe still below its target). It returns the committed
// maps, in the order of ps. The commit queues the fresh blocks for
// deletion if it surely did not happen and leaves them for the collect
// job if it may have.
// Errors: errRepairStale wrapping meta.ErrStripeConflict when a stripe
// changed meanwhile (none was committed); the commit's other errors,
// wrapped.
func (r *Restriper) commit(ctx context.Context, lin meta.LIN, ps []*prepared) ([]meta.Stripe, error) {
	ups := make([]meta.StripeUpdate, len(ps))
	fresh := make([][]meta.Unit, len(ps))
	for i, p := range ps {
		ups[i] = meta.StripeUpdate{Stripe: p.ns, ExpectGen: p.a.s.Gen, Tolerance: p.a.placed(p.ns), Pool: p.a.pool}
		fresh[i] = unitsOf(p.fresh)
	}
	committed, err := r.data.CommitStripes(ctx, lin, ups, fresh, meta.CommitOptions{Restripe: true})
	if err != nil {
		if errors.Is(err, meta.ErrStripeConflict) {
			return nil, fmt.Errorf("%w: %w", errRepairStale, err)
		}
		return nil, fmt.Errorf("restripe: committing the repair of LIN %d from stripe %d: %w", lin, ps[0].a.s.Index, err)
	}
	return committed, nil
}

// report fills res after a commit: the new generation, how many targets
// were moved or rebuilt and how many were left where they were (no drive
// took them), what became of each, and the committed map's tolerance.
func (a *attempt) report(committed meta.Stripe, fresh map[int]meta.Unit) {
	res := a.res
	res.Committed, res.Gen = true, committed.Gen
	for _, t := range a.targets {
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
	res.Tolerance = a.tolerance(committed)
	res.Units = unitRepairs(a.s, a.targets, fresh)
	a.setTarget(committed)
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
