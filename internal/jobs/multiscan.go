package jobs

import (
	"slices"

	"github.com/weftfs/weft/internal/job"
)

// Multiscan returns the multiscan job type, run after drives or nodes join
// a pool: a rebalance (phases rebalance, settle, check) followed by a
// collect (sweep, queue, orphans), so the blocks the moves replaced and any
// orphans are freed in the same job. It takes both types' parameters
// ("pool", "threshold", "grace", "dry-run"), belongs to the mark and
// restripe sets, and frees space, so it keeps running in low-space mode.
func Multiscan() job.Type {
	r, c := newRebalance(clusterSpace), newCollect(clusterDrives)
	return &multiscan{r: r, c: c, phases: append(slices.Clone(r.phases), c.phases...)}
}

type multiscan struct {
	r      *rebalance
	c      *collect
	phases []job.Phase
}

var (
	_ job.Defaulter    = (*multiscan)(nil)
	_ job.SpaceSaver   = (*multiscan)(nil)
	_ job.ParamChecker = (*multiscan)(nil)
)

func (*multiscan) Name() string          { return "multiscan" }
func (*multiscan) Set() job.ExclusionSet { return job.SetMark | job.SetRestripe }
func (m *multiscan) Phases() []job.Phase { return m.phases }

// Defaults: a group change leaves new drives empty; balancing them comes
// before routine scans.
func (*multiscan) Defaults() (int, string) { return 4, "low" }

// FreesSpace: its collect phases free space, so it runs in low-space mode.
func (*multiscan) FreesSpace() bool { return true }

// CheckParams validates both parts' parameters.
func (m *multiscan) CheckParams(p map[string]string) error {
	if err := m.r.CheckParams(p); err != nil {
		return err
	}
	return m.c.CheckParams(p)
}
