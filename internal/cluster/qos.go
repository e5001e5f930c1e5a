package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/runner"
)

// The QoS configuration and the nodes' demand (weft qos).
//
// Keys (see schema.go):
//
//	/weft/qos/config         the cluster's qos.Config (its own "v",
//	                         checked by qos.Decode; Version counts the
//	                         changes); absent until the first change,
//	                         which reads as disabled with no limits
//	/weft/qos/demand/<node>  qos.NodeDemand: the node's pools and its
//	                         demand on each pool and class over the
//	                         last second, rewritten every second while
//	                         QoS is enabled, under the node's lease
//	                         (gone when the node is)
//
// Every node follows the configuration (QoSFollower) and, once a second,
// publishes its demand, reads the others' and takes its share of each
// limit (qos.Shares), so that the nodes together hold the cluster-wide
// limit.
const (
	keyQoSConfig    = Prefix + "qos/config"
	prefixQoSDemand = Prefix + "qos/demand/"
)

// QoSKey is the key a node watches to follow the QoS configuration.
const QoSKey = keyQoSConfig

// QoS returns the cluster's QoS configuration and the revision of its key
// (0 and a disabled configuration with no limits if it was never set).
// Errors: the control plane's; qos.ErrNewerFormat, qos.ErrInvalid for a
// record this binary cannot read.
func (s *Store) QoS(ctx context.Context) (qos.Config, int64, error) {
	r, err := s.cli.Get(ctx, keyQoSConfig)
	if err != nil {
		return qos.Config{}, 0, fmt.Errorf("cluster: get %s: %w", keyQoSConfig, err)
	}
	if len(r.Kvs) == 0 {
		return qos.Config{}, 0, nil
	}
	c, err := qos.Decode(r.Kvs[0].Value)
	if err != nil {
		return qos.Config{}, 0, fmt.Errorf("key %s: %w", keyQoSConfig, err)
	}
	return c, r.Kvs[0].ModRevision, nil
}

// UpdateQoS changes the QoS configuration with change (which gets the
// current one and returns the new one, or an error that UpdateQoS
// returns as it is) and stores it as the next version, recording when and
// by whom. It retries a few times when another change raced it, then
// fails with ErrConflict.
func (s *Store) UpdateQoS(ctx context.Context, by string, change func(qos.Config) (qos.Config, error)) (qos.Config, error) {
	for range 10 {
		cur, rev, err := s.QoS(ctx)
		if err != nil {
			return qos.Config{}, err
		}
		next, err := change(cur)
		if err != nil {
			return qos.Config{}, err
		}
		next.Version, next.Updated, next.By = cur.Version+1, time.Now().UTC().Truncate(time.Second), by
		t, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(keyQoSConfig), "=", rev)).
			Then(clientv3.OpPut(keyQoSConfig, string(qos.Encode(next)))).Commit()
		if err != nil {
			return qos.Config{}, fmt.Errorf("cluster: store QoS configuration version %d: %w", next.Version, err)
		}
		if t.Succeeded {
			next.V = qos.ConfigVersion
			return next, nil
		}
	}
	return qos.Config{}, fmt.Errorf("%w: the QoS configuration kept changing under this change: look at weft qos show, then try again", ErrConflict)
}

// PublishQoSDemand records the node's QoS demand under its lease.
func (ns *Session) PublishQoSDemand(ctx context.Context, d qos.NodeDemand) error {
	d.V, d.Node = qos.DemandVersion, ns.name
	if _, err := ns.store.cli.Put(ctx, prefixQoSDemand+ns.name, encode(d), clientv3.WithLease(ns.Lease())); err != nil {
		return fmt.Errorf("cluster: publish the QoS demand of node %s: %w", ns.name, err)
	}
	return nil
}

// QoSDemands returns the demand records of the nodes that are up, in node
// order. A record of a newer format is skipped (its node is counted by
// the others as having none).
func (s *Store) QoSDemands(ctx context.Context) ([]qos.NodeDemand, error) {
	var out []qos.NodeDemand
	err := s.scan(ctx, prefixQoSDemand, func(k string, v []byte) error {
		var d qos.NodeDemand
		if err := decode(k, v, &d); err != nil {
			if errors.Is(err, ErrNewerSchema) {
				return nil
			}
			return err
		}
		if d.V <= qos.DemandVersion {
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// QoSFollower keeps a copy of the QoS configuration, following QoSKey
// with an etcd watch, as PolicyFollower does the policy: its Step is a
// runner worker ("qos-follow") whose one blocking step watches until the
// stream breaks or ctx ends. A record this binary cannot read keeps the
// configuration it had, and is logged.
//
// Locking: the current configuration is an atomic pointer.
type QoSFollower struct {
	store *Store
	log   *slog.Logger
	cur   atomic.Pointer[qos.Config]
	rev   atomic.Int64
	// changed, if set, is called after each change is applied.
	changed func(qos.Config)
}

var _ runner.Worker = (*QoSFollower)(nil)

// NewQoSFollower returns a follower over s (disabled until Load), which
// calls changed (may be nil) after each configuration it applies.
func NewQoSFollower(s *Store, log *slog.Logger, changed func(qos.Config)) *QoSFollower {
	if log == nil {
		log = slog.Default()
	}
	f := &QoSFollower{store: s, log: log, changed: changed}
	f.cur.Store(&qos.Config{})
	return f
}

// Current returns the configuration last read.
func (f *QoSFollower) Current() qos.Config { return *f.cur.Load() }

// Load reads the configuration once. Errors are the control plane's; a
// record it cannot read is logged and skipped.
func (f *QoSFollower) Load(ctx context.Context) error {
	r, err := f.store.cli.Get(ctx, keyQoSConfig)
	if err != nil {
		return fmt.Errorf("cluster: read the QoS configuration %s: %w", keyQoSConfig, err)
	}
	if len(r.Kvs) == 0 {
		f.set(qos.Config{})
	} else {
		f.apply(r.Kvs[0].Value)
	}
	f.rev.Store(r.Header.Revision)
	return nil
}

func (f *QoSFollower) apply(b []byte) {
	c, err := qos.Decode(b)
	if err != nil {
		f.log.Warn("cannot read the QoS configuration: keeping the previous one", "kept_version", f.Current().Version, "err", err)
		return
	}
	if c.Version != f.Current().Version {
		f.log.Info("QoS configuration", "version", c.Version, "enabled", c.Enabled, "limits", c.Specs())
	}
	f.set(c)
}

func (f *QoSFollower) set(c qos.Config) {
	f.cur.Store(&c)
	if f.changed != nil {
		f.changed(c)
	}
}

// Step watches QoSKey from the revision last seen and applies each
// change; it returns when ctx ends (Done) or the stream breaks (an error,
// after which the runner backs off and the next step reloads first).
func (f *QoSFollower) Step(ctx context.Context) (runner.State, error) {
	if err := f.Load(ctx); err != nil {
		if ctx.Err() != nil {
			return runner.Done, nil
		}
		return runner.Idle, err
	}
	return followKey(ctx, f.store.cli, keyQoSConfig, "the QoS configuration", &f.rev, f.apply, func() { f.set(qos.Config{}) })
}
