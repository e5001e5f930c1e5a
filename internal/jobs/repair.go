package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// restripeJob is the shape shared by repair and drain: re-protect every file
// with units on "bad" drives (down drives always count) or unplaced
// units, check that nothing is left, then mark drained drives removed.
type restripeJob struct {
	name string
	// bad returns the drives this job empties, besides down ones, from the
	// job's "drives" parameter (drain) or the control plane (repair).
	bad func(ctx context.Context, e Env, drives string) (map[meta.DriveID]bool, error)
}

// Repair returns the repair job type: it re-protects files with units on
// down or draining drives, and the files of the protection index (stripes
// written while drives or nodes were down: units never placed, or placed
// on too few nodes or drives for their pool's target tolerance, which it
// spreads again), then removes drives that were draining and are empty.
// While the namespace's protection index is marked incomplete (migrated
// from format 1), it checks every file, and a repair that ran so clears
// the mark at its end. Stripes found lost go to the lost-data list.
// Phases: repair → verify → remove → report.
func Repair() job.Type {
	return &restripeJob{name: "repair", bad: func(ctx context.Context, e Env, _ string) (map[meta.DriveID]bool, error) {
		return drivesWithStatus(ctx, e, cluster.StatusDraining)
	}}
}

// Drain returns the drain job type: it moves every unit off the drives in
// its "drives" parameter (d3,d7), which `weft drive remove` has set to
// draining, then marks them removed — or, for a drive `weft drive move`
// set draining, puts it in its new pool, ready. Reads and writes go on meanwhile.
// Phases: drain → verify → remove.
func Drain() job.Type {
	return &restripeJob{name: "drain", bad: func(_ context.Context, _ Env, drives string) (map[meta.DriveID]bool, error) {
		return parseDrives(drives)
	}}
}

// Defaults: repairs restore protection, so they come first; a drain is an
// administrator's planned change, close behind.
func (r *restripeJob) Defaults() (int, string) {
	if r.name == "repair" {
		return 2, "medium"
	}
	return 3, "medium"
}

func (r *restripeJob) Name() string          { return r.name }
func (r *restripeJob) Set() job.ExclusionSet { return job.SetRestripe }
func (r *restripeJob) Phases() []job.Phase {
	return []job.Phase{
		&restripeScan{r: r, phase: r.name, fix: true},
		&restripeScan{r: r, phase: "verify"},
		&removeDrained{singleTask: singleTask{"remove"}, r: r},
		lostReport{singleTask{"report"}},
	}
}

// drivesWithStatus returns the drives whose status is st.
func drivesWithStatus(ctx context.Context, e Env, st cluster.DriveStatus) (map[meta.DriveID]bool, error) {
	drives, err := e.Cluster().ListDrives(ctx)
	if err != nil {
		return nil, err
	}
	out := map[meta.DriveID]bool{}
	for _, d := range drives {
		if d.Status == st {
			out[meta.DriveID(d.ID)] = true
		}
	}
	return out, nil
}

// isBad returns the predicate of drives to empty: the job's own, every
// drive draining now (a drain's too: see below), and the drives that are
// down now (Restriper.BadDrives). drives is the job's "drives" parameter,
// which Split also copies into every task's scope (Items gets the scope,
// not the job).
//
// Units are never placed on a drive the predicate names. The placement's
// own view of which drives take new blocks (the client's topology
// snapshot) may be a second old: drains started together (weft drive
// move of several drives) each placed units on drives the others had
// just set draining, after those had passed the file, and left them
// draining with units on them. The drives' status read here is fresh.
func (r *restripeJob) isBad(ctx context.Context, e Env, drives string) (func(meta.DriveID) bool, error) {
	own, err := r.bad(ctx, e, drives)
	if err != nil {
		return nil, err
	}
	var draining map[meta.DriveID]bool // a repair's own are these
	if r.name == "drain" {
		if draining, err = drivesWithStatus(ctx, e, cluster.StatusDraining); err != nil {
			return nil, err
		}
	}
	return e.Restriper().BadDrives(ctx, func(d meta.DriveID) bool { return own[d] || draining[d] })
}

// restripeScan is the LIN scan of a restripe job: with fix it repairs each
// file that may need it; without, it counts the stripes still needing
// repair (the verify phase).
type restripeScan struct {
	r     *restripeJob
	phase string
	fix   bool
}

func (p *restripeScan) Name() string { return p.phase }

func (p *restripeScan) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	if _, err := p.r.bad(ctx, e, j.Params["drives"]); err != nil { // refuse bad parameters before any work
		return nil, err
	}
	tasks, err := splitLINs(ctx, e.Meta(), j.Parallelism)
	for i := range tasks {
		tasks[i].Scope = j.Params["drives"]
	}
	return tasks, err
}

