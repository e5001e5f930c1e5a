package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// IntegrityScan returns the integrityscan job type: it reads every unit
// of every file (data and parity), checks segment CRCs, block identity, the
// stripe map's CRCs and parity consistency, reports each mismatch with the
// file's path and stripe, and repairs it from redundancy unless the
// "dry-run" parameter is "true". A file it cannot repair does not stop
// it: a stripe with too few units left for good goes to the lost-data
// list (with a data-lost event for a file new to it), other failures
// (units on down drives, disagreeing units) are counted, and the scan
// goes on. Phases: scan, then report (the lost-data list, in the
// report's Summary).
func IntegrityScan() job.Type { return integrityScan{} }

type integrityScan struct{}

// Defaults: a scan is background hygiene: low priority, low impact.
func (integrityScan) Defaults() (int, string) { return 6, "low" }

func (integrityScan) Name() string          { return "integrityscan" }
func (integrityScan) Set() job.ExclusionSet { return job.SetMark }
func (integrityScan) Phases() []job.Phase {
	return []job.Phase{scanPhase{}, lostReport{singleTask{"report"}}}
}

type scanPhase struct{}

func (scanPhase) Name() string { return "scan" }

func (scanPhase) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	if v := j.Params["dry-run"]; v != "" && v != "true" && v != "false" {
		return nil, fmt.Errorf("%w: dry-run=%q: want true or false", job.ErrInvalid, v)
	}
	return splitLINs(ctx, e.Meta(), j.Parallelism)
}

func (scanPhase) Items(ctx context.Context, env job.Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	return listLINs(ctx, e.Meta(), from, to, limit, func(in meta.Inode) bool { return in.StripeSize > 0 })
}

func (scanPhase) Process(ctx context.Context, env job.Env, j *job.Job, _ string, item uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	repair := j.Params["dry-run"] != "true"
	lin := meta.LIN(item)
	fr, err := e.Restriper().VerifyFile(ctx, lin, repair)
	if errors.Is(err, meta.ErrNotFound) {
		return job.ItemResult{}, nil // deleted meanwhile
	}
	res := job.ItemResult{Items: 1, Bytes: fr.BytesRead, Errors: int64(fr.Damaged)}
	if fr.Damaged > 0 {
		p := pathOf(ctx, e.Meta(), lin)
		for _, pr := range fr.Problems {
			if pr.Kind == "unplaced" || pr.Kind == "down" || pr.Kind == "unreadable" {
				continue
			}
			e.Log().Warn("integrity mismatch", "path", p, "stripe", pr.Stripe, "unit", pr.Unit, "drive", pr.Drive,
				"node", pr.Node, "block", pr.Block, "kind", pr.Kind, "detail", pr.Detail, "repaired", repair && fr.Repaired > 0)
			res.Note = fmt.Sprintf("%s stripe %d unit %d: %s (%s)", p, pr.Stripe, pr.Unit, pr.Kind, fixedOr(repair, fr.Repaired))
		}
	}
	if err != nil && finding(err) && ctx.Err() == nil {
		// The stripes that could be repaired are; the others are
		// findings: go on with the next file.
		e.Log().Warn("integrityscan: stripes not repaired", "path", pathOf(ctx, e.Meta(), lin), "failed", fr.Failed, "err", err)
		if fr.Damaged == 0 {
			res.Errors++
		}
		res.Note = fmt.Sprintf("%s: %d stripes not repaired: %v", pathOf(ctx, e.Meta(), lin), fr.Failed, err)
		err = nil
	}
	if err == nil {
		err = recordLost(ctx, e, j, lin, fr.Lost, &res)
	}
	return res, err
}

func fixedOr(repair bool, repaired int) string {
	switch {
	case !repair:
		return "dry run: not repaired"
	case repaired > 0:
		return "repaired"
	}
	return "not repaired"
}
