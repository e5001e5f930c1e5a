// Package vfstest gives the gateways' tests a real vfs.FS without their
// naming what lies below vfs: an in-process cluster (client/clienttest)
// and file systems over it, as gateway nodes would have. A gateway's own
// test-support package imports this one and internal/vfs, nothing lower.
package vfstest

import (
	"context"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/vfs"
)

// The capacity the file systems report (statfs, FSSTAT).
const (
	CapacityTotal = 1 << 40
	CapacityFree  = 1 << 39
)

// Cluster is an in-process cluster (metadata and block services) that
// stops at the end of the test.
type Cluster struct {
	tb testing.TB
	f  *clienttest.Fixture
}

// New starts a Cluster.
func New(tb testing.TB) *Cluster {
	tb.Helper()
	return &Cluster{tb: tb, f: clienttest.New(tb)}
}

// NewFS returns a new vfs.FS over the cluster's namespace with its own
// data-path client, checking permissions itself (as a protocol gateway's
// does); it is closed at the end of the test.
func (c *Cluster) NewFS() *vfs.FS {
	cl := c.f.Client(clienttest.Unit, func(*client.Config) {})
	fs := vfs.New(vfs.Config{Meta: c.f.Meta, Client: cl, CheckPermissions: true,
		Capacity: func(context.Context) (int64, int64, error) { return CapacityTotal, CapacityFree, nil }})
	c.tb.Cleanup(func() { _ = fs.Close(context.Background()) })
	return fs
}

// RandBytes returns n pseudo-random bytes from seed (clienttest.RandBytes).
func RandBytes(n int, seed uint64) []byte { return clienttest.RandBytes(n, seed) }
