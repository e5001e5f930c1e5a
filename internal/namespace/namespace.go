package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/kvcache"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/runner"
)

// Open opens the cluster's namespace, kept in etcd (cli) under
// cluster.MetaPrefix, formatting it (root directory in pool "default") if this is a
// new cluster. embedded selects the transaction limits of weft's embedded
// etcd members (1024 operations, 8 MiB); otherwise etcd's defaults apply.
// Concurrent first calls are safe: one formats, the others find it formatted.
//
// sessionReads gives read-only operations session consistency instead of
// linearizability (see etcdkv.Config.SessionReads): a mount sees its own
// changes at once and others' within the members' apply lag, and its
// lookups and getattrs cost half as much.
func Open(ctx context.Context, cli *clientv3.Client, embedded, sessionReads bool) (*meta.Meta, error) {
	return OpenSession(ctx, cli, embedded, sessionReads, 0)
}

// OpenSession is Open for a client with a session (its etcd lease): the
// file locks it takes (meta.Meta.SetLock) are kept under that lease. A
// Meta of session 0 takes no locks.
func OpenSession(ctx context.Context, cli *clientv3.Client, embedded, sessionReads bool, session meta.SessionID) (*meta.Meta, error) {
	store, err := metaStore(cli, embedded, sessionReads)
	if err != nil {
		return nil, err
	}
	return open(ctx, store, meta.Config{Session: session, SessionAlive: SessionAlive(cli), Locks: Locks(cli)})
}

// CacheOptions configure OpenCached.
type CacheOptions struct {
	// Session is the mount's session (its etcd lease).
	Session meta.SessionID
	// WriteBack lets the mount acknowledge creates and unlinks in
	// directories it holds before they are committed (meta.Config).
	WriteBack bool
	Log       *slog.Logger
	// Runner runs the cache's and the write-back's workers (see
	// kvcache.Config and meta.Config); nil: runners of their own.
	Runner *runner.Runner
}

// SessionAlive returns meta's check of whether a session (an etcd lease
// id) still exists: directory delegations of a client whose lease expired
// are taken back at once.
func SessionAlive(cli *clientv3.Client) func(ctx context.Context, session meta.SessionID) (bool, error) {
	return func(ctx context.Context, session meta.SessionID) (bool, error) {
		resp, err := cli.TimeToLive(ctx, clientv3.LeaseID(session))
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return resp.TTL > 0, nil
	}
}

// OpenCached is Open for a mount: session reads, and a local
// cache of the namespace (package kvcache) kept coherent by an etcd watch
// on cluster.MetaPrefix, so that lookups and getattrs are answered locally and
// creates and unlinks commit without reading first. Another client's
// change is served once the watch has delivered it (normally within a
// millisecond or two); the cache stops serving when the watch has been
// silent for a second. stop ends the watch (and the cache's workers); call
// it after the last use of the Meta, and before stopping o.Runner.
func OpenCached(ctx context.Context, cli *clientv3.Client, embedded bool, o CacheOptions) (m *meta.Meta, stop func(), err error) {
	store, err := metaStore(cli, embedded, true)
	if err != nil {
		return nil, nil, err
	}
	preload, presume := meta.CacheRanges()
	c, err := kvcache.New(kvcache.Config{Inner: store, Preload: preload, Presume: presume, Log: o.Log, Runner: o.Runner})
	if err != nil {
		return nil, nil, err
	}
	cfg := meta.Config{Session: o.Session, WriteBack: o.WriteBack, SessionAlive: SessionAlive(cli), Log: o.Log, Runner: o.Runner,
		Locks: Locks(cli)}
	if m, err = open(ctx, c, cfg); err != nil {
		c.Close()
		return nil, nil, err
	}
	return m, func() { c.Close() }, nil
}

func metaStore(cli *clientv3.Client, embedded, sessionReads bool) (*etcdkv.Store, error) {
	limits := etcdkv.DefaultLimits
	if embedded {
		limits = etcdkv.EmbeddedLimits
	}
	return etcdkv.New(etcdkv.Config{Client: cli, Prefix: cluster.MetaPrefix, Options: kv.Options{Limits: limits}, SessionReads: sessionReads})
}

func open(ctx context.Context, store kv.Store, cfg meta.Config) (*meta.Meta, error) {
	err := meta.Format(ctx, store, meta.FormatOptions{Pool: "default", Mode: 0o755})
	if err != nil && !errors.Is(err, meta.ErrExists) {
		return nil, fmt.Errorf("namespace: format the namespace: %w", err)
	}
	cfg.Store = store
	return meta.Open(ctx, cfg)
}
