package clienttest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
	"github.com/weftfs/weft/internal/meta"
)

// Sizes used by the tests.
const (
	KiB = 1 << 10
	MiB = 1 << 20
	// Unit is the unit size of most tests: small stripes, many of them.
	Unit = 64 * KiB
)

var bg = context.Background()

// Fixture is an in-process cluster: 3 nodes (n1, n2, n3) × 4 drives (d1-d4
// on n1, d5-d8 on n2, d9-d12 on n3) of real block services on loopback,
// a memkv namespace formatted with pool p0 (ec:4+2), and a fake topology
// in which tests flip drives and nodes down. Everything is torn down at
// the end of the test. A Fixture is not safe for concurrent use by tests'
// goroutines, except through Clients it made.
type Fixture struct {
	TB    testing.TB
	Meta  *meta.Meta
	Topo  *Topology
	Nodes []*Node
}

// Node is one node's block service. Setting Down makes every RPC fail with
// Unavailable, as if the node were unreachable (the topology is not
// changed: see Fixture.SetNodeDown).
type Node struct {
	Name   string
	Addr   string
	Svc    *block.Service
	Drives []*drive.Drive
	Down   atomic.Bool
}

// New starts a Fixture; it fails the test on any error.
func New(tb testing.TB) *Fixture {
	tb.Helper()
	store := memkv.New(kv.Options{Limits: kv.Limits{MaxOps: 128, MaxBytes: 1536 * 1024}})
	if err := meta.Format(bg, store, meta.FormatOptions{Pool: "p0"}); err != nil {
		tb.Fatal(err)
	}
	m, err := meta.Open(bg, meta.Config{Store: store})
	if err != nil {
		tb.Fatal(err)
	}
	f := &Fixture{TB: tb, Meta: m, Topo: NewTopology()}
	f.Topo.SetPool("p0", erasure.Protection{Data: 4, Parity: 2})
	root := TempDir(tb)
	id := drive.ID(0)
	for n := 1; n <= 3; n++ {
		tn := &Node{Name: fmt.Sprintf("n%d", n)}
		for k := 0; k < 4; k++ {
			id++
			did := id
			d, err := drive.Open(filepath.Join(root, fmt.Sprintf("%s-d%d", tn.Name, did)), drive.Options{
				ClusterID: "c-test", Node: tn.Name, Class: drive.ClassSSD, Sync: drive.SyncNever,
				AllocID: func() (drive.ID, error) { return did, nil },
			})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { d.Close() })
			tn.Drives = append(tn.Drives, d)
			f.Topo.AddDrive(client.DriveState{
				ID: meta.DriveID(did), Node: tn.Name, Pool: "p0", Up: true, Usable: true,
				FreeBytes: 1 << 40, TotalBytes: 1 << 41,
			})
		}
		if tn.Svc, err = block.NewService(nil, tn.Drives...); err != nil {
			tb.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		refuse := func() error {
			if tn.Down.Load() {
				return status.Errorf(codes.Unavailable, "node %s is down (test)", tn.Name)
			}
			return nil
		}
		opts := append(block.ServerOptions(),
			grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				if err := refuse(); err != nil {
					return nil, err
				}
				return h(ctx, req)
			}),
			grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				if err := refuse(); err != nil {
					return err
				}
				return h(srv, ss)
			}))
		g := grpc.NewServer(opts...)
		tn.Svc.Register(g)
		go g.Serve(lis)
		tb.Cleanup(g.Stop)
		tn.Addr = lis.Addr().String()
		f.Topo.SetAddr(tn.Name, tn.Addr)
		f.Nodes = append(f.Nodes, tn)
	}
	return f
}

// TempDir returns a directory removed at the end of the test: in tmpfs
// (/dev/shm) if there is one, since creating a drive syncs its identity
// file, which costs ~100 ms on a slow disk.
func TempDir(tb testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "weft-client-test-"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return tb.TempDir()
}

