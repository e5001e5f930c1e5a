package vip

import (
	"context"
	"net/netip"

	"github.com/weftfs/weft/internal/runner"
)

// linkWorker is the Manager's "vip-link" worker: every CheckEvery it runs
// Config.LinkCheck. On a failure the node withdraws as a candidate, stops
// serving every address and deletes its keys, so that the others take
// them at once; it takes none until a check passes again.
type linkWorker Manager

var _ runner.Worker = (*linkWorker)(nil)

// Step runs one check.
func (w *linkWorker) Step(ctx context.Context) (runner.State, error) {
	m := (*Manager)(w)
	cctx, cancel := context.WithTimeout(ctx, m.check)
	err := m.cfg.LinkCheck(cctx)
	cancel()
	if ctx.Err() != nil {
		return runner.Done, nil
	}
	m.mu.Lock()
	was := m.linkDown
	m.linkDown = err != nil
	if err != nil && !was {
		m.stats.linkFailures++
	}
	l := m.lease
	m.mu.Unlock()
	switch {
	case err != nil && !was:
		// Stop serving first: etcd may be behind the same failed link.
		m.log.Warn("public link check failed: giving the service addresses up", "err", err)
		m.op.Lock()
		m.mu.Lock()
		type gone struct {
			a     netip.Addr
			epoch int64
		}
		var all []gone
		for _, a := range m.heldAddrs() {
			all = append(all, gone{a, m.held[a].epoch})
		}
		m.mu.Unlock()
		for _, g := range all {
			m.releaseLocal(g.a, "link down")
		}
		m.op.Unlock()
		// Then withdraw, so that the others take the addresses now rather
		// than when the lease expires (if etcd answers).
		dctx, cancel := context.WithTimeout(ctx, m.ttl)
		defer cancel()
		if _, derr := m.cli.Delete(dctx, nodeKey(m.prefix, m.cfg.Node)); derr != nil {
			m.log.Warn("cannot withdraw as a candidate", "err", derr)
		}
		for _, g := range all {
			if derr := m.dropKey(dctx, g.a, g.epoch); derr != nil {
				m.log.Warn("cannot delete the key of a released address", "addr", g.a, "err", derr)
			}
		}
	case err == nil && was:
		m.log.Info("public link check passes again: a candidate for the service addresses")
		if l != nil {
			if perr := m.putCandidate(ctx, l); perr != nil {
				m.log.Warn("cannot register as a candidate again", "err", perr)
			}
		}
		m.wakeElect()
	}
	return runner.Idle, nil
}
