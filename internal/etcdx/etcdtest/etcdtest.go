// Package etcdtest starts throw-away embedded etcd members for tests and
// benchmarks. It is not for production use.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/etcdx"
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
	type addr struct{ name, client, peer string }
	addrs := make([]addr, n)
	var initial []string
	for i := range addrs {
		addrs[i] = addr{
			name:   fmt.Sprintf("m%d", i+1),
			client: fmt.Sprintf("http://127.0.0.1:%d", FreePort(tb)),
			peer:   fmt.Sprintf("http://127.0.0.1:%d", FreePort(tb)),
		}
		initial = append(initial, addrs[i].name+"="+addrs[i].peer)
	}
	c := &Cluster{Members: make([]*etcdx.Member, n)}
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
			}, nil)
		}()
		c.Endpoints = append(c.Endpoints, a.client)
	}
	wg.Wait()
	tb.Cleanup(func() {
		for _, m := range c.Members {
			m.Close()
		}
	})
	for _, err := range errs {
		if err != nil {
			tb.Fatalf("etcdtest: %v", err)
		}
	}
	return c
}

// Client returns a new client to all members, closed by tb.Cleanup.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := etcdx.NewClient(context.Background(), c.Endpoints)
	if err != nil {
		tb.Fatalf("etcdtest: %v", err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}
