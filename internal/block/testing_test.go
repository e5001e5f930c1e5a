package block

import (
	"context"
	"math/rand/v2"
	"net"
	"os"
	"testing"

	"google.golang.org/grpc"

	"github.com/weftfs/weft/internal/drive"
)

// testNode is a block service with drives d1 and d2 in temp dirs, served on
// 127.0.0.1:0, and a Client dialed to it.
type testNode struct {
	svc    *Service
	drives []*drive.Drive
	client *Client
	addr   string
}

func startNode(t testing.TB, root string, sync drive.SyncMode) *testNode {
	t.Helper()
	n := &testNode{}
	for _, id := range []drive.ID{1, 2} {
		dir, err := os.MkdirTemp(root, "drive-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		d, err := drive.Open(dir, drive.Options{
			ClusterID: "c-test", Node: "node-1", Class: drive.ClassSSD, Sync: sync,
			AllocID: func() (drive.ID, error) { return id, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		n.drives = append(n.drives, d)
	}
	svc, err := NewService(nil, n.drives...)
	if err != nil {
		t.Fatal(err)
	}
	n.svc = svc
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(ServerOptions()...)
	svc.Register(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	n.addr = lis.Addr().String()
	if n.client, err = Dial(n.addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.client.Close() })
	if _, err := n.client.Counters(context.Background()); err != nil { // connect now
		t.Fatal(err)
	}
	return n
}

// payload returns n deterministic pseudo-random bytes.
func payload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