func (p *restripeScan) Items(ctx context.Context, env job.Env, scope string, from, to uint64, limit int) ([]uint64, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	// The WDL lets files without a unit on a bad drive be skipped without
	// reading their stripe maps; stripes below their target (units not
	// placed, too few nodes) are in the protection index. An index marked
	// incomplete (format 1 did not index stripes on too few nodes) makes
	// a repair check every file.
	isBad, err := p.r.isBad(ctx, e, scope)
	if err != nil {
		return nil, err
	}
	under, err := underProtected(ctx, e.Meta(), from, to)
	if err != nil {
		return nil, err
	}
	_, all, err := e.Meta().ProtectionMarker(ctx)
	if err != nil {
		return nil, err
	}
	all = all && p.r.name == "repair"
	return listLINs(ctx, e.Meta(), from, to, limit, func(in meta.Inode) bool {
		return under[in.LIN] || restripe.FileMayNeedRepair(in.Attr, isBad) || all && in.StripeSize > 0
	})
}

func (p *restripeScan) Process(ctx context.Context, env job.Env, j *job.Job, scope string, item uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	isBad, err := p.r.isBad(ctx, e, scope)
	if err != nil {
		return job.ItemResult{}, err
	}
	lin := meta.LIN(item)
	if !p.fix {
		left, below, err := stripesNeedingRepair(ctx, e.Meta(), lin, isBad)
		if errors.Is(err, meta.ErrNotFound) {
			return job.ItemResult{}, nil // deleted meanwhile
		}
		res := job.ItemResult{Items: 1, Errors: int64(left + below)}
		switch {
		case left > 0:
			res.Note = fmt.Sprintf("%s: %d stripes still need repair, %d more below their pool's protection", pathOf(ctx, e.Meta(), lin), left, below)
		case below > 0:
			res.Note = fmt.Sprintf("%s: %d stripes below their pool's protection (no drive on another node could take their units: a node is down, or full)",
				pathOf(ctx, e.Meta(), lin), below)
		}
		return res, err
	}
	fr, err := e.Restriper().RepairFile(ctx, lin, isBad)
	if errors.Is(err, meta.ErrNotFound) {
		return job.ItemResult{}, nil
	}
	res := job.ItemResult{Items: 1, Bytes: fr.BytesWritten, Errors: int64(fr.UnderProtected + fr.BelowTarget)}
	if fr.Repaired > 0 || fr.UnderProtected > 0 || fr.BelowTarget > 0 {
		res.Note = fmt.Sprintf("%s: %d stripes repaired (%d units rebuilt, %d moved), %d left under-protected, %d below their pool's protection",
			pathOf(ctx, e.Meta(), lin), fr.Repaired, fr.Rebuilt, fr.Moved, fr.UnderProtected, fr.BelowTarget)
		e.Log().Info(p.r.name, "path", pathOf(ctx, e.Meta(), lin), "repaired", fr.Repaired, "rebuilt", fr.Rebuilt,
			"moved", fr.Moved, "under_protected", fr.UnderProtected, "below_target", fr.BelowTarget)
	}
	if err != nil && finding(err) && ctx.Err() == nil {
		// Too few units readable (now, or for good): a finding, not a
		// reason to stop re-protecting every other file.
		res.Errors++
		res.Note = fmt.Sprintf("%s: %v", pathOf(ctx, e.Meta(), lin), err)
		err = nil
	}
	if err == nil {
		err = recordLost(ctx, e, j, lin, fr.Lost, &res)
	}
	return res, err
}

// stripesNeedingRepair counts lin's stripes with a unit unplaced or on a
// bad drive (left), and the others in the protection index (below their
// target).
func stripesNeedingRepair(ctx context.Context, m *meta.Meta, lin meta.LIN, isBad func(meta.DriveID) bool) (left, below int, err error) {
	entries, err := m.UnderProtectedStripes(ctx, lin)
	if err != nil {
		return 0, 0, err
	}
	indexed := make(map[uint64]bool, len(entries))
	for _, u := range entries {
		indexed[u.Index] = true
	}
	err = meta.EachStripe(ctx, meta.BlockStripes(m), lin, scanPage, func(s meta.Stripe) error {
		switch {
		case restripe.StripeNeedsRepair(s, isBad):
			left++
		case indexed[s.Index]:
			below++
		}
		return nil
	})
	return left, below, err
}

// removeDrained marks the job's drained drives removed once no file uses
// them. It is one item: a scan of every inode's WDL; files found with
// units there are re-protected off them (sweep) and the drives counted
// again, so that a drain finishes what writers added behind it.
type removeDrained struct {
	singleTask
	r *restripeJob
}

func (p *removeDrained) Name() string { return "remove" }

