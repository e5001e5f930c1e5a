package harness

import (
	"context"
	"crypto/tls"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/local"
	"github.com/weftfs/weft/internal/pki"
)

// A test reaches the cluster as its parts do: with the certificates
// `weft local up` made in DIR/pki (none for an Insecure cluster).

// TLS returns the TLS configuration of a client presenting identity id of
// the cluster's PKI directory (nil for an insecure cluster).
func (c *Cluster) TLS(id pki.Identity) *tls.Config {
	c.tb.Helper()
	if c.PKI == "" {
		return nil
	}
	src, err := pki.NewSource(c.PKI, id)
	if err != nil {
		c.tb.Fatalf("harness: %v", err)
	}
	return src.ClientTLS("")
}

// AdminOptions are the admin client options of the cluster's
// administrator (local.AdminIdentity).
func (c *Cluster) AdminOptions() []admin.ClientOption {
	c.tb.Helper()
	if c.PKI == "" {
		return nil
	}
	return []admin.ClientOption{admin.WithTLS(c.TLS(local.AdminIdentity))}
}

// DialBlocks connects to the block service at addr as node n1 (a
// node's identity, as another node does).
func (c *Cluster) DialBlocks(addr string) (*block.Client, error) {
	c.tb.Helper()
	if c.PKI == "" {
		return block.Dial(addr)
	}
	return block.Dial(addr, block.WithTLS(c.TLS(pki.Identity{Kind: pki.KindNode, Name: "n1"})))
}

// DriveBlocks connects to the block service of the node serving drive d,
// as DialBlocks does; the connection is closed at cleanup.
func (c *Cluster) DriveBlocks(d cluster.Drive) *block.Client {
	c.tb.Helper()
	nodes, err := c.Admin.Nodes(context.Background())
	if err != nil {
		c.tb.Fatal(err)
	}
	for _, n := range nodes {
		if n.Name != d.Node {
			continue
		}
		bc, err := c.DialBlocks(n.GRPCAddr)
		if err != nil {
			c.tb.Fatal(err)
		}
		c.tb.Cleanup(func() { bc.Close() })
		return bc
	}
	c.tb.Fatalf("harness: drive %s: no node %s", d.ID, d.Node)
	return nil
}

// Etcd returns a client of the control plane acting as node n1 (every
// right), closed at cleanup.
func (c *Cluster) Etcd() *clientv3.Client {
	c.tb.Helper()
	return c.etcdAs(pki.Identity{Kind: pki.KindNode, Name: "n1"})
}

// etcdAs returns a client of the control plane as identity id.
func (c *Cluster) etcdAs(id pki.Identity) *clientv3.Client {
	c.tb.Helper()
	info, err := c.Admin.Node(context.Background())
	if err != nil {
		c.tb.Fatal(err)
	}
	var opts []etcdx.ClientOption
	if c.PKI != "" {
		opts = append(opts, etcdx.WithTLS(c.TLS(id)))
	}
	cli, err := etcdx.NewClient(context.Background(), info.EtcdEndpoints, opts...)
	if err != nil {
		c.tb.Fatalf("harness: etcd as %s: %v", id, err)
	}
	c.tb.Cleanup(func() { cli.Close() })
	return cli
}
