package nfstest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/gateway/nfs"
	"github.com/weftfs/weft/internal/vfs"
	"github.com/weftfs/weft/internal/vfs/vfstest"
)

// Capacity is the drive capacity the fixture's FS reports (FSSTAT).
const (
	CapacityTotal = vfstest.CapacityTotal
	CapacityFree  = vfstest.CapacityFree
)

// Fixture is an in-process cluster (vfstest.Cluster), a vfs.FS over it
// with permission checks, and an nfs.Server serving it on a loopback
// port. Everything stops at the end of the test.
type Fixture struct {
	TB      testing.TB
	Cluster *vfstest.Cluster
	FS      *vfs.FS
	Server  *nfs.Server
	// Addr is the listener's host:port; Port its port.
	Addr string
	Port int
	// IdleClose is the Config.IdleClose of the servers Start starts.
	IdleClose time.Duration
	// DRC is the Config.DRC of the servers Start starts (set it, then
	// Start again).
	DRC nfs.DRCStore
	// MaxConns is the Config.MaxConns of the servers Start starts.
	MaxConns int

	stop func()
}

// New starts a Fixture serving exports (none given: "/" with
// NoRootSquash) with write verifier verifier.
func New(tb testing.TB, verifier uint64, exports ...nfs.Export) *Fixture {
	tb.Helper()
	f := &Fixture{TB: tb, Cluster: vfstest.New(tb)}
	if len(exports) == 0 {
		exports = []nfs.Export{{Path: "/", NoRootSquash: true}}
	}
	f.Start(verifier, exports...)
	return f
}

// NewFS returns a new vfs.FS over the fixture's namespace (as another
// gateway node would have), with its own data-path client.
func (f *Fixture) NewFS() *vfs.FS { return f.Cluster.NewFS() }

// Start starts a new Server over a new FS on a new port (stopping the
// running one first, as a gateway restart does).
func (f *Fixture) Start(verifier uint64, exports ...nfs.Export) {
	f.TB.Helper()
	if f.stop != nil {
		f.stop()
	}
	f.FS = f.NewFS()
	s, err := nfs.New(nfs.Config{FS: f.FS, Exports: exports, IdleClose: f.IdleClose, DRC: f.DRC, MaxConns: f.MaxConns})
	if err != nil {
		f.TB.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.TB.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l, verifier) }()
	f.Server, f.Addr, f.Port = s, l.Addr().String(), l.Addr().(*net.TCPAddr).Port
	stopped := false
	f.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
			f.TB.Errorf("Serve: %v", err)
		}
		if err := s.Close(context.Background()); err != nil {
			f.TB.Errorf("Server.Close: %v", err)
		}
	}
	f.TB.Cleanup(f.stop)
}
