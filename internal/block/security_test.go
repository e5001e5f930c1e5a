package block

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/pki"
	"github.com/weftfs/weft/internal/pki/pkitest"
)

// newPKI makes a CA for cluster in a new directory and issues ids there.
func newPKI(t *testing.T, cluster string, ids ...pki.Identity) string {
	return pkitest.New(t, cluster, ids...)
}

// serveSecure serves a block service with one drive over mutual TLS as
// node n1 of the CA in dir and returns its address.
func serveSecure(t *testing.T, dir string, opts func(*Service) []grpc.ServerOption) string {
	t.Helper()
	ddir, err := os.MkdirTemp(t.TempDir(), "drive-")
	if err != nil {
		t.Fatal(err)
	}
	d, err := drive.Open(ddir, drive.Options{ClusterID: "c-test", Node: "n1", Class: drive.ClassSSD, Sync: drive.SyncNever,
		AllocID: func() (drive.ID, error) { return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	svc, err := NewService(nil, d)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts(svc)...)
	svc.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

func call(t *testing.T, addr string, opts ...DialOption) error {
	t.Helper()
	c, err := Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.Usage(ctx)
	return err
}

// Over mutual TLS the block service serves nodes and clients of its CA
// and nobody else.
func TestBlockServicePeers(t *testing.T) {
	n1 := pki.Identity{Kind: pki.KindNode, Name: "n1"}
	n2 := pki.Identity{Kind: pki.KindNode, Name: "n2"}
	mnt := pki.Identity{Kind: pki.KindClient, Name: "mnt"}
	root := pki.Identity{Kind: pki.KindAdmin, Name: "root"}
	dir := newPKI(t, "c1", n1, n2, mnt, root)
	other := newPKI(t, "c2", mnt)
	src, err := pki.NewSource(dir, n1)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveSecure(t, dir, func(s *Service) []grpc.ServerOption { s.RequireIdentity(); return SecureServerOptions(src) })
	as := func(d string, id pki.Identity) DialOption {
		s, err := pki.NewSource(d, id)
		if err != nil {
			t.Fatal(err)
		}
		return WithTLS(s.ClientTLS(""))
	}
	for _, id := range []pki.Identity{n2, mnt} {
		if err := call(t, addr, as(dir, id)); err != nil {
			t.Errorf("%s refused: %v", id, err)
		}
	}
	if err := call(t, addr, as(dir, root)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("an admin identity: %v", err)
	}
	for what, opt := range map[string]DialOption{
		"plain text":     nil,
		"no certificate": WithTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}),
		"another CA":     trusting(t, as(other, mnt), dir),
	} {
		var opts []DialOption
		if opt != nil {
			opts = append(opts, opt)
		}
		if err := call(t, addr, opts...); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v (want a failed handshake)", what, err)
		}
	}
}

// trusting returns the dial option of another CA's identity made to trust
// the server of the CA in dir, so that only the server can refuse.
func trusting(t *testing.T, o DialOption, dir string) DialOption {
	var dc dialConfig
	o(&dc)
	trust, err := pki.NewTrust(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := dc.tls.Clone()
	cfg.VerifyConnection = trust.ClientTLS("").VerifyConnection
	return WithTLS(cfg)
}

// A service that requires identities refuses an Adopt that carries none,
// even when served without the interceptors.
func TestAdoptNeedsIdentity(t *testing.T) {
	dir := newPKI(t, "c1")
	addr := serveSecure(t, dir, func(s *Service) []grpc.ServerOption { s.RequireIdentity(); return ServerOptions() })
	c, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id := drive.NewBlockID()
	err = c.Adopt(context.Background(), 1, drive.BlockHeader{ID: id, Owner: 1}, 0, ".tmp-"+id.String()+"-1")
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("adopt without an identity: %v", err)
	}
}
