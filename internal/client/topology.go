package client

import (
	"context"
	"fmt"
	"time"

	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/placement"
)

// Topology is what the client needs to know about the cluster: its drives
// and their state, where each node's block service listens, and each pool's
// default protection. Package topology implements it over the control
// plane (topology.Cluster); tests use a fake they can flip drives and
// nodes down in (clienttest.Topology).
// Implementations must be safe for concurrent use and cheap to call: the
// client calls Drives once per stripe it reads or writes.
type Topology interface {
	// Drives returns every drive of the cluster with its current state.
	Drives(ctx context.Context) ([]DriveState, error)
	// NodeAddr returns the gRPC address ("host:port") of a node's block
	// service.
	NodeAddr(ctx context.Context, node string) (string, error)
	// PoolProtection returns the default protection of a pool, used for
	// files that do not request their own.
	PoolProtection(ctx context.Context, pool string) (erasure.Protection, error)
}

// Invalidator is implemented by a Topology that caches: the client calls
// Invalidate when an RPC says a node or drive is unreachable, so that the
// next Drives call sees the cluster's current state instead of waiting
// for the cache to expire.
type Invalidator interface {
	Invalidate()
}

// DriveState is one drive as the client sees it.
type DriveState struct {
	ID   meta.DriveID
	Node string
	Pool string
	// Up: the drive and its node are up (their block service answers).
	Up bool
	// Usable: status ready — the drive takes new blocks. Drives that are
	// up but suspended or draining still serve reads.
	Usable bool
	// FreeBytes and TotalBytes are the drive's space as last published.
	FreeBytes, TotalBytes int64
	// LocalPath is the drive's directory when its node runs on this
	// machine ("" otherwise): the client may read its blocks directly.
	LocalPath string
}

// Snapshot is one reading of the topology's drives, indexed for lookups:
// the client takes one per stripe it reads or writes, so that every
// decision about a stripe sees the same states. It never changes after it
// is taken; its methods are safe for concurrent use.
type Snapshot struct {
	list   []DriveState
	drives map[meta.DriveID]DriveState
}

// Snapshot returns a snapshot of the cluster's drives (Topology.Drives,
// once). Errors: ErrClosed once the Client is closed; the topology's,
// wrapped.
func (c *Client) Snapshot(ctx context.Context) (*Snapshot, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	v, err := c.view(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: drive states: %w", err)
	}
	return v, nil
}

// FreshSnapshot is Snapshot read past a caching topology's cache: for a
// caller whose placement came up short on a snapshot that may predate a
// change an administrator just made (drives moved into a pool, brought
// up), before it gives up. It reads the control plane at most once per
// freshInterval: a snapshot read since then is fresh enough, and writers
// failing on a pool that really is short of drives do not turn each of
// their stripes into a read of every node and drive record.
func (c *Client) FreshSnapshot(ctx context.Context) (*Snapshot, error) {
	// Invalidated before the time is stored: a caller that finds the
	// time recent finds the cache dropped too.
	if now := time.Now().UnixNano(); now-c.freshAt.Load() >= int64(freshInterval) {
		c.invalidate()
		c.freshAt.Store(now)
	}
	return c.Snapshot(ctx)
}

// freshInterval is how often FreshSnapshot reads past the cache at most.
const freshInterval = 250 * time.Millisecond

// view returns a snapshot of the cluster's drives.
func (c *Client) view(ctx context.Context) (*Snapshot, error) {
	ds, err := c.topo.Drives(ctx)
	if err != nil {
		return nil, err
	}
	v := &Snapshot{list: ds, drives: make(map[meta.DriveID]DriveState, len(ds))}
	for _, d := range ds {
		v.drives[d.ID] = d
	}
	return v, nil
}

// Up reports whether drive d is known and up.
func (v *Snapshot) Up(d meta.DriveID) bool { return v.drives[d].Up }

// Node returns the node of drive d ("" if unknown).
func (v *Snapshot) Node(d meta.DriveID) string { return v.drives[d].Node }

// pool returns the pool of drive d ("" if unknown).
func (v *Snapshot) pool(d meta.DriveID) string { return v.drives[d].Pool }

// local returns the directory of drive d if it is on this machine and up.
func (v *Snapshot) local(d meta.DriveID) string {
	if s := v.drives[d]; s.Up {
		return s.LocalPath
	}
	return ""
}

// Candidates returns the drives of pool, up or not, as placement
// candidates, in the topology's order.
func (v *Snapshot) Candidates(pool string) []placement.Candidate {
	var out []placement.Candidate
	for _, d := range v.list {
		if d.Pool != pool {
			continue
		}
		out = append(out, placement.Candidate{
			ID: placement.DriveID(d.ID), Node: d.Node, FreeBytes: d.FreeBytes, TotalBytes: d.TotalBytes,
			Up: d.Up, Usable: d.Usable,
		})
	}
	return out
}

// invalidate tells a caching topology that its view is stale.
func (c *Client) invalidate() {
	if inv, ok := c.topo.(Invalidator); ok {
		inv.Invalidate()
	}
}

// StripeTolerance returns how stripe s of file lin, in pool, is protected
// as this snapshot places its units (placement.ComputeTolerance over the
// placed units, whatever drives are up now), and the target: what a
// stripe of its layout gets over all of the pool's drives in service, up
// or not (placement.TargetTolerance). Every stripe commit passes it to
// meta, which indexes a stripe below its target for repair. Errors:
// ErrCorrupt for a malformed stripe map.
func (v *Snapshot) StripeTolerance(pool string, lin meta.LIN, s meta.Stripe) (meta.StripeTolerance, error) {
	l, err := StoredLayout(lin, s)
	if err != nil {
		return meta.StripeTolerance{}, err
	}
	var placed []placement.Unit
	for _, u := range s.Units {
		if u.Placed() {
			placed = append(placed, placement.Unit{Drive: placement.DriveID(u.Drive), Node: v.Node(u.Drive)})
		}
	}
	return meta.StripeTolerance{
		Achieved: metaTolerance(placement.ComputeTolerance(placed, l.Needed())),
		Target:   metaTolerance(v.TargetTolerance(pool, l)),
	}, nil
}

// TargetTolerance is what a stripe of layout l gets over all of pool's
// drives in service, up or not (placement.TargetTolerance).
func (v *Snapshot) TargetTolerance(pool string, l erasure.StripeLayout) placement.Tolerance {
	return placement.TargetTolerance(v.Candidates(pool), l.Width(), l.Needed())
}

// metaTolerance converts placement's tolerance to the namespace's.
func metaTolerance(t placement.Tolerance) meta.Tolerance {
	return meta.Tolerance{Drives: t.Drives, Nodes: t.Nodes}
}
