package mount

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/policy"
	"github.com/weftfs/weft/internal/vfs"
)

// policyPlacer is the mount's vfs.Placer: the SET POOL rules of the
// installed policy, as the follower last saw it, evaluated with what is
// known at creation (policy.AttrsAtCreate). The path is computed only
// when the policy reads PATH_NAME.
//
// A rule that places a file in a pool with no drive ready to take data
// (a pool just created, or one whose drives are all suspended or
// removed) fails the create with ENOSPC, naming the rule and the pool in
// the mount's log: the application learns at open, rather than at its
// first write, that the file cannot be stored where the policy says.
// A pool removed since the policy was installed is refused the same way.
type policyPlacer struct {
	follow *cluster.PolicyFollower
	drives func(ctx context.Context) ([]client.DriveState, error)
	log    *slog.Logger
}

var _ vfs.Placer = (*policyPlacer)(nil)

func (p *policyPlacer) Place(ctx context.Context, f vfs.NewFile) (vfs.Placement, bool, error) {
	pol, version := p.follow.Current()
	if pol == nil {
		return vfs.Placement{}, false, nil
	}
	pf := policy.File{Known: policy.AttrsAtCreate, Name: f.Name, UID: f.UID, GID: f.GID, Mode: f.Mode}
	if needs, _ := pol.Needs(); needs&policy.AttrPath != 0 {
		path, err := f.Path()
		if err != nil {
			return vfs.Placement{}, false, err
		}
		pf.Path = path
	}
	pl, ok := pol.Place(pf, time.Now())
	if !ok {
		return vfs.Placement{}, false, nil
	}
	if err := p.canTake(ctx, pl.Pool); err != nil {
		p.log.Warn("a new file was refused: the policy places it in a pool that cannot take data", "file", f.Name,
			"rule", pl.Rule, "pool", pl.Pool, "policy_version", version, "err", err)
		return vfs.Placement{}, false, fmt.Errorf("%w: policy version %d, rule %s places %q in pool %s: %v", vfs.ErrNoSpace, version, pl.Rule, f.Name, pl.Pool, err)
	}
	return vfs.Placement{Pool: pl.Pool, Protection: pl.Protection}, true, nil
}

// canTake reports why pool cannot take a new file's data: no drive of it
// is ready (up or not: a drive down for a moment is repair's business,
// as for any file).
func (p *policyPlacer) canTake(ctx context.Context, pool string) error {
	ds, err := p.drives(ctx)
	if err != nil {
		return err
	}
	for _, d := range ds {
		if d.Pool == pool && d.Usable {
			return nil
		}
	}
	return fmt.Errorf("pool %s has no drive ready (see weft pool list, weft drive list)", pool)
}
