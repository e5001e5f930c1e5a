package jobs

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
)

// Rebalance returns the rebalance job type: it moves units so that the
// drives of each pool end up within a few points of each other in used
// fraction, and so that each stripe's units are spread over the pool's
// nodes. Phases:
//
//   - rebalance: a plan is made from every in-service drive's usage, read
//     fresh from its node (used bytes minus blocks already queued for
//     deletion, over capacity): the pool's mean used fraction m; source
//     drives, above m by more than half a point, each with the fraction
//     p = (used − m·total)/used of its units to move; and target drives,
//     below m, the only ones that receive units. A LIN scan then visits
//     the files of the pool with units on a source drive (their WDL says
//     so without reading stripe maps), whose WDL spans fewer nodes than
//     the pool has, or with stripes in the protection index (placed on
//     too few nodes while one was down); for each healthy stripe it moves
//     the units in excess on a node (more than ⌈width/nodes⌉) and each
//     unit on a source drive with probability p (a hash of file, stripe
//     and block decides, so a re-run of an item makes the same choices). Over many units a source
//     drive sheds its excess in expectation; the moved units go to target
//     drives weighted by free space, never to a node that would then hold
//     more than its share of the stripe.
//   - settle, settle2, settle3: one task per pool that follows the usage
//     as it is now rather than odds (see settle), moving units off the
//     drives still above the mean until none is; a pass skips the pools
//     already within half the threshold.
//   - check: reports each pool's spread of used fractions; a pool still
//     out of the band (parameter "threshold", default 5 points) counts as
//     an error in the report.
//
// Moves are copy-on-write through the stripe generation
// (Restriper.MoveUnits), so a rebalance runs beside client writes and other restripe jobs; a
// move that would lower the stripe's tolerance is not made, and stripes
// that need repair (a unit down or unplaced) are left to repair.
// Parameters: "pool" (only that pool; default all), "threshold" (points,
// 1-50), "dry-run=true" (count what would move, move nothing).
func Rebalance() job.Type { return newRebalance(clusterSpace) }

func newRebalance(space spaceLister) *rebalance {
	r := &rebalance{space: space, nodes: newDriveNodes(clusterDrives)}
	r.phases = []job.Phase{&balancePass{r: r, name: "rebalance"}}
	for i := 1; i <= settlePasses; i++ {
		name := "settle"
		if i > 1 {
			name = fmt.Sprintf("settle%d", i)
		}
		r.phases = append(r.phases, &balancePass{r: r, name: name, pass: i})
	}
	r.phases = append(r.phases, &balanceCheck{singleTask: singleTask{"check"}, r: r})
	return r
}

// rebalance is the rebalance job type; space is how it learns the drives'
// usage (nodes' block services; tests pass their own).
type rebalance struct {
	space  spaceLister
	nodes  *driveNodes
	phases []job.Phase
	liveMu sync.Mutex
	live   map[string]*liveSpace // settle passes' views, by job/phase/pool
}

var (
	_ job.Defaulter    = (*rebalance)(nil)
	_ job.ParamChecker = (*rebalance)(nil)
)

func (*rebalance) Name() string          { return "rebalance" }
func (*rebalance) Set() job.ExclusionSet { return job.SetRestripe }
func (r *rebalance) Phases() []job.Phase { return r.phases }

// Defaults: balance is an optimisation, below repairs and drains.
func (*rebalance) Defaults() (int, string) { return 5, "low" }

// DefaultBalanceThreshold is the spread of used fractions, in points,
// within which a pool counts as balanced.
const DefaultBalanceThreshold = 5.0

// settlePasses is the number of passes after the first. A unit drawn to
// move may find no drive it may go to (every target is on a node that
// already holds its share of the stripe), so the first pass moves less
// than its plan; the settle passes try other units for what is left.
const settlePasses = 3

// CheckParams validates "pool", "threshold" and "dry-run"; errors wrap
// job.ErrInvalid.
func (*rebalance) CheckParams(p map[string]string) error {
	if v := p["pool"]; v != "" && !cluster.ValidName(v) {
		return fmt.Errorf("%w: pool=%q: not a pool name (see weft pool list)", job.ErrInvalid, v)
	}
	if _, err := thresholdOf(p); err != nil {
		return err
	}
	return checkDryRun(p)
}

func thresholdOf(p map[string]string) (float64, error) {
	v := p["threshold"]
	if v == "" {
		return DefaultBalanceThreshold, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil || f < 1 || f > 50 {
		return 0, fmt.Errorf("%w: threshold=%q: want the largest acceptable spread of used fractions in points, 1 to 50 (default 5)", job.ErrInvalid, v)
	}
	return f, nil
}
