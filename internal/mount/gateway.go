package mount

import (
	"context"
	"log/slog"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/vfs"
)

// NewPlacer returns the vfs.Placer a mount uses — the SET POOL rules of
// the policy follow last saw (see policyPlacer) — for another process's
// vfs.FS, such as a node's NFS gateway (internal/server). drives lists
// the drives' states (topology.Topology.Drives).
func NewPlacer(follow *cluster.PolicyFollower, drives func(context.Context) ([]client.DriveState, error), log *slog.Logger) vfs.Placer {
	return &policyPlacer{follow: follow, drives: drives, log: log}
}

// Capacity returns the vfs.Capacity a mount reports (the space of the
// drives that are up), for another process's vfs.FS.
func Capacity(store *cluster.Store) vfs.Capacity { return capacity(store) }
