package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// Each job type names its parameters (job.ParamLister), checks their form
// (job.ParamChecker) and, where they name drives, pools or paths, checks
// them against the cluster when the job is submitted (job.ParamValidator),
// so that a job naming a drive that does not exist is refused at once with
// the parameter and the value, not started to fail later.

var (
	_ job.ParamLister    = (*restripeJob)(nil)
	_ job.ParamChecker   = (*restripeJob)(nil)
	_ job.ParamValidator = (*restripeJob)(nil)
	_ job.ParamLister    = (*mediaScan)(nil)
	_ job.ParamValidator = (*mediaScan)(nil)
	_ job.ParamLister    = (*rebalance)(nil)
	_ job.ParamValidator = (*rebalance)(nil)
	_ job.ParamLister    = (*multiscan)(nil)
	_ job.ParamValidator = (*multiscan)(nil)
	_ job.ParamLister    = (*collect)(nil)
	_ job.ParamLister    = integrityScan{}
	_ job.ParamLister    = treeDelete{}
	_ job.ParamValidator = treeDelete{}
)

// parseDrives parses a drive list such as "d3,d7" (a bare number is read as
// a drive id too). Every element must be a drive id: an empty list or an
// empty element ("d3,,d7") is refused, as a typo would be. Errors wrap
// job.ErrInvalid.
func parseDrives(s string) (map[meta.DriveID]bool, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: drives=%q: name at least one drive, like d3,d7 (see weft drive list)", job.ErrInvalid, s)
	}
	out := map[meta.DriveID]bool{}
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("%w: drives=%q: element %d is empty; give drive ids separated by single commas, like d3,d7", job.ErrInvalid, s, i+1)
		}
		id, err := cluster.ParseDriveID(f)
		if err != nil {
			return nil, fmt.Errorf("%w: drives=%q: %q is not a drive id; use d<N> as weft drive list shows", job.ErrInvalid, s, f)
		}
		out[meta.DriveID(id)] = true
	}
	return out, nil
}

// checkDrivesExist refuses (job.ErrInvalid) drives the cluster does not
// know or that were removed. param and value name the parameter for the
// message.
func checkDrivesExist(ctx context.Context, env job.Env, typ, value string, want map[meta.DriveID]bool) error {
	e, err := envOf(env)
	if err != nil {
		return err
	}
	drives, err := e.Cluster().ListDrives(ctx)
	if err != nil {
		return err
	}
	status := map[meta.DriveID]cluster.DriveStatus{}
	for _, d := range drives {
		status[meta.DriveID(d.ID)] = d.Status
	}
	for _, id := range sortedDrives(want) {
		st, ok := status[id]
		switch {
		case !ok:
			return fmt.Errorf("%w: %s drives=%q: the cluster has no drive %v (see weft drive list)", job.ErrInvalid, typ, value, cluster.DriveID(id))
		case st == cluster.StatusRemoved:
			return fmt.Errorf("%w: %s drives=%q: drive %v was removed from the cluster", job.ErrInvalid, typ, value, cluster.DriveID(id))
		}
	}
	return nil
}

// ParamNames: a drain takes the drives to empty; a repair takes none.
func (r *restripeJob) ParamNames() []string {
	if r.name == "drain" {
		return []string{"drives"}
	}
	return []string{}
}

// CheckParams: a drain needs drives=d<N>[,d<N>...].
func (r *restripeJob) CheckParams(p map[string]string) error {
	if r.name != "drain" {
		return nil
	}
	v, ok := p["drives"]
	if !ok {
		return fmt.Errorf("%w: drain needs drives=d<N>[,d<N>...] (weft drive remove starts one for you)", job.ErrInvalid)
	}
	_, err := parseDrives(v)
	return err
}

// ValidateParams: a drain's drives exist and are not removed.
func (r *restripeJob) ValidateParams(ctx context.Context, env job.Env, p map[string]string) error {
	if r.name != "drain" {
		return nil
	}
	ds, err := parseDrives(p["drives"])
	if err != nil {
		return err
	}
	return checkDrivesExist(ctx, env, "drain", p["drives"], ds)
}

// ParamNames: the drives to scan (all when absent).
func (*mediaScan) ParamNames() []string { return []string{"drives"} }

// ValidateParams: the named drives exist and are not removed.
func (*mediaScan) ValidateParams(ctx context.Context, env job.Env, p map[string]string) error {
	ds, err := mediaDrives(p)
	if err != nil || ds == nil {
		return err
	}
	return checkDrivesExist(ctx, env, "mediascan", p["drives"], ds)
}

// ParamNames: the pool (all when absent), the threshold and dry-run.
func (*rebalance) ParamNames() []string { return []string{"pool", "threshold", "dry-run"} }

// ValidateParams: the named pool exists.
func (*rebalance) ValidateParams(ctx context.Context, env job.Env, p map[string]string) error {
	return checkPoolExists(ctx, env, "rebalance", p)
}

// ParamNames: rebalance's and collect's.
func (m *multiscan) ParamNames() []string {
	return append(m.r.ParamNames(), m.c.ParamNames()...)
}

// ValidateParams: rebalance's.
func (*multiscan) ValidateParams(ctx context.Context, env job.Env, p map[string]string) error {
	return checkPoolExists(ctx, env, "multiscan", p)
}

func checkPoolExists(ctx context.Context, env job.Env, typ string, p map[string]string) error {
	name, ok := p["pool"]
	if !ok {
		return nil
	}
	e, err := envOf(env)
	if err != nil {
		return err
	}
	if _, err := e.Cluster().GetPool(ctx, name); errors.Is(err, cluster.ErrNotFound) {
		return fmt.Errorf("%w: %s pool=%q: no such pool (see weft pool list)", job.ErrInvalid, typ, name)
	} else if err != nil {
		return err
	}
	return nil
}

// ParamNames: the grace period and dry-run.
func (*collect) ParamNames() []string { return []string{"grace", "dry-run"} }

// ParamNames: dry-run.
func (integrityScan) ParamNames() []string { return []string{"dry-run"} }

// ParamNames: the tree's path.
func (treeDelete) ParamNames() []string { return []string{"path"} }

// ValidateParams: the path names an existing directory (symlinks are not
// followed).
func (treeDelete) ValidateParams(ctx context.Context, env job.Env, p map[string]string) error {
	e, err := envOf(env)
	if err != nil {
		return err
	}
	_, err = resolveTree(ctx, e.Meta(), p)
	if errors.Is(err, meta.ErrNotFound) {
		return fmt.Errorf("%w: treedelete path=%q: no such directory: %v", job.ErrInvalid, p["path"], err)
	}
	return err
}

// sortedDrives returns the drives of a set in id order (stable messages).
func sortedDrives(set map[meta.DriveID]bool) []meta.DriveID {
	return slices.Sorted(maps.Keys(set))
}
