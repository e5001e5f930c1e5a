package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// ErrEnv is returned when the engine hands a phase an Env that is not a
// jobs.Env (a wiring mistake).
var ErrEnv = errors.New("jobs: environment lacks the namespace and data path")

// Env is what the job types need from the node running them; the server's
// job environment implements it besides job.Env.
type Env interface {
	job.Env
	// Meta is the namespace.
	Meta() *meta.Meta
	// Restriper re-protects, moves and verifies stripes (repair, drain,
	// rebalance, integrityscan, mediascan).
	Restriper() *restripe.Restriper
	// Cluster is the control plane (drive statuses).
	Cluster() *cluster.Store
	// Blocks returns a client of the block service of node (cached; the
	// caller does not close it), for drive scans: list, stat, verify and
	// delete blocks on that node's drives.
	Blocks(ctx context.Context, node string) (*block.Client, error)
	// RecordEvent adds an event to the job engine's event log
	// (job.Engine.RecordEvent): a job that finds a file with lost data
	// records it there once.
	RecordEvent(ctx context.Context, ev job.Event) (job.Event, error)
}

func envOf(e job.Env) (Env, error) {
	x, ok := e.(Env)
	if !ok {
		return nil, fmt.Errorf("%w (got %T)", ErrEnv, e)
	}
	return x, nil
}

// Register registers every job type of this package with the engine.
func Register(e interface{ Register(job.Type) error }) error {
	for _, t := range []job.Type{Repair(), Drain(), IntegrityScan(), TreeDelete(), Collect(), Rebalance(), Multiscan(), MediaScan(), Relayout(), Tier(), Fsck()} {
		if err := e.Register(t); err != nil {
			return err
		}
	}
	return nil
}
