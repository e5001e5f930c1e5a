package jobs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
)

// The drives in service and the node serving each, as the drive scans
// (collect, mediascan) and rebalance see them.

// driveLister returns the drives in service: their ids, nodes, and
// whether they are up now.
type driveLister func(ctx context.Context, e Env) ([]serviceDrive, error)

// serviceDrive is a drive in service as the drive scans need it.
type serviceDrive struct {
	ID   drive.ID
	Node string
	Up   bool
}

// clusterDrives lists the drives of the control plane that are not removed.
func clusterDrives(ctx context.Context, e Env) ([]serviceDrive, error) {
	ds, err := e.Cluster().ListDrives(ctx)
	if err != nil {
		return nil, err
	}
	var out []serviceDrive
	for _, d := range ds {
		if d.Status == cluster.StatusRemoved {
			continue
		}
		out = append(out, serviceDrive{ID: drive.ID(d.ID), Node: d.Node, Up: d.State == cluster.Up})
	}
	return out, nil
}

// driveNodes maps the drives in service to their nodes (and keeps each
// one's serviceDrive), read through a driveLister at most every
// driveNodesTTL: drive scans, rebalance and fsck need it for every item,
// and drives change nodes rarely (a moved drive's items fail until the
// map is read again, then are retried; a drive gone down meanwhile is
// found down by its block service's answer, or by the next read).
type driveNodes struct {
	list   driveLister
	mu     sync.Mutex
	at     time.Time
	nodes  map[meta.DriveID]string
	drives map[meta.DriveID]serviceDrive
}

const driveNodesTTL = 5 * time.Second

func newDriveNodes(list driveLister) *driveNodes { return &driveNodes{list: list} }

// get returns the node of each drive (shared: do not modify it).
func (n *driveNodes) get(ctx context.Context, e Env) (map[meta.DriveID]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.refresh(ctx, e); err != nil {
		return nil, err
	}
	return n.nodes, nil
}

// inService returns each drive's serviceDrive (shared: do not modify it).
func (n *driveNodes) inService(ctx context.Context, e Env) (map[meta.DriveID]serviceDrive, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.refresh(ctx, e); err != nil {
		return nil, err
	}
	return n.drives, nil
}

// refresh reads the drives again if the maps are older than
// driveNodesTTL. Locking: n.mu held.
func (n *driveNodes) refresh(ctx context.Context, e Env) error {
	if n.nodes != nil && time.Since(n.at) < driveNodesTTL {
		return nil
	}
	ds, err := n.list(ctx, e)
	if err != nil {
		return err
	}
	n.nodes = make(map[meta.DriveID]string, len(ds))
	n.drives = make(map[meta.DriveID]serviceDrive, len(ds))
	for _, d := range ds {
		n.nodes[meta.DriveID(d.ID)] = d.Node
		n.drives[meta.DriveID(d.ID)] = d
	}
	n.at = time.Now()
	return nil
}

// of returns the node serving drive d; who names the job in the error.
func (n *driveNodes) of(ctx context.Context, e Env, d drive.ID, who string) (string, error) {
	m, err := n.get(ctx, e)
	if err != nil {
		return "", err
	}
	node, ok := m[meta.DriveID(d)]
	if !ok {
		return "", fmt.Errorf("%s: drive %v is no longer in service", who, d)
	}
	return node, nil
}
