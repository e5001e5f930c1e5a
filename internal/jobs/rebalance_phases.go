package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// The phases of a rebalance: the passes that move units (rebalance,
// settle, settle2, settle3) and the check of the spread they leave.

// balancePass is the rebalance and settle phases.
type balancePass struct {
	r    *rebalance
	name string
	pass int // 0 for the first pass
}

func (p *balancePass) Name() string { return p.name }

func (p *balancePass) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	if err := p.r.CheckParams(j.Params); err != nil {
		return nil, err
	}
	space, err := p.r.space(ctx, e)
	if err != nil {
		return nil, err
	}
	plans := planBalance(space, j.Params["pool"])
	if j.Params["pool"] != "" && len(plans) == 0 {
		return nil, fmt.Errorf("%w: pool=%q has no drive that is up and in service", job.ErrInvalid, j.Params["pool"])
	}
	threshold, err := thresholdOf(j.Params)
	if err != nil {
		return nil, err
	}
	spread := map[string]float64{}
	for _, s := range poolSpreads(space, j.Params["pool"]) {
		spread[s.Pool] = s.Spread()
	}
	var out []job.TaskSpec
	for _, pl := range plans {
		if p.pass > 0 && spread[pl.Pool] <= threshold/2 {
			continue // balanced enough; the first pass also fixed spread
		}
		e.Log().Info("rebalance plan", "phase", p.name, "pool", pl.Pool, "mean_used", fmt.Sprintf("%.2f%%", pl.Mean*100),
			"sources", len(pl.Src), "targets", len(pl.Dst), "nodes", pl.Nodes)
		if pl.balanced() && pl.Nodes < 2 {
			continue
		}
		n := j.Parallelism
		if p.pass > 0 {
			n = 1 // one worker follows the live usage (see settle)
		}
		tasks, err := splitLINs(ctx, e.Meta(), n)
		if err != nil {
			return nil, err
		}
		scope := pl.encode()
		for i := range tasks {
			// A settle pass's worker is alone: a thief would settle the
			// same surplus again from a view of its own.
			tasks[i].Scope, tasks[i].Serial = scope, p.pass > 0
		}
		out = append(out, tasks...)
	}
	return out, nil
}

func (p *balancePass) Items(ctx context.Context, env job.Env, scope string, from, to uint64, limit int) ([]uint64, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	pl, err := decodePlan(scope)
	if err != nil {
		return nil, err
	}
	nodeOf, err := p.r.nodes.get(ctx, e)
	if err != nil {
		return nil, err
	}
	// Files with stripes below their pool's target are in the protection
	// index: their WDL may span every node while some stripes do not.
	under, err := underProtected(ctx, e.Meta(), from, to)
	if err != nil {
		return nil, err
	}
	return listLINs(ctx, e.Meta(), from, to, limit, func(in meta.Inode) bool {
		return in.Pool == pl.Pool && (under[in.LIN] || pl.wantsFile(in.WDL, nodeOf))
	})
}

