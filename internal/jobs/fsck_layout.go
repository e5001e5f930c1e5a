package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// The fsck job's layout half: its phases stripes (every unit of every
// stripe map against the block its drive holds) and usage (each pool's
// counters against its inodes and stripe maps, meta.FsckUsage).
//
// A unit is checked by reading the header of its block (the block
// service's Stat, the header read that mediascan and collect use: no
// data is read). A unit whose drive is down or out of service, or that
// is not placed, is not fsck's business (the repair job's, through the
// topology and the protection index): it is counted "skipped", as is a
// unit whose node does not answer. A block not found is a missing-unit
// finding, a header that does not read or names another file, stripe or
// unit, or a generation newer than the map's (kept units of a restriped
// stripe keep their older headers), a bad-header finding — each only
// after the stripe map is read again and still names the block (a
// writer or restriper that replaced the stripe meanwhile queued the old
// block for deletion; the check then runs on the new map). A finding is
// repaired the way mediascan repairs a bad block: the unit is rebuilt
// from the others through the restriper's copy-on-write repair
// (Restriper.RepairDamaged), which leaves a stripe alone if its map no
// longer names the block ("changed"); a stripe too damaged to rebuild
// goes to the lost-data list (recordLost) and counts as failed.

// headerReader is what the stripes phase uses of a node's block service.
type headerReader interface {
	Stat(ctx context.Context, d drive.ID, id drive.BlockID) (drive.BlockHeader, int64, time.Time, error)
}

// fsckLayoutDeps are the stripes phase's ways to the drives (the drives
// in service, cached: driveNodes), the block services and the restriper
// (the node's; tests pass their own).
type fsckLayoutDeps struct {
	drives *driveNodes
	blocks func(ctx context.Context, e Env, node string) (headerReader, error)
	repair damagedRepairer
}

func newFsckLayoutDeps() *fsckLayoutDeps {
	return &fsckLayoutDeps{drives: newDriveNodes(clusterDrives),
		blocks: func(ctx context.Context, e Env, node string) (headerReader, error) { return e.Blocks(ctx, node) },
		repair: func(ctx context.Context, e Env, lin meta.LIN, index uint64, d meta.DriveID, block meta.BlockID, why string) (restripe.RepairResult, error) {
			return e.Restriper().RepairDamaged(ctx, lin, index, d, block, why)
		}}
}

// fsckOnly returns which halves job parameters p ask for.
func fsckOnly(p map[string]string) (namespace, layout bool) {
	switch p["only"] {
	case "namespace":
		return true, false
	case "layout":
		return false, true
	}
	return true, true
}

// fsckStripes is the stripes phase: items are regular files with
// stripes (a LIN scan).
type fsckStripes struct{ t *fsckType }

func (*fsckStripes) Name() string { return "stripes" }

// Split cuts the LIN space, unless the job checks the namespace only.
func (p *fsckStripes) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	if _, layout := fsckOnly(j.Params); !layout {
		return nil, nil
	}
	return splitLINs(ctx, e.Meta(), j.Parallelism)
}

// Items lists the files with stripes in [from, to).
func (*fsckStripes) Items(ctx context.Context, env job.Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	return listLINs(ctx, e.Meta(), from, to, limit, func(in meta.Inode) bool { return in.StripeSize > 0 })
}

// Process checks every unit of one file's stripe maps (read a page at a
// time), counting "checked" (units whose block's header matched),
// "skipped" and the findings, and repairs each finding unless dry-run.
// The speed parameter paces it per unit.
func (p *fsckStripes) Process(ctx context.Context, env job.Env, j *job.Job, _ string, item uint64) (job.ItemResult, error) {
	e, err := fsckEnvOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	lin := meta.LIN(item)
	it := newFsckItem(e, j)
	it.repair = func(ctx context.Context, f meta.FsckFinding) (bool, error) {
		return p.repairUnit(ctx, e, j, f, &it.res)
	}
	err = meta.EachStripe(ctx, meta.BlockStripes(e.Meta()), lin, stripePage, func(s meta.Stripe) error {
		if err := p.t.pace(ctx, j, len(s.Units)); err != nil {
			return err
		}
		fs, err := p.checkStripe(ctx, e, lin, s, &it.res)
		if err != nil {
			return err
		}
		return it.handle(ctx, fs)
	})
	if errors.Is(err, meta.ErrNotFound) && ctx.Err() == nil {
		return it.res, nil // deleted meanwhile
	}
	if err != nil {
		return job.ItemResult{}, fmt.Errorf("fsck: stripes of LIN %d: %w", lin, err)
	}
	return it.res, nil
}

