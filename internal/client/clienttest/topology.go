package clienttest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/erasure"
)

// Topology is a client.Topology whose state tests set. It is safe for
// concurrent use.
type Topology struct {
	mu          sync.Mutex
	drives      []client.DriveState
	addrs       map[string]string
	pools       map[string]erasure.Protection
	invalidated atomic.Int64
	caching     bool
	cached      []client.DriveState // what Drives serves while caching; nil: read again
}

var (
	_ client.Topology    = (*Topology)(nil)
	_ client.Invalidator = (*Topology)(nil)
)

// NewTopology returns an empty Topology.
func NewTopology() *Topology {
	return &Topology{addrs: map[string]string{}, pools: map[string]erasure.Protection{}}
}

// Drives implements client.Topology: a copy of the drives, or, while
// caching, the copy taken at the first call after the last Invalidate.
func (t *Topology) Drives(context.Context) ([]client.DriveState, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.caching {
		return slices.Clone(t.drives), nil
	}
	if t.cached == nil {
		t.cached = slices.Clone(t.drives)
	}
	return t.cached, nil
}

// Cache makes Drives behave as a caching topology's (topology.Cluster's)
// that no refresh interval expires: changes made with Set show only after
// the client calls Invalidate. The copy is taken now.
func (t *Topology) Cache() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.caching, t.cached = true, slices.Clone(t.drives)
}

// NodeAddr implements client.Topology; an unknown node is an error
// wrapping client.ErrUnavailable.
func (t *Topology) NodeAddr(_ context.Context, node string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.addrs[node]
	if !ok {
		return "", fmt.Errorf("%w: no node %q", client.ErrUnavailable, node)
	}
	return a, nil
}

// PoolProtection implements client.Topology.
func (t *Topology) PoolProtection(_ context.Context, pool string) (erasure.Protection, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pools[pool]
	if !ok {
		return p, fmt.Errorf("no pool %q", pool)
	}
	return p, nil
}

// Invalidate implements client.Invalidator: it counts the calls and, while
// caching, drops the cached copy.
func (t *Topology) Invalidate() {
	t.invalidated.Add(1)
	t.mu.Lock()
	t.cached = nil
	t.mu.Unlock()
}

// Invalidations returns how many times Invalidate was called.
func (t *Topology) Invalidations() int64 { return t.invalidated.Load() }

// States returns a copy of the drives, in the order they were added.
func (t *Topology) States() []client.DriveState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.drives)
}

// AddDrive adds a drive.
func (t *Topology) AddDrive(d client.DriveState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drives = append(t.drives, d)
}

// SetAddr sets the block service address of node.
func (t *Topology) SetAddr(node, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addrs[node] = addr
}

// SetPool sets the default protection of pool.
func (t *Topology) SetPool(pool string, p erasure.Protection) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pools[pool] = p
}

// Set applies fn to the drives matching match.
func (t *Topology) Set(match func(*client.DriveState) bool, fn func(*client.DriveState)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.drives {
		if match(&t.drives[i]) {
			fn(&t.drives[i])
		}
	}
}
