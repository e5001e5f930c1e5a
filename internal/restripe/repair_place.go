package restripe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/placement"
)

// placeRepair places a.targets (in their order: the first get drives when
// drives are short) and puts their bytes as new blocks of generation
// a.s.Gen+1, re-placing a unit whose put fails, away from the drive that
// failed, up to maxPutRounds rounds. It returns the new units by unit
// index, the units of failed puts (they may have left a block: the caller
// queues them for deletion), the bytes written, and why some targets got
// no drive or could not be written ("" if all were written): the caller
// keeps the old entry of those. Errors: placement's, other than
// placement.ErrNotEnoughDrives; context errors (what was stored is
// returned with them).
func (r *Restriper) placeRepair(ctx context.Context, a *attempt, crcs map[int]uint32) (fresh map[int]meta.Unit, maybe []meta.Unit, written int64, left string, err error) {
	base, soft := r.repairPlacement(a)
	hard, kept := base.Exclude, base.Existing
	fresh = map[int]meta.Unit{}
	nodes := map[int]string{}
	pending := a.targets
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
			return fresh, maybe, written, "", fmt.Errorf("restripe: placing the repair of LIN %d stripe %d: %w", a.rq.lin, a.s.Index, perr)
		}
		if len(drives) < len(pending) {
			noDrive += len(pending) - len(drives)
			if placeErr = perr; placeErr == nil {
				placeErr = fmt.Errorf("%w: %d eligible drives for %d units", placement.ErrNotEnoughDrives, len(drives), len(pending))
			}
		}
		placed := pending[:len(drives)]
		units := make([]meta.Unit, len(placed))
		puts := make([]unitPut, len(placed))
		for j, t := range placed {
			units[j] = meta.Unit{Drive: meta.DriveID(drives[j]), Block: meta.BlockID(drive.NewBlockID()), Length: uint32(a.l.UnitLen), CRC: crcs[t.unit]}
			puts[j] = unitPut{ref: client.UnitRef{LIN: a.rq.lin, Stripe: a.s.Index, Index: t.unit, Unit: units[j]}, data: t.data, segs: t.segs}
		}
		errs := r.putUnits(ctx, a.view, a.s.Gen+1, puts)
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
		why = append(why, fmt.Sprintf("%d of %d units found no eligible drive: %v", noDrive, len(a.targets), placeErr))
	}
	if len(pending) > 0 {
		why = append(why, fmt.Sprintf("%d units could not be written, the last: %v", len(pending), lastErr))
	}
	return fresh, maybe, written, strings.Join(why, "; "), nil
}

// repairPlacement returns the placement request for a.targets (repair
// mode: the other placed units in Existing; the drives to be emptied,
// the drives the request does not allow and the old drives of the
// targets in Exclude) and the drives to avoid only while others are
// eligible: the old drives of damaged units on drives that are otherwise
// fine. It is pure but for drawing a random source.
func (r *Restriper) repairPlacement(a *attempt) (placement.Request, []placement.DriveID) {
	isTarget := map[int]bool{}
	var hard, soft []placement.DriveID
	for _, t := range a.targets {
		isTarget[t.unit] = true
		if old := a.s.Units[t.unit]; old.Placed() {
			if t.soft {
				soft = append(soft, placement.DriveID(old.Drive))
			} else {
				hard = append(hard, placement.DriveID(old.Drive))
			}
		}
	}
	cands := a.view.Candidates(a.pool)
	for _, cd := range cands {
		if a.isBad(meta.DriveID(cd.ID)) || (a.rq.allow != nil && !a.rq.allow(meta.DriveID(cd.ID))) {
			hard = append(hard, cd.ID)
		}
	}
	var kept []placement.Unit
	for i, u := range a.s.Units {
		if !isTarget[i] && u.Placed() {
			kept = append(kept, placement.Unit{Drive: placement.DriveID(u.Drive), Node: a.view.Node(u.Drive)})
		}
	}
	return placement.Request{
		Candidates: cands, Width: len(a.targets), Min: 1, Needed: a.l.Needed(), UnitBytes: int64(a.l.UnitLen) + drive.HeaderAlign,
		Exclude: hard, Existing: kept, Label: fmt.Sprintf("repair of %v in pool %s", a.l, a.pool), Rand: r.rng(),
	}, soft
}

// placeAvoiding is placement.Place that also avoids the drives in soft
// while the pool has others: units it cannot place that way are placed
// again without that restriction. It returns the drives and their nodes,
// in unit order, possibly fewer than req.Width, and Place's error when it
// placed none. It is pure.
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