// stripePage is how many stripe maps the stripes phase reads at once.
const stripePage = 256

// maxStripeChecks bounds re-checking a stripe whose map moved while its
// units were checked.
const maxStripeChecks = 3

// checkStripe checks the units of stripe s of lin (see the comment at
// the top of the file) and returns its findings, after reading the map
// again: a map that moved (another generation or other units) is
// checked again, at most maxStripeChecks
// times (then its findings stand: blocks replaced that fast are the
// writers'); a stripe gone has none. It counts the units checked and
// skipped in res, once.
func (p *fsckStripes) checkStripe(ctx context.Context, e Env, lin meta.LIN, s meta.Stripe, res *job.ItemResult) ([]meta.FsckFinding, error) {
	for attempt := 1; ; attempt++ {
		fs, checked, skipped, err := p.checkUnits(ctx, e, lin, s)
		if err != nil {
			return nil, err
		}
		if len(fs) > 0 && attempt < maxStripeChecks {
			got, err := meta.BlockStripes(e.Meta()).GetStripes(ctx, lin, s.Index, 1)
			if err != nil {
				return nil, err
			}
			if len(got) == 0 || got[0].Index != s.Index {
				return nil, nil // truncated meanwhile
			}
			// A truncate and a new write make a stripe again from
			// generation 1: compare the units too.
			if got[0].Gen != s.Gen || !slices.Equal(got[0].Units, s.Units) {
				s = got[0]
				continue
			}
		}
		res.Counts["checked"] += int64(checked)
		if skipped > 0 {
			res.Counts["skipped"] += int64(skipped)
		}
		return fs, nil
	}
}

