package job

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// LeaseSource gives the engine the lease that says its node is alive. A
// node's engine uses the node's own liveness lease (the one its live key
// in the control plane is bound to, package cluster), so that "alive" has
// one definition: a node whose lease expired is down for the cluster and
// for the job engine at the same moment.
type LeaseSource interface {
	// Current returns the node's current lease as an etcd session, waiting
	// until there is a live one or ctx ends. The engine binds its task
	// claims, status and candidacy to it, and stops using it when its
	// Done channel closes (the lease expired or was revoked).
	Current(ctx context.Context) (*concurrency.Session, error)
	// Release tells the source the engine no longer uses sess. stopping
	// says the engine is stopping (its claims should go at once where
	// the source can do that); otherwise sess was lost.
	Release(sess *concurrency.Session, stopping bool)
}

// ownLeases is the LeaseSource of an engine without a node (tests,
// tools): a lease of its own per life, revoked when the engine stops so
// that its claims and candidacy go at once.
type ownLeases struct {
	cli  *clientv3.Client
	ttl  time.Duration
	node string
}

func (o *ownLeases) Current(ctx context.Context) (*concurrency.Session, error) {
	ttl := int((o.ttl + time.Second - 1) / time.Second)
	return concurrency.NewSession(o.cli, concurrency.WithTTL(ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
}

func (o *ownLeases) Release(sess *concurrency.Session, stopping bool) {
	if stopping {
		sess.Close() // revokes
		return
	}
	sess.Orphan()
}
