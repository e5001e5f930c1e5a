package vip

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/runner"
)

// leaseWorker is the Manager's "vip-lease" worker: it takes a lease,
// renews it, and fences the node when it cannot.
//
// Fencing needs no clock agreement. etcd's leader extends a lease to its
// own receive time of a renewal plus the TTL, and a new leader extends
// every lease by a whole TTL; so a lease whose renewal this node sent at
// time s cannot expire before s + TTL as this node's (monotonic) clock
// counts, however the other machines' clocks are set. The worker renews
// every (TTL - Margin)/3 from its last successful send, retries failed
// renewals every renewRetry, and at (last successful send) + TTL -
// Margin stops serving every address (OnRelease, then the hook) and drops
// the lease — before anyone else can have taken them. A later lease
// takes the addresses again with new keys, so with new epochs.
type leaseWorker Manager

var _ runner.Worker = (*leaseWorker)(nil)

// renewRetry is the wait between failed renewals.
const renewRetry = 100 * time.Millisecond

// Step takes a lease if there is none, then renews it until it is lost
// or ctx ends.
func (w *leaseWorker) Step(ctx context.Context) (runner.State, error) {
	m := (*Manager)(w)
	l, _ := m.current()
	if l == nil {
		var err error
		if l, err = m.grant(ctx); err != nil {
			if ctx.Err() != nil {
				return runner.Done, nil
			}
			return runner.Idle, err
		}
		m.wakeElect()
	}
	return m.keepAlive(ctx, l)
}

// grant takes a new lease and, unless the link is down, registers this
// node as a candidate under it.
func (m *Manager) grant(ctx context.Context) (*lease, error) {
	sent := time.Now()
	gctx, cancel := context.WithTimeout(ctx, m.ttl)
	defer cancel()
	resp, err := m.cli.Grant(gctx, int64(m.ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("vip: lease for node %s: %w", m.cfg.Node, err)
	}
	l := &lease{id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, sent: sent}
	m.mu.Lock()
	m.lease = l
	m.stats.lastRenew = sent
	down := m.linkDown
	m.mu.Unlock()
	if !down {
		if err := m.putCandidate(ctx, l); err != nil {
			m.log.Warn("cannot register as a candidate for the service addresses; the others share them as if this node were absent", "err", err)
		}
	}
	m.log.Info("lease taken for the service addresses", "lease", leaseHex(int64(l.id)), "ttl", l.ttl)
	return l, nil
}

// putCandidate writes this node's candidate key under l.
func (m *Manager) putCandidate(ctx context.Context, l *lease) error {
	cctx, cancel := context.WithDeadline(ctx, l.fenceAt(m.margin))
	defer cancel()
	rec := Candidate{V: RecordVersion, Node: m.cfg.Node, Incarnation: m.inc, Since: time.Now().UTC()}
	_, err := m.cli.Put(cctx, nodeKey(m.prefix, m.cfg.Node), encode(rec), clientv3.WithLease(l.id))
	return err
}

// keepAlive renews l until it is lost (fenced: Busy, to take a new one)
// or ctx ends (Done).
func (m *Manager) keepAlive(ctx context.Context, l *lease) (runner.State, error) {
	every := (l.ttl - m.margin) / 3
	failing := false
	for {
		m.mu.Lock()
		fence := l.fenceAt(m.margin)
		next := l.sent.Add(every)
		m.mu.Unlock()
		if failing {
			next = time.Now().Add(renewRetry)
		}
		if next.After(fence) {
			next = fence
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return runner.Done, nil
		case <-t.C:
		}
		if !time.Now().Before(fence) {
			m.fence(ctx, l, "its lease could not be renewed in time")
			return runner.Busy, nil
		}
		sent := time.Now()
		err := failpoint.Eval("vip/renew")
		if err == nil {
			kctx, cancel := context.WithDeadline(ctx, fence)
			_, err = m.cli.KeepAliveOnce(kctx, l.id)
			cancel()
		}
		switch {
		case err == nil:
			m.mu.Lock()
			if sent.After(l.sent) {
				l.sent = sent
				m.stats.lastRenew = sent
			}
			m.mu.Unlock()
			if failing {
				m.log.Info("lease renewed again", "lease", leaseHex(int64(l.id)))
			}
			failing = false
		case ctx.Err() != nil:
			return runner.Done, nil
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			m.fence(ctx, l, "its lease expired")
			return runner.Busy, nil
		default:
			if !failing {
				m.log.Warn("cannot renew the lease of the service addresses; fencing unless it is renewed",
					"fence_in", time.Until(fence).Round(time.Millisecond), "err", err)
			}
			failing = true
		}
	}
}

// fence stops serving every address held under l and drops l: see
// leaseWorker. The keys go with the lease (revoked here if etcd answers,
// else when it expires).
func (m *Manager) fence(ctx context.Context, l *lease, why string) {
	m.op.Lock()
	m.mu.Lock()
	if m.lease != l {
		m.mu.Unlock()
		m.op.Unlock()
		return
	}
	m.lease = nil
	addrs := m.heldAddrs()
	m.stats.fences++
	m.mu.Unlock()
	if len(addrs) > 0 {
		m.log.Warn("fencing: this node stops serving its service addresses because "+why, "addrs", addrs)
	}
	for _, a := range addrs {
		m.releaseLocal(a, "fenced")
	}
	m.op.Unlock()
	// The lease is dead to this node; if etcd still has it, end it now
	// so that the others need not wait for it to expire.
	rctx, cancel := context.WithTimeout(ctx, m.margin)
	_, _ = m.cli.Revoke(rctx, l.id)
	cancel()
	m.wakeElect()
}