// Client returns a Client on the fixture with unit size unit (0: the
// default), after tweak changed its Config; it is closed at the end of
// the test. Its files' data goes to blocks whatever their size
// (InlineMax -1): the fixture's tests are of the block path; a tweak
// setting InlineMax tests inline stripes.
func (f *Fixture) Client(unit int, tweak ...func(*client.Config)) *client.Client {
	f.TB.Helper()
	cfg := client.Config{Meta: f.Meta, Topology: f.Topo, UnitSize: unit, InlineMax: -1}
	for _, fn := range tweak {
		fn(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		f.TB.Fatal(err)
	}
	f.TB.Cleanup(func() { c.Close() })
	return c
}

// Create makes a file in the root with protection prot ("" inherits the
// pool's ec:4+2).
func (f *Fixture) Create(name, prot string) meta.LIN {
	f.TB.Helper()
	p, err := meta.ParseProtection(prot)
	if err != nil {
		f.TB.Fatal(err)
	}
	a, err := f.Meta.Create(bg, meta.RootLIN, name, meta.NewInode{Mode: 0o644, Protection: p})
	if err != nil {
		f.TB.Fatal(err)
	}
	return a.LIN
}

// Node returns the node holding drive d.
func (f *Fixture) Node(d meta.DriveID) *Node {
	for _, n := range f.Nodes {
		for _, dr := range n.Drives {
			if meta.DriveID(dr.ID()) == d {
				return n
			}
		}
	}
	f.TB.Fatalf("no drive %d", d)
	return nil
}

// Drive returns drive d.
func (f *Fixture) Drive(d meta.DriveID) *drive.Drive {
	for _, dr := range f.Node(d).Drives {
		if meta.DriveID(dr.ID()) == d {
			return dr
		}
	}
	return nil
}

// SetNodeDown takes a node down (or up) for real and in the topology.
func (f *Fixture) SetNodeDown(name string, down bool) {
	for _, n := range f.Nodes {
		if n.Name == name {
			n.Down.Store(down)
		}
	}
	f.Topo.Set(func(d *client.DriveState) bool { return d.Node == name }, func(d *client.DriveState) { d.Up = !down })
}

// SetDriveDown takes a drive down (or up): its node stops serving it and
// the topology says so.
func (f *Fixture) SetDriveDown(id meta.DriveID, down bool) {
	n := f.Node(id)
	if down {
		n.Svc.Remove(drive.ID(id))
	} else if err := n.Svc.Add(f.Drive(id)); err != nil {
		f.TB.Fatal(err)
	}
	f.Topo.Set(func(d *client.DriveState) bool { return d.ID == id }, func(d *client.DriveState) { d.Up = !down })
}

// BlockFile returns the path of a unit's block on its drive.
func (f *Fixture) BlockFile(u meta.Unit) string {
	s := u.Block.String()
	return filepath.Join(f.Drive(u.Drive).Path(), "blocks", s[:2], s)
}

// Stripes returns the stripe maps of lin.
func (f *Fixture) Stripes(lin meta.LIN) []meta.Stripe {
	f.TB.Helper()
	ss, err := f.Meta.GetStripes(bg, lin, 0, 1<<20)
	if err != nil {
		f.TB.Fatal(err)
	}
	return ss
}

// UnitsOn counts the units of lin on drive d.
func (f *Fixture) UnitsOn(lin meta.LIN, d meta.DriveID) int {
	n := 0
	for _, s := range f.Stripes(lin) {
		for _, u := range s.Units {
			if u.Drive == d {
				n++
			}
		}
	}
	return n
}

// Queued reports whether unit u's block is in the delete queue.
func (f *Fixture) Queued(u meta.Unit) bool {
	f.TB.Helper()
	es, err := f.Meta.ListDeletes(bg, u.Drive, meta.BlockID{}, 1<<20)
	if err != nil {
		f.TB.Fatal(err)
	}
	return slices.ContainsFunc(es, func(e meta.DeleteEntry) bool { return e.Block == u.Block })
}

// DrainDeletes deletes every queued block from its drive, as the node
// servers' deleters would (so repeated runs do not fill tmpfs, and stale
// maps name blocks that are gone).
func (f *Fixture) DrainDeletes() {
	for _, n := range f.Nodes {
		for _, d := range n.Drives {
			es, err := f.Meta.ListDeletes(bg, meta.DriveID(d.ID()), meta.BlockID{}, 100000)
			if err != nil {
				f.TB.Fatal(err)
			}
			for _, e := range es {
				d.Delete(drive.BlockID(e.Block))
			}
			if err := f.Meta.AckDeletes(bg, es); err != nil {
				f.TB.Fatal(err)
			}
		}
	}
}

// WriteFile writes data to a new file of protection prot through c, in
// chunks of 50 KiB, and flushes it, returning the LIN, the open handle
// and the Flush error.
func (f *Fixture) WriteFile(c *client.Client, name, prot string, data []byte) (meta.LIN, *client.File, error) {
	f.TB.Helper()
	lin := f.Create(name, prot)
	fh, err := c.Open(bg, lin, true)
	if err != nil {
		f.TB.Fatal(err)
	}
	WriteAll(f.TB, fh, data, 50*KiB)
	return lin, fh, fh.Flush(bg)
}

// WriteClosed writes data to a new file of protection prot and closes it.
func (f *Fixture) WriteClosed(c *client.Client, name, prot string, data []byte) meta.LIN {
	f.TB.Helper()
	lin, fh, err := f.WriteFile(c, name, prot, data)
	if err != nil {
		f.TB.Fatal(err)
	}
	if err := fh.Close(bg); err != nil {
		f.TB.Fatal(err)
	}
	return lin
}

// ReadBack reads lin whole through a fresh client.
func (f *Fixture) ReadBack(lin meta.LIN) []byte {
	f.TB.Helper()
	r := f.Client(Unit)
	fh, err := r.Open(bg, lin, false)
	if err != nil {
		f.TB.Fatal(err)
	}
	defer fh.Close(bg)
	return ReadAll(f.TB, fh, 100*KiB)
}