// checkUnits reads the header of each placed unit's block of s on a
// drive up, all at once (one goroutine per unit, ended before it
// returns), and returns the findings and the counts of units checked and
// skipped. Errors: the drive list's, the block service client's (not a
// block's), ctx's.
func (p *fsckStripes) checkUnits(ctx context.Context, e Env, lin meta.LIN, s meta.Stripe) (fs []meta.FsckFinding, checked, skipped int, err error) {
	ds, err := p.t.layout.drives.inService(ctx, e)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("fsck: listing the drives: %w", err)
	}
	type stat struct {
		node string
		hdr  drive.BlockHeader
		err  error
	}
	stats := make([]*stat, len(s.Units))
	var wg sync.WaitGroup
	for i, u := range s.Units {
		sd, ok := ds[u.Drive]
		if !u.Placed() || !ok || !sd.Up {
			skipped++ // unplaced, or on a drive down or out of service: the repair job's
			continue
		}
		bc, err := p.t.layout.blocks(ctx, e, sd.Node)
		if err != nil {
			wg.Wait()
			return nil, 0, 0, fmt.Errorf("block service of node %s: %w", sd.Node, err)
		}
		st := &stat{node: sd.Node}
		stats[i] = st
		wg.Go(func() { st.hdr, _, _, st.err = bc.Stat(ctx, drive.ID(u.Drive), drive.BlockID(u.Block)) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, err
	}
	for i, st := range stats {
		if st == nil {
			continue
		}
		u, hdr := s.Units[i], st.hdr
		f := meta.FsckFinding{LIN: lin, Stripe: s.Index, Unit: i, Drive: u.Drive, Block: u.Block}
		where := fmt.Sprintf("stripe %d unit %d: block %s on drive %d", s.Index, i, u.Block, u.Drive)
		switch {
		case errors.Is(st.err, drive.ErrNotFound):
			f.Kind, f.Detail = meta.FsckMissingUnit, where+": not on the drive"
		case errors.Is(st.err, drive.ErrCorrupt):
			f.Kind, f.Detail = meta.FsckBadHeader, fmt.Sprintf("%s: the header does not read: %v", where, st.err)
		case st.err != nil:
			skipped++ // the node or drive does not answer: not checked
			e.Log().Warn("fsck: a unit's block service did not answer: unit skipped", "lin", lin, "stripe", s.Index, "unit", i,
				"drive", u.Drive, "node", st.node, "err", st.err)
			continue
		case hdr.Owner != uint64(lin) || hdr.Stripe != s.Index || hdr.Unit != uint32(i):
			f.Kind, f.Detail = meta.FsckBadHeader, fmt.Sprintf("%s: the header names LIN %d stripe %d unit %d", where, hdr.Owner, hdr.Stripe, hdr.Unit)
		case hdr.Generation > s.Gen:
			f.Kind, f.Detail = meta.FsckBadHeader, fmt.Sprintf("%s: the header's generation %d is newer than the map's %d", where, hdr.Generation, s.Gen)
		default:
			checked++
			continue
		}
		fs = append(fs, f)
	}
	return fs, checked, skipped, nil
}

// repairUnit rebuilds the unit of finding f (see the comment at the top
// of the file): true once a new map is committed, false if the map no
// longer names the block or the file is gone. A stripe found lost is
// recorded in the lost-data list and counted in res. Errors: the
// restriper's (counted failed by the caller).
func (p *fsckStripes) repairUnit(ctx context.Context, e Env, j *job.Job, f meta.FsckFinding, res *job.ItemResult) (bool, error) {
	rr, err := p.t.layout.repair(ctx, e, f.LIN, f.Stripe, f.Drive, f.Block, fmt.Sprintf("fsck: %s: %s", f.Kind, f.Detail))
	var lost *restripe.LostError
	switch {
	case errors.Is(err, meta.ErrNotFound):
		return false, nil
	case errors.As(err, &lost):
		if lerr := recordLost(ctx, e, j, lost.LIN, []meta.LostStripe{lost.Stripe}, res); lerr != nil {
			return false, errors.Join(err, lerr)
		}
		return false, err
	case err != nil:
		return false, err
	case rr.NothingToDo:
		return false, nil
	case rr.Committed && !rr.StillUnderProtected:
		return true, nil
	}
	return false, fmt.Errorf("fsck: the unit was left in place: %s", rr.Reason)
}

// fsckUsage is the usage phase: one item that checks every pool's usage
// counters (meta.FsckUsage, one snapshot) and corrects the stale ones.
type fsckUsage struct {
	singleTask
	t *fsckType
}

func (*fsckUsage) Name() string { return "usage" }

// Split makes the one task, unless the job checks the namespace only.
func (p *fsckUsage) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	if _, layout := fsckOnly(j.Params); !layout {
		return nil, nil
	}
	return p.singleTask.Split(ctx, env, j)
}

// Process checks the pools' usage: "checked" counts the pools compared;
// the speed parameter paces it per inode read.
func (p *fsckUsage) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	e, err := fsckEnvOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	r, err := e.Meta().FsckUsage(ctx)
	if err != nil {
		return job.ItemResult{}, fmt.Errorf("fsck: usage: %w", err)
	}
	if err := p.t.pace(ctx, j, r.Inodes); err != nil {
		return job.ItemResult{}, err
	}
	it := newFsckItem(e, j)
	it.res.Counts["checked"] = int64(len(r.Pools()))
	if r.Disagree > 0 {
		e.Log().Warn("fsck: files whose Allocated differs from their stripe maps (the pools' usage is computed from the stripe maps)", "job", j.ID, "files", r.Disagree)
	}
	if err := it.handle(ctx, r.Findings); err != nil {
		return job.ItemResult{}, err
	}
	return it.res, nil
}
