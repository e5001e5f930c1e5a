package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/kvcache"
	"github.com/weftfs/weft/internal/meta"
)

// Namespace opens the cluster's namespace, kept in the same etcd under
// MetaPrefix, formatting it (root directory in pool "default") if this is a
// new cluster. embedded selects the transaction limits of weft's embedded
// etcd members (1024 operations, 8 MiB); otherwise etcd's defaults apply.
// Concurrent first calls are safe: one formats, the others find it formatted.
//
// sessionReads gives read-only operations session consistency instead of
// linearizability (see etcdkv.Config.SessionReads): a mount sees its own
// changes at once and others' within the members' apply lag, and its
// lookups and getattrs cost half as much.
func (s *Store) Namespace(ctx context.Context, embedded, sessionReads bool) (*meta.Meta, error) {
	store, err := s.metaStore(embedded, sessionReads)
	if err != nil {
		return nil, err
	}
	return openNamespace(ctx, store)
}

// CachedNamespace is Namespace for a mount: session reads, and a local
// cache of the namespace (package kvcache) kept coherent by an etcd watch
// on MetaPrefix, so that lookups and getattrs are answered locally and
// creates and unlinks commit without reading first. Another client's
// change is served once the watch has delivered it (normally within a
// millisecond or two); the cache stops serving when the watch has been
// silent for a second. stop ends the watch; call it after the last use of
// the Meta.
func (s *Store) CachedNamespace(ctx context.Context, embedded bool, log *slog.Logger) (m *meta.Meta, stop func(), err error) {
	store, err := s.metaStore(embedded, true)
	if err != nil {
		return nil, nil, err
	}
	preload, presume := meta.CacheRanges()
	c, err := kvcache.New(kvcache.Config{Inner: store, Preload: preload, Presume: presume, Log: log})
	if err != nil {
		return nil, nil, err
	}
	if m, err = openNamespace(ctx, c); err != nil {
		c.Close()
		return nil, nil, err
	}
	return m, func() { c.Close() }, nil
}

func (s *Store) metaStore(embedded, sessionReads bool) (*etcdkv.Store, error) {
	limits := etcdkv.DefaultLimits
	if embedded {
		limits = etcdkv.EmbeddedLimits
	}
	return etcdkv.New(etcdkv.Config{Client: s.cli, Prefix: MetaPrefix, Options: kv.Options{Limits: limits}, SessionReads: sessionReads})
}

func openNamespace(ctx context.Context, store kv.Store) (*meta.Meta, error) {
	err := meta.Format(ctx, store, meta.FormatOptions{Pool: "default", Mode: 0o755})
	if err != nil && !errors.Is(err, meta.ErrExists) {
		return nil, fmt.Errorf("cluster: format the namespace: %w", err)
	}
	return meta.Open(ctx, meta.Config{Store: store})
}
