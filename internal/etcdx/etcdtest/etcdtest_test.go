package etcdtest

import (
	"context"
	"crypto/tls"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/pki"
)

func TestClusterServes(t *testing.T) {
	for _, n := range []int{1, 3} {
		c := NewCluster(t, n)
		cli := c.Client(t)
		if _, err := cli.Put(context.Background(), "k", "v"); err != nil {
			t.Fatalf("%d members: put: %v", n, err)
		}
		r, err := cli.Get(context.Background(), "k")
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
			t.Fatalf("%d members: get = %v, %v", n, r, err)
		}
	}
}

// A TLS cluster serves clients with a certificate of its CA, refuses
// clients without one, and admits only its members on the peer URLs.
func TestTLSClusterServes(t *testing.T) {
	c := NewTLSCluster(t, 3)
	cli := c.Client(t)
	if _, err := cli.Put(context.Background(), "k", "v"); err != nil {
		t.Fatalf("put as a member's node identity: %v", err)
	}
	mount := pki.Identity{Kind: pki.KindClient, Name: "mnt"}
	if _, err := c.ClientAs(t, mount).Get(context.Background(), "k"); err != nil {
		t.Fatalf("get as a client identity (authentication off): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	noCert := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	if cli, err := etcdx.NewClient(ctx, c.Endpoints, etcdx.WithTLS(noCert)); err == nil {
		cli.Close()
		t.Fatal("a client without a certificate was served")
	}
	// The peer URL: a client identity's certificate is refused in the
	// handshake, a member's is taken.
	peer := func(id pki.Identity) error {
		src, err := pki.NewSource(c.PKI, id)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(c.Members[0].PeerURL())
		conn, err := tls.Dial("tcp", u.Host, src.ClientTLS("127.0.0.1"))
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, err = conn.Read(make([]byte, 1)) // TLS 1.3: a refusal arrives after the handshake
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil
		}
		return err
	}
	if err := peer(mount); err == nil {
		t.Fatal("a client identity got onto a member's peer URL")
	}
	if err := peer(pki.Identity{Kind: pki.KindNode, Name: "m2"}); err != nil {
		t.Fatalf("a member was refused on another's peer URL: %v", err)
	}
}
