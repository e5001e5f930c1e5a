// Package etcdtest starts throw-away embedded etcd members for tests and
// benchmarks. It is not for production use.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/pki"
	"github.com/weftfs/weft/internal/pki/pkitest"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("etcdtest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Cluster is a set of embedded members started together.
type Cluster struct {
	Members   []*etcdx.Member
	Endpoints []string
	// PKI is the directory of the cluster's CA and certificates
	// (NewTLSCluster), "" for a plain-http cluster.
	PKI string
}

// New starts a one-member cluster and returns a client to it; both are
// closed by tb.Cleanup.
func New(tb testing.TB) *clientv3.Client {
	tb.Helper()
	return NewCluster(tb, 1).Client(tb)
}

// NewCluster starts n members in temporary directories and waits until they
// have a quorum. They are stopped by tb.Cleanup.
func NewCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return newCluster(tb, n, "")
}

// NewTLSCluster is NewCluster with mutual TLS on the client and peer URLs:
// a new CA in a temporary directory (Cluster.PKI) issues every member a
// node certificate (node:m1, node:m2, …) for 127.0.0.1. etcd's
// authentication is off until a test enables it.
func NewTLSCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	return newCluster(tb, n, pkitest.New(tb, "etcdtest"))
}

func newCluster(tb testing.TB, n int, pkiDir string) *Cluster {
	tb.Helper()
	// FreePort's ports were free a moment ago; another process (parallel
	// test packages dial out from the same ephemeral range) may take one
	// before the member binds it. Then the members are stopped and tried
	// again on new ports.
	for attempt := 1; ; attempt++ {
		c, err := tryCluster(tb, n, pkiDir)
		if err == nil {
			tb.Cleanup(func() {
				for _, m := range c.Members {
					m.Close()
				}
			})
			return c
		}
		inUse := errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
		if !inUse || attempt == 5 {
			tb.Fatalf("etcdtest: %v", err)
		}
		tb.Logf("etcdtest: %v; again on other ports", err)
	}
}

// tryCluster starts n members on ports free a moment ago; on error it has
// stopped those it started.
func tryCluster(tb testing.TB, n int, pkiDir string) (*Cluster, error) {
	tb.Helper()
	scheme := "http"
	if pkiDir != "" {
		scheme = "https"
	}
	type addr struct{ name, client, peer string }
	addrs := make([]addr, n)
	var initial []string
	for i := range addrs {
		addrs[i] = addr{
			name:   fmt.Sprintf("m%d", i+1),
			client: fmt.Sprintf("%s://127.0.0.1:%d", scheme, FreePort(tb)),
			peer:   fmt.Sprintf("%s://127.0.0.1:%d", scheme, FreePort(tb)),
		}
		initial = append(initial, addrs[i].name+"="+addrs[i].peer)
	}
	c := &Cluster{Members: make([]*etcdx.Member, n), PKI: pkiDir}
	tlsOf := make([]*etcdx.MemberTLS, n)
	if pkiDir != "" {
		var cns []string
		for _, a := range addrs {
			cns = append(cns, "node:"+a.name)
		}
		for i, a := range addrs {
			id := pki.Identity{Kind: pki.KindNode, Name: a.name}
			if _, err := pki.IssueTo(pkiDir, pkiDir, id, pki.DefaultHosts(""), 0, time.Now()); err != nil {
				return nil, err
			}
			cert, key := pki.Paths(pkiDir, id)
			tlsOf[i] = &etcdx.MemberTLS{CertFile: cert, KeyFile: key, TrustedCAFile: pki.BundlePath(pkiDir), PeerCNs: cns}
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Members[i], errs[i] = etcdx.Start(context.Background(), etcdx.MemberConfig{
				Name:           a.name,
				Dir:            tb.TempDir(),
				ClientURL:      a.client,
				PeerURL:        a.peer,
				InitialCluster: strings.Join(initial, ","),
				ClusterToken:   "etcdtest",
				TLS:            tlsOf[i],
			}, nil)
		}()
		c.Endpoints = append(c.Endpoints, a.client)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, m := range c.Members {
			if m != nil {
				m.Close()
			}
		}
		return nil, err
	}
	return c, nil
}

// Client returns a new client to all members, closed by tb.Cleanup; of a
// TLS cluster, as the first member's node identity.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	if c.PKI != "" {
		return c.ClientAs(tb, pki.Identity{Kind: pki.KindNode, Name: "m1"})
	}
	cli, err := etcdx.NewClient(context.Background(), c.Endpoints)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// ClientAs returns a new client of a TLS cluster presenting identity id's
// certificate (issued now if the PKI directory lacks it), closed by
// tb.Cleanup. It fails the test if etcd refuses it; DialAs returns the
// error instead.
func (c *Cluster) ClientAs(tb testing.TB, id pki.Identity) *clientv3.Client {
	tb.Helper()
	cli, err := c.DialAs(tb, id)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	return cli
}

// DialAs is ClientAs returning etcdx.NewClient's error.
func (c *Cluster) DialAs(tb testing.TB, id pki.Identity) (*clientv3.Client, error) {
	tb.Helper()
	if c.PKI == "" {
		tb.Fatal("etcdtest: ClientAs needs a cluster of NewTLSCluster")
	}
	if cert, _ := pki.Paths(c.PKI, id); !fileExists(cert) {
		if _, err := pki.IssueTo(c.PKI, c.PKI, id, nil, 0, time.Now()); err != nil {
			tb.Fatalf("etcdtest: %v", err)
		}
	}
	src, err := pki.NewSource(c.PKI, id)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	cli, err := etcdx.NewClient(context.Background(), c.Endpoints, etcdx.WithTLS(src.ClientTLS("")))
	if err != nil {
		return nil, err
	}
	tb.Cleanup(func() { cli.Close() })
	return cli, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
