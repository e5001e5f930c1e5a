package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
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
	limits := etcdkv.DefaultLimits
	if embedded {
		limits = etcdkv.EmbeddedLimits
	}
	store, err := etcdkv.New(etcdkv.Config{Client: s.cli, Prefix: MetaPrefix, Options: kv.Options{Limits: limits}, SessionReads: sessionReads})
	if err != nil {
		return nil, err
	}
	err = meta.Format(ctx, store, meta.FormatOptions{Pool: "default", Mode: 0o755})
	if err != nil && !errors.Is(err, meta.ErrExists) {
		return nil, fmt.Errorf("cluster: format the namespace: %w", err)
	}
	return meta.Open(ctx, meta.Config{Store: store})
}
