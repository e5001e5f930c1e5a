package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/namespace"
	"github.com/weftfs/weft/internal/pki"
)

// openNamespace connects to the cluster's metadata store (etcd) the way
// weft mount does, as a client identity: the client certificate of the
// --pki directory (--as NAME if it holds several; weft local up makes
// client:mount), which etcd lets read and write the namespace — an
// administrator's certificate may only read it. It asks the admin API
// for the etcd endpoints and checks that etcd holds that cluster. The
// Meta has no cache and no session. done releases the etcd client.
func (g *globals) openNamespace(ctx context.Context) (m *meta.Meta, done func(), err error) {
	addr, err := admin.Discover(g.admin)
	if err != nil {
		return nil, nil, err
	}
	var tlsCfg *tls.Config
	var adminOpts []admin.ClientOption
	var etcdOpts []etcdx.ClientOption
	if !g.insecure {
		dir, from := g.pkiDir()
		if dir == "" {
			return nil, nil, usageError{fmt.Errorf("no certificates: pass --pki DIR (or $%s) with the cluster's ca.crt and a client certificate (weft cert issue --client NAME), "+
				"or --insecure for a cluster run without TLS", envPKI)}
		}
		id, err := pki.FindIdentity(dir, pki.KindClient, g.as)
		if err != nil {
			return nil, nil, fmt.Errorf("%s (from %s): this command writes the namespace as a client, as a mount does, and needs a client certificate there "+
				"(weft cert issue --client NAME --out %s; --as NAME picks one of several): %w", dir, from, dir, err)
		}
		src, err := pki.NewSource(dir, id)
		if err != nil {
			return nil, nil, err
		}
		tlsCfg = src.ClientTLS("")
		adminOpts = append(adminOpts, admin.WithTLS(tlsCfg))
		etcdOpts = append(etcdOpts, etcdx.WithTLS(tlsCfg))
	}
	info, err := admin.NewClient(addr, adminOpts...).Node(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("ask the cluster how to reach its metadata store: %w", err)
	}
	cli, err := etcdx.NewClient(ctx, info.EtcdEndpoints, etcdOpts...)
	if errors.Is(err, etcdx.ErrDenied) {
		return nil, nil, fmt.Errorf("the control plane does not admit this client identity: register it where an administrator's credentials are (weft cert register --client NAME): %w", err)
	}
	if err != nil {
		return nil, nil, pki.Explain(err)
	}
	store, err := cluster.Open(ctx, cli)
	if err == nil && store.ClusterID() != info.ClusterID {
		err = fmt.Errorf("etcd at %v holds cluster %s, but node %s says %s", info.EtcdEndpoints, store.ClusterID(), info.Name, info.ClusterID)
	}
	if err == nil {
		m, err = namespace.Open(ctx, cli, info.EmbeddedEtcd, false)
	}
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	return m, func() { cli.Close() }, nil
}
