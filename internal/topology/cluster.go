package topology

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
)

// Cluster is the client.Topology of a running cluster, read from the
// control plane (package cluster) and cached: a snapshot of drives, nodes
// and pools is reused for the refresh interval, refreshed by the first call
// after it expires, and dropped at once by Invalidate (the client calls it
// when an RPC finds a node or drive unreachable). No goroutine runs in the
// background.
//
// If the control plane cannot be read, calls return the last snapshot as
// long as there is one (block RPCs still tell the truth about a node), and
// the error otherwise.
//
// Locking: mu guards the snapshot; fetchMu serialises refreshes so that
// concurrent callers finding the cache stale read the control plane once.
type Cluster struct {
	store   *cluster.Store
	refresh time.Duration
	now     func() time.Time

	fetchMu sync.Mutex
	mu      sync.Mutex
	at      time.Time // when the snapshot was read; zero: stale
	drives  []client.DriveState
	addrs   map[string]string // node name → gRPC address
	pools   map[string]erasure.Protection
}

var (
	_ client.Topology    = (*Cluster)(nil)
	_ client.Invalidator = (*Cluster)(nil)
)

// DefaultRefresh is the snapshot lifetime of a Cluster made with a
// refresh of 0.
const DefaultRefresh = time.Second

// New returns a Cluster over store whose snapshot lives refresh (0:
// DefaultRefresh).
func New(store *cluster.Store, refresh time.Duration) *Cluster {
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	return &Cluster{store: store, refresh: refresh, now: time.Now}
}

// Invalidate drops the snapshot: the next call reads the control plane.
func (t *Cluster) Invalidate() {
	t.mu.Lock()
	t.at = time.Time{}
	t.mu.Unlock()
}

// Drives implements client.Topology. A drive is Up when it and its node are up
// (published under a live lease without error), Usable when its status is
// ready. The returned slice is shared: callers must not modify it.
func (t *Cluster) Drives(ctx context.Context) ([]client.DriveState, error) {
	if err := t.ensure(ctx); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.drives, nil
}

// NodeAddr implements client.Topology. It returns an error wrapping
// client.ErrUnavailable for a node the control plane does not know.
func (t *Cluster) NodeAddr(ctx context.Context, node string) (string, error) {
	if err := t.ensure(ctx); err != nil {
		return "", err
	}
	t.mu.Lock()
	addr, ok := t.addrs[node]
	t.mu.Unlock()
	if !ok || addr == "" {
		return "", fmt.Errorf("%w: node %q is not registered or has no gRPC address (see weft status)", client.ErrUnavailable, node)
	}
	return addr, nil
}

// PoolProtection implements client.Topology: the pool record's protection,
// cached with the snapshot. Errors wrap cluster.ErrNotFound for an unknown
// pool and erasure.ErrBadProtection for an unparsable record.
func (t *Cluster) PoolProtection(ctx context.Context, pool string) (erasure.Protection, error) {
	if err := t.ensure(ctx); err != nil {
		return erasure.Protection{}, err
	}
	t.mu.Lock()
	p, ok := t.pools[pool]
	t.mu.Unlock()
	if ok {
		return p, nil
	}
	rec, err := t.store.GetPool(ctx, pool)
	if err != nil {
		return erasure.Protection{}, fmt.Errorf("topology: protection of pool %q: %w", pool, err)
	}
	p, err = erasure.ParseProtection(rec.Protection)
	if err != nil {
		return erasure.Protection{}, fmt.Errorf("topology: pool %q: %w", pool, err)
	}
	t.mu.Lock()
	t.pools[pool] = p
	t.mu.Unlock()
	return p, nil
}

// ensure refreshes the snapshot if it is stale.
func (t *Cluster) ensure(ctx context.Context) error {
	if t.fresh() {
		return nil
	}
	t.fetchMu.Lock()
	defer t.fetchMu.Unlock()
	if t.fresh() {
		return nil
	}
	drives, addrs, err := t.read(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		if t.drives != nil {
			return nil // keep serving the last snapshot
		}
		return fmt.Errorf("topology: reading the cluster topology: %w", err)
	}
	t.drives, t.addrs, t.pools, t.at = drives, addrs, map[string]erasure.Protection{}, t.now()
	return nil
}

// fresh reports whether the snapshot is younger than the refresh interval.
func (t *Cluster) fresh() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.at.IsZero() && t.now().Sub(t.at) < t.refresh
}

// read lists nodes and drives from the control plane.
func (t *Cluster) read(ctx context.Context) ([]client.DriveState, map[string]string, error) {
	nodes, err := t.store.ListNodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	ds, err := t.store.ListDrives(ctx)
	if err != nil {
		return nil, nil, err
	}
	addrs := make(map[string]string, len(nodes))
	nodeUp := make(map[string]bool, len(nodes))
	nodeLocal := make(map[string]bool, len(nodes))
	host, _ := os.Hostname()
	for _, n := range nodes {
		addrs[n.Name] = n.GRPCAddr
		nodeUp[n.Name] = n.State == cluster.Up
		nodeLocal[n.Name] = n.Live != nil && host != "" && n.Live.Host == host
	}
	out := make([]client.DriveState, 0, len(ds))
	for _, d := range ds {
		s := client.DriveState{
			ID: meta.DriveID(d.ID), Node: d.Node, Pool: d.Pool,
			Up:     d.State == cluster.Up && nodeUp[d.Node],
			Usable: d.Status == cluster.StatusReady,
		}
		if d.Live != nil {
			s.FreeBytes, s.TotalBytes = d.Live.FreeBytes, d.Live.TotalBytes
		}
		if nodeLocal[d.Node] {
			s.LocalPath = d.Path
		}
		out = append(out, s)
	}
	return out, addrs, nil
}
