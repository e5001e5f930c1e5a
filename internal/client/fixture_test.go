package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
	"github.com/weftfs/weft/internal/meta"
)

var bg = context.Background()

const (
	kib = 1 << 10
	mib = 1 << 20
	// testUnit is the unit size of most tests: small stripes, many of them.
	testUnit = 64 * kib
)

// fixture is an in-process cluster: 3 nodes × 4 drives of real block
// services on loopback, a memkv namespace, and a fake topology in which
// tests flip drives and nodes down.
type fixture struct {
	tb    testing.TB
	meta  *meta.Meta
	topo  *fakeTopology
	nodes []*testNode
}

// testNode is one node's block service. down makes every RPC fail with
// Unavailable, as if the node were unreachable.
type testNode struct {
	name   string
	addr   string
	svc    *block.Service
	drives []*drive.Drive
	down   atomic.Bool
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	store := memkv.New(kv.Options{Limits: kv.Limits{MaxOps: 128, MaxBytes: 1536 * 1024}})
	if err := meta.Format(bg, store, meta.FormatOptions{Pool: "p0"}); err != nil {
		tb.Fatal(err)
	}
	m, err := meta.Open(bg, meta.Config{Store: store})
	if err != nil {
		tb.Fatal(err)
	}
	f := &fixture{tb: tb, meta: m, topo: newFakeTopology()}
	f.topo.pools["p0"] = erasure.Protection{Data: 4, Parity: 2}
	root := tempDir(tb)
	id := drive.ID(0)
	for n := 1; n <= 3; n++ {
		tn := &testNode{name: fmt.Sprintf("n%d", n)}
		for k := 0; k < 4; k++ {
			id++
			did := id
			d, err := drive.Open(filepath.Join(root, fmt.Sprintf("%s-d%d", tn.name, did)), drive.Options{
				ClusterID: "c-test", Node: tn.name, Class: drive.ClassSSD, Sync: drive.SyncNever,
				AllocID: func() (drive.ID, error) { return did, nil },
			})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { d.Close() })
			tn.drives = append(tn.drives, d)
			f.topo.drives = append(f.topo.drives, DriveState{
				ID: meta.DriveID(did), Node: tn.name, Pool: "p0", Up: true, Usable: true,
				FreeBytes: 1 << 40, TotalBytes: 1 << 41,
			})
		}
		if tn.svc, err = block.NewService(nil, tn.drives...); err != nil {
			tb.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		refuse := func() error {
			if tn.down.Load() {
				return status.Errorf(codes.Unavailable, "node %s is down (test)", tn.name)
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
		tn.svc.Register(g)
		go g.Serve(lis)
		tb.Cleanup(g.Stop)
		tn.addr = lis.Addr().String()
		f.topo.addrs[tn.name] = tn.addr
		f.nodes = append(f.nodes, tn)
	}
	return f
}

// tempDir returns a directory removed at the end of the test: in tmpfs
// (/dev/shm) if there is one, since creating a drive syncs its identity
// file, which costs ~100 ms on a slow disk.
func tempDir(tb testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "weft-client-test-"); err == nil {
			tb.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return tb.TempDir()
}

// client returns a Client on the fixture with unit size unit, closed at
// the end of the test.
func (f *fixture) client(unit int, tweak ...func(*Config)) *Client {
	f.tb.Helper()
	cfg := Config{Meta: f.meta, Topology: f.topo, UnitSize: unit}
	for _, fn := range tweak {
		fn(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		f.tb.Fatal(err)
	}
	f.tb.Cleanup(func() { c.Close() })
	return c
}

// create makes a file in the root with protection prot ("" inherits the
// pool's ec:4+2).
func (f *fixture) create(name, prot string) meta.LIN {
	f.tb.Helper()
	p, err := meta.ParseProtection(prot)
	if err != nil {
		f.tb.Fatal(err)
	}
	a, err := f.meta.Create(bg, meta.RootLIN, name, meta.NewInode{Mode: 0o644, Protection: p})
	if err != nil {
		f.tb.Fatal(err)
	}
	return a.LIN
}

// node returns the node holding drive d.
func (f *fixture) node(d meta.DriveID) *testNode {
	for _, n := range f.nodes {
		for _, dr := range n.drives {
			if meta.DriveID(dr.ID()) == d {
				return n
			}
		}
	}
	f.tb.Fatalf("no drive %d", d)
	return nil
}

// drive returns drive d.
func (f *fixture) drive(d meta.DriveID) *drive.Drive {
	for _, dr := range f.node(d).drives {
		if meta.DriveID(dr.ID()) == d {
			return dr
		}
	}
	return nil
}

// setNodeDown takes a node down (or up) for real and in the topology.
func (f *fixture) setNodeDown(name string, down bool) {
	for _, n := range f.nodes {
		if n.name == name {
			n.down.Store(down)
		}
	}
	f.topo.set(func(d *DriveState) bool { return d.Node == name }, func(d *DriveState) { d.Up = !down })
}

// setDriveDown takes a drive down (or up): its node stops serving it and
// the topology says so.
func (f *fixture) setDriveDown(id meta.DriveID, down bool) {
	n := f.node(id)
	if down {
		n.svc.Remove(drive.ID(id))
	} else if err := n.svc.Add(f.drive(id)); err != nil {
		f.tb.Fatal(err)
	}
	f.topo.set(func(d *DriveState) bool { return d.ID == id }, func(d *DriveState) { d.Up = !down })
}

// blockFile returns the path of a block on its drive.
func (f *fixture) blockFile(u meta.Unit) string {
	s := u.Block.String()
	return filepath.Join(f.drive(u.Drive).Path(), "blocks", s[:2], s)
}

// stripes returns the stripe maps of lin.
func (f *fixture) stripes(lin meta.LIN) []meta.Stripe {
	f.tb.Helper()
	ss, err := f.meta.GetStripes(bg, lin, 0, 1<<20)
	if err != nil {
		f.tb.Fatal(err)
	}
	return ss
}

// fakeTopology is a Topology whose state tests set.
type fakeTopology struct {
	mu          sync.Mutex
	drives      []DriveState
	addrs       map[string]string
	pools       map[string]erasure.Protection
	invalidated atomic.Int64
}

var (
	_ Topology    = (*fakeTopology)(nil)
	_ Invalidator = (*fakeTopology)(nil)
)

func newFakeTopology() *fakeTopology {
	return &fakeTopology{addrs: map[string]string{}, pools: map[string]erasure.Protection{}}
}

func (t *fakeTopology) Drives(context.Context) ([]DriveState, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.drives), nil
}

func (t *fakeTopology) NodeAddr(_ context.Context, node string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	a, ok := t.addrs[node]
	if !ok {
		return "", fmt.Errorf("%w: no node %q", ErrUnavailable, node)
	}
	return a, nil
}

func (t *fakeTopology) PoolProtection(_ context.Context, pool string) (erasure.Protection, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.pools[pool]
	if !ok {
		return p, fmt.Errorf("no pool %q", pool)
	}
	return p, nil
}

func (t *fakeTopology) Invalidate() { t.invalidated.Add(1) }

// set applies fn to the drives matching match.
func (t *fakeTopology) set(match func(*DriveState) bool, fn func(*DriveState)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.drives {
		if match(&t.drives[i]) {
			fn(&t.drives[i])
		}
	}
}

// randBytes returns n deterministic pseudo-random bytes.
func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for k := 0; k < 8; k++ {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeAll writes data at 0 in chunks of chunk bytes.
func writeAll(tb testing.TB, f *File, data []byte, chunk int) {
	tb.Helper()
	for off := 0; off < len(data); off += chunk {
		end := min(off+chunk, len(data))
		if n, err := f.WriteAt(bg, data[off:end], int64(off)); err != nil || n != end-off {
			tb.Fatalf("WriteAt(%d bytes at %d) = %d, %v", end-off, off, n, err)
		}
	}
}

// readAll reads the whole file in chunks of chunk bytes, to EOF.
func readAll(tb testing.TB, f *File, chunk int) []byte {
	tb.Helper()
	var out []byte
	buf := make([]byte, chunk)
	for off := int64(0); ; {
		n, err := f.ReadAt(bg, buf, off)
		out = append(out, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			return out
		}
		if err != nil {
			tb.Fatalf("ReadAt(%d at %d): %v", chunk, off, err)
		}
	}
}

// mustEqual fails with the first differing offset.
func mustEqual(tb testing.TB, what string, got, want []byte) {
	tb.Helper()
	if bytes.Equal(got, want) {
		return
	}
	if len(got) != len(want) {
		tb.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			tb.Fatalf("%s: first difference at byte %d: %#x, want %#x", what, i, got[i], want[i])
		}
	}
}

// flipByte flips one data byte of a block file on disk.
func flipByte(tb testing.TB, path string, off int64) {
	tb.Helper()
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer fh.Close()
	b := make([]byte, 1)
	at := drive.HeaderAlign + off
	if _, err := fh.ReadAt(b, at); err != nil {
		tb.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := fh.WriteAt(b, at); err != nil {
		tb.Fatal(err)
	}
}