func (p *removeDrained) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	var marker string
	if p.r.name == "repair" {
		// This repair checked every file if the protection index was
		// marked incomplete before it was submitted: the mark goes.
		cleared, err := e.Meta().ClearProtectionMarker(ctx, j.Created)
		if err != nil {
			return job.ItemResult{}, err
		}
		if cleared {
			marker = "every stripe checked: the protection index is complete"
			e.Log().Info("repair: " + marker)
		}
	}
	cand, err := p.r.bad(ctx, e, j.Params["drives"])
	if err != nil {
		return job.ItemResult{}, err
	}
	draining, err := drivesWithStatus(ctx, e, cluster.StatusDraining)
	if err != nil {
		return job.ItemResult{}, err
	}
	for d := range cand {
		if !draining[d] {
			delete(cand, d) // only drives an administrator asked to remove
		}
	}
	if len(cand) == 0 {
		return job.ItemResult{Items: 1, Note: marker}, nil
	}
	used, users, err := drivesInUse(ctx, e.Meta(), cand)
	if err != nil {
		return job.ItemResult{}, err
	}
	var notes []string
	res := job.ItemResult{Items: 1}
	if len(users) > 0 {
		// Units written there after the drain passed their files: a
		// client places with a topology up to a second old, which may
		// still show a drive ready that was just set draining. Move them
		// now, then count again.
		if err := p.sweep(ctx, env, j, users, &res); err != nil {
			return res, err
		}
		if len(users) < maxSweep { // every user was swept: count only them
			used, err = stillInUse(ctx, e.Meta(), cand, users)
		} else {
			used, _, err = drivesInUse(ctx, e.Meta(), cand)
		}
		if err != nil {
			return res, err
		}
	}
	for d := range cand {
		if used[d] > 0 {
			res.Errors++
			notes = append(notes, fmt.Sprintf("%s still holds units of %d files", cluster.DriveID(d), used[d]))
			continue
		}
		// A drive moving to another pool (weft drive move) joins it
		// instead of being retired.
		rec, moved, err := e.Cluster().FinishDriveMove(ctx, cluster.DriveID(d))
		if err != nil {
			return res, err
		}
		if moved {
			e.Log().Info("drive moved", "drive", cluster.DriveID(d), "pool", rec.Pool)
			notes = append(notes, fmt.Sprintf("%s moved to pool %s", cluster.DriveID(d), rec.Pool))
			continue
		}
		if _, err := e.Cluster().SetDriveStatus(ctx, cluster.DriveID(d), cluster.StatusRemoved); err != nil {
			return res, err
		}
		e.Log().Info("drive removed", "drive", cluster.DriveID(d))
		notes = append(notes, fmt.Sprintf("%s removed", cluster.DriveID(d)))
	}
	if marker != "" {
		notes = append(notes, marker)
	}
	res.Note = strings.Join(notes, "; ")
	return res, nil
}

// maxSweep bounds the files the remove phase moves off drained drives by
// itself; past it the drives stay draining, reported, for another drain.
const maxSweep = 10000

// drivesInUse scans every inode's WDL and counts the files with units on
// each drive in cand; users are those files, at most maxSweep.
func drivesInUse(ctx context.Context, m *meta.Meta, cand map[meta.DriveID]bool) (map[meta.DriveID]int, []meta.LIN, error) {
	used := map[meta.DriveID]int{}
	var users []meta.LIN
	for next := meta.FirstLIN; next != 0; {
		inodes, after, err := m.ScanInodes(ctx, next, 0, scanPage)
		if err != nil {
			return nil, nil, err
		}
		for _, in := range inodes {
			found := false
			for _, d := range in.WDL {
				if cand[d] {
					used[d]++
					found = true
				}
			}
			if found && len(users) < maxSweep {
				users = append(users, in.LIN)
			}
		}
		next = after
	}
	return used, users, nil
}

// sweep re-protects users off the drives the job empties, each as the
// job's first phase does (restripeScan.Process), and adds the results to
// res.
func (p *removeDrained) sweep(ctx context.Context, env job.Env, j *job.Job, users []meta.LIN, res *job.ItemResult) error {
	first := &restripeScan{r: p.r, phase: p.r.name, fix: true}
	for _, lin := range users {
		r, err := first.Process(ctx, env, j, j.Params["drives"], uint64(lin))
		if err != nil {
			return err
		}
		res.Bytes += r.Bytes
		res.Errors += r.Errors
	}
	return nil
}

// stillInUse counts, of users, the files that still have units on each
// drive in cand: point reads, where drivesInUse scans every inode.
func stillInUse(ctx context.Context, m *meta.Meta, cand map[meta.DriveID]bool, users []meta.LIN) (map[meta.DriveID]int, error) {
	used := map[meta.DriveID]int{}
	for _, lin := range users {
		a, err := m.GetAttr(ctx, lin)
		if errors.Is(err, meta.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, d := range a.WDL {
			if cand[d] {
				used[d]++
			}
		}
	}
	return used, nil
}