func (p *balancePass) Process(ctx context.Context, env job.Env, j *job.Job, scope string, item uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	pl, err := decodePlan(scope)
	if err != nil {
		return job.ItemResult{}, err
	}
	nodeOf, err := p.r.nodes.get(ctx, e)
	if err != nil {
		return job.ItemResult{}, err
	}
	isBad, err := e.Restriper().BadDrives(ctx, nil)
	if err != nil {
		return job.ItemResult{}, err
	}
	dry := j.Params["dry-run"] == "true"
	lin := meta.LIN(item)
	// The first pass draws moves from the plan; the settle passes follow
	// the pool's usage as it is now (see settle).
	choose := func(s meta.Stripe) ([]restripe.UnitMove, func(meta.DriveID) bool, error) {
		moves, allow := pl.stripeMoves(lin, s, nodeOf)
		return moves, allow, nil
	}
	var ls *liveSpace
	if p.pass > 0 {
		ls = p.r.liveFor(fmt.Sprintf("%d/%s/%s", j.ID, p.name, pl.Pool))
		choose = func(s meta.Stripe) ([]restripe.UnitMove, func(meta.DriveID) bool, error) {
			return p.settle(ctx, e, ls, pl, s, nodeOf)
		}
	}
	res := job.ItemResult{Items: 1}
	var moved, kept int
	var firstErr error
	err = meta.EachStripe(ctx, meta.BlockStripes(e.Meta()), lin, scanPage, func(s meta.Stripe) error {
		if restripe.StripeNeedsRepair(s, isBad) {
			return nil // repair's job, not ours
		}
		moves, allow, err := choose(s)
		if err != nil || len(moves) == 0 {
			return err
		}
		if dry {
			moved += len(moves)
			for _, m := range moves {
				res.Bytes += unitLen(s, m)
			}
			return nil
		}
		r, err := e.Restriper().MoveUnits(ctx, lin, s.Index, moves, allow)
		res.Bytes += r.BytesWritten
		kept += r.Left
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrConflict) {
				res.Errors++ // a finding: the next run moves it
				if firstErr == nil {
					firstErr = err
				}
				return nil
			}
			return err
		}
		if r.Committed {
			moved += r.Moved
			for _, u := range r.Units {
				if u.To != 0 && ls != nil {
					ls.moved(u.From, u.To, int64(s.Units[u.Unit].Length))
				}
			}
		}
		return nil
	})
	if errors.Is(err, meta.ErrNotFound) {
		return job.ItemResult{}, nil // deleted meanwhile
	}
	if err != nil {
		return res, err
	}
	if moved > 0 || firstErr != nil {
		verb := "moved"
		if dry {
			verb = "would move (dry run)"
		}
		res.Note = fmt.Sprintf("%s: %d units %s, %d left in place", pathOf(ctx, e.Meta(), lin), moved, verb, kept)
		if firstErr != nil {
			res.Note += fmt.Sprintf("; %v", firstErr)
		}
	}
	return res, nil
}

// settle chooses the move of stripe s in a pass after the first: instead
// of the plan's odds it follows the pool's usage as it is now (read from
// the nodes at most once a second, and adjusted for each move this node
// makes), moving at most one unit per stripe: one on the fullest drive of
// the stripe that is above the mean by more than the dead band, to a
// drive below the mean on a node that would not then hold more than its
// share of the stripe. So it stops when the drives are within about a
// unit of the mean, and tries units the first pass could not move.
func (p *balancePass) settle(ctx context.Context, e Env, ls *liveSpace, pl balancePlan, s meta.Stripe,
	nodeOf map[meta.DriveID]string) ([]restripe.UnitMove, func(meta.DriveID) bool, error) {
	if err := ls.refresh(ctx, e, p.r.space, pl.Pool); err != nil {
		return nil, nil, err
	}
	mv, allow, ok := ls.pick(s, nodeOf, pl.Nodes)
	if !ok {
		return nil, nil, nil
	}
	return []restripe.UnitMove{mv}, allow, nil
}

func unitLen(s meta.Stripe, m restripe.UnitMove) int64 {
	for _, u := range s.Units {
		if u.Drive == m.Drive && u.Block == m.Block {
			return int64(u.Length)
		}
	}
	return 0
}

// balanceCheck reports the spread of used fractions per pool.
type balanceCheck struct {
	singleTask
	r *rebalance
}

func (*balanceCheck) Name() string { return "check" }

func (c *balanceCheck) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	threshold, err := thresholdOf(j.Params)
	if err != nil {
		return job.ItemResult{}, err
	}
	space, err := c.r.space(ctx, e)
	if err != nil {
		return job.ItemResult{}, err
	}
	res := job.ItemResult{Items: 1}
	var notes []string
	for _, s := range poolSpreads(space, j.Params["pool"]) {
		notes = append(notes, s.String())
		if s.Spread() > threshold {
			res.Errors++
		}
	}
	res.Note = strings.Join(notes, "; ")
	e.Log().Info("rebalance check", "pools", res.Note)
	return res, nil
}
