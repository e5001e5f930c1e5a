package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/weftfs/weft/internal/client"
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
// down or draining drives, or with units never placed (stripes written while
// drives were down), then removes drives that were draining and are empty.
// Phases: repair → verify → remove.
func Repair() job.Type {
	return &restripeJob{name: "repair", bad: func(ctx context.Context, e Env, _ string) (map[meta.DriveID]bool, error) {
		return drivesWithStatus(ctx, e, cluster.StatusDraining)
	}}
}

// Drain returns the drain job type: it moves every unit off the drives in
// its "drives" parameter (d3,d7), which `weft drive remove` has set to
// draining, then marks them removed. Reads and writes go on meanwhile.
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
		&removeDrained{r: r},
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

// isBad returns the predicate of drives to empty: the job's own, and the
// drives that are down now (Restriper.BadDrives). drives is the job's
// "drives" parameter, which Split also copies into every task's scope
// (Items gets the scope, not the job).
func (r *restripeJob) isBad(ctx context.Context, e Env, drives string) (func(meta.DriveID) bool, error) {
	own, err := r.bad(ctx, e, drives)
	if err != nil {
		return nil, err
	}
	return e.Restriper().BadDrives(ctx, func(d meta.DriveID) bool { return own[d] })
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
	// reading their stripe maps; stripes with unplaced units are indexed
	// separately.
	isBad, err := p.r.isBad(ctx, e, scope)
	if err != nil {
		return nil, err
	}
	under, err := underProtected(ctx, e.Meta(), from, to)
	if err != nil {
		return nil, err
	}
	return listLINs(ctx, e.Meta(), from, to, limit, func(in meta.Inode) bool {
		return under[in.LIN] || restripe.FileMayNeedRepair(in.Attr, isBad)
	})
}

func (p *restripeScan) Process(ctx context.Context, env job.Env, _ *job.Job, scope string, item uint64) (job.ItemResult, error) {
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
		left, err := stripesNeedingRepair(ctx, e.Meta(), lin, isBad)
		if errors.Is(err, meta.ErrNotFound) {
			return job.ItemResult{}, nil // deleted meanwhile
		}
		res := job.ItemResult{Items: 1, Errors: int64(left)}
		if left > 0 {
			res.Note = fmt.Sprintf("%s: %d stripes still need repair", pathOf(ctx, e.Meta(), lin), left)
		}
		return res, err
	}
	fr, err := e.Restriper().RepairFile(ctx, lin, isBad)
	if errors.Is(err, meta.ErrNotFound) {
		return job.ItemResult{}, nil
	}
	res := job.ItemResult{Items: 1, Bytes: fr.BytesWritten, Errors: int64(fr.UnderProtected)}
	if fr.Repaired > 0 || fr.UnderProtected > 0 {
		res.Note = fmt.Sprintf("%s: %d stripes repaired (%d units rebuilt, %d moved), %d left under-protected",
			pathOf(ctx, e.Meta(), lin), fr.Repaired, fr.Rebuilt, fr.Moved, fr.UnderProtected)
		e.Log().Info(p.r.name, "path", pathOf(ctx, e.Meta(), lin), "repaired", fr.Repaired, "rebuilt", fr.Rebuilt,
			"moved", fr.Moved, "under_protected", fr.UnderProtected)
	}
	if err != nil && errors.Is(err, client.ErrUnavailable) {
		// Too few units readable now: a finding, not a reason to stop
		// re-protecting every other file.
		res.Errors++
		res.Note = fmt.Sprintf("%s: %v", pathOf(ctx, e.Meta(), lin), err)
		return res, nil
	}
	return res, err
}

// stripesNeedingRepair counts lin's stripes with a unit unplaced or on a
// bad drive.
func stripesNeedingRepair(ctx context.Context, m *meta.Meta, lin meta.LIN, isBad func(meta.DriveID) bool) (int, error) {
	n := 0
	err := meta.EachStripe(ctx, m, lin, scanPage, func(s meta.Stripe) error {
		if restripe.StripeNeedsRepair(s, isBad) {
			n++
		}
		return nil
	})
	return n, err
}

// removeDrained marks the job's drained drives removed once no file uses
// them. It is one item: a scan of every inode's WDL.
type removeDrained struct{ r *restripeJob }

func (p *removeDrained) Name() string { return "remove" }

func (p *removeDrained) Split(context.Context, job.Env, *job.Job) ([]job.TaskSpec, error) {
	return []job.TaskSpec{{Scope: "remove", From: 0, To: 1}}, nil
}

func (p *removeDrained) Items(_ context.Context, _ job.Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	if from == 0 && to > 0 && limit > 0 {
		return []uint64{0}, nil
	}
	return nil, nil
}

func (p *removeDrained) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
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
		return job.ItemResult{Items: 1}, nil
	}
	used := map[meta.DriveID]int{}
	var next meta.LIN = meta.FirstLIN
	for next != 0 {
		inodes, after, err := e.Meta().ScanInodes(ctx, next, 0, scanPage)
		if err != nil {
			return job.ItemResult{}, err
		}
		for _, in := range inodes {
			for _, d := range in.WDL {
				if cand[d] {
					used[d]++
				}
			}
		}
		next = after
	}
	var notes []string
	res := job.ItemResult{Items: 1}
	for d := range cand {
		if used[d] > 0 {
			res.Errors++
			notes = append(notes, fmt.Sprintf("%s still holds units of %d files", cluster.DriveID(d), used[d]))
			continue
		}
		if _, err := e.Cluster().SetDriveStatus(ctx, cluster.DriveID(d), cluster.StatusRemoved); err != nil {
			return res, err
		}
		e.Log().Info("drive removed", "drive", cluster.DriveID(d))
		notes = append(notes, fmt.Sprintf("%s removed", cluster.DriveID(d)))
	}
	res.Note = strings.Join(notes, "; ")
	return res, nil
}
