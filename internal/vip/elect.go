package vip

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/runner"
)

// electWorker is the Manager's "vip-elect" worker: it watches the keys
// and takes free addresses. One Step reads every key, acts, then watches
// for a change (or a timer, or a wake-up) and acts again, until ctx ends
// or the watch breaks: then the runner backs off and the next Step reads
// afresh, so a change missed meanwhile is not lost.
//
// Taking is a create-if-absent transaction: an address held by another
// node (its key exists) is never taken, whatever this node believes.
// A node holding its share of the addresses (addresses / live
// candidates, rounded up) or more leaves a free one for preferDelay to
// the others, so that addresses spread over the candidates.
type electWorker Manager

var _ runner.Worker = (*electWorker)(nil)

// Step: see electWorker.
func (w *electWorker) Step(ctx context.Context) (runner.State, error) {
	m := (*Manager)(w)
	rev, next, err := m.evaluate(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return runner.Done, nil
		}
		return runner.Idle, err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := m.cli.Watch(wctx, m.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return runner.Done, nil
		case resp, ok := <-wch:
			t.Stop()
			if !ok || resp.Err() != nil {
				if ctx.Err() != nil {
					return runner.Done, nil
				}
				return runner.Idle, fmt.Errorf("vip: watching %s: %v", m.prefix, resp.Err())
			}
		case <-m.wake:
			t.Stop()
		case <-t.C:
		}
		if _, next, err = m.evaluate(ctx); err != nil {
			if ctx.Err() != nil {
				return runner.Done, nil
			}
			return runner.Idle, err
		}
	}
}

// preferDelay is how long a node holding its share leaves a free address
// to the others.
func (m *Manager) preferDelay() time.Duration { return m.ttl / 3 }

// view is what the keys say.
type view struct {
	rev        int64
	holders    map[netip.Addr]Holding
	unreadable map[netip.Addr]bool
	candidates map[string]bool
}

// read reads every key.
func (m *Manager) read(ctx context.Context) (view, error) {
	rctx, cancel := context.WithTimeout(ctx, m.ttl)
	defer cancel()
	rs, err := readRecords(rctx, m.cli, m.prefix)
	if err != nil {
		return view{}, fmt.Errorf("vip: read %s: %w", m.prefix, err)
	}
	v := view{rev: rs.rev, holders: map[netip.Addr]Holding{}, unreadable: map[netip.Addr]bool{}, candidates: map[string]bool{}}
	for _, r := range rs.addrs {
		if r.err != nil {
			m.mu.Lock()
			seen := m.unreadable[r.addr]
			m.unreadable[r.addr] = true
			m.mu.Unlock()
			if !seen {
				m.log.Warn("service address held by a record this binary cannot read: not taking it", "addr", r.addr, "err", r.err)
			}
			v.unreadable[r.addr] = true
			continue
		}
		v.holders[r.addr] = r.h
	}
	for _, c := range rs.candidates {
		v.candidates[c.Node] = true
	}
	return v, nil
}

// evaluate reads the keys and acts on them: it stops serving an address
// whose key is no longer this holding's, deletes the keys of this
// Manager's own dead leases, and takes free addresses. It returns the
// revision read and when to look again at the latest.
func (m *Manager) evaluate(ctx context.Context) (int64, time.Time, error) {
	now := time.Now()
	next := now.Add(m.ttl) // look again at least this often
	v, err := m.read(ctx)
	if err != nil {
		return 0, next, err
	}
	m.op.Lock()
	m.mu.Lock()
	l := m.lease
	down := m.linkDown
	mine := map[netip.Addr]held{}
	for a, h := range m.held {
		mine[a] = h
	}
	m.mu.Unlock()
	// Addresses whose key is gone or another's (deleted by hand, or
	// expired while this node thought its lease alive): stop serving.
	for a, h := range mine {
		if k, ok := v.holders[a]; !ok || k.Epoch != h.epoch {
			m.releaseLocal(a, "key lost")
			delete(mine, a)
		}
	}
	m.op.Unlock()
	// Keys of this incarnation that it does not serve — under a lease it
	// fenced, or left when deleting them failed after a release: delete
	// them, so that nobody waits for the lease to expire (or for ever).
	for a, k := range v.holders {
		if k.Incarnation != m.inc {
			continue
		}
		if h, ok := mine[a]; ok && l != nil && k.Lease == leaseHex(int64(l.id)) && k.Epoch == h.epoch {
			continue
		}
		if err := m.dropKey(ctx, a, k.Epoch); err != nil {
			m.log.Warn("cannot delete the key of a holding this node no longer serves", "addr", a, "err", err)
			continue
		}
		delete(v.holders, a)
	}
	if l == nil || down {
		return v.rev, next, nil
	}
	live := max(len(v.candidates), 1)
	if !v.candidates[m.cfg.Node] {
		live++
	}
	share := (len(m.addrs) + live - 1) / live
	count := len(mine)
	for _, a := range m.addrs {
		if _, ok := v.holders[a]; ok || v.unreadable[a] {
			m.mu.Lock()
			delete(m.freeSince, a)
			m.mu.Unlock()
			continue
		}
		m.mu.Lock()
		first, ok := m.freeSince[a]
		if !ok {
			first = now
			m.freeSince[a] = now
		}
		until := m.backoff[a]
		m.mu.Unlock()
		if now.Before(until) {
			next = earliest(next, until)
			continue
		}
		if count >= share && now.Sub(first) < m.preferDelay() {
			next = earliest(next, first.Add(m.preferDelay()))
			continue
		}
		took, err := m.take(ctx, a, l)
		if err != nil {
			m.log.Warn("cannot take service address", "addr", a, "err", err)
		}
		if took {
			count++
		}
	}
	if m.cfg.Rebalance > 0 {
		next = earliest(next, m.rebalance(ctx, v, count, share, now))
	}
	return v.rev, next, nil
}

// rebalance hands one address over if this node has held more than its
// share for Config.Rebalance while another candidate holds less than
// its share (see Config.Rebalance). It returns when to look again.
func (m *Manager) rebalance(ctx context.Context, v view, count, share int, now time.Time) time.Time {
	next := now.Add(m.ttl)
	counts := map[string]int{}
	for _, h := range v.holders {
		counts[h.Node]++
	}
	under := false
	for c := range v.candidates {
		if c != m.cfg.Node && counts[c] < share {
			under = true
		}
	}
	m.mu.Lock()
	if count <= share || !under {
		m.overSince = time.Time{}
		m.mu.Unlock()
		return next
	}
	if m.overSince.IsZero() {
		m.overSince = now
	}
	due := m.overSince.Add(m.cfg.Rebalance)
	if d := m.lastMove.Add(m.cfg.Rebalance); d.After(due) {
		due = d
	}
	if now.Before(due) {
		m.mu.Unlock()
		return due
	}
	var last netip.Addr
	var h held
	for a, x := range m.held {
		if !last.IsValid() || x.since.After(h.since) {
			last, h = a, x
		}
	}
	m.lastMove, m.overSince = now, time.Time{}
	m.backoff[last] = now.Add(2 * m.ttl) // leave it to the others
	m.mu.Unlock()
	if !last.IsValid() {
		return next
	}
	m.log.Info("handing a service address over: this node holds more than its share", "addr", last, "held", count, "share", share)
	m.op.Lock()
	m.releaseLocal(last, "rebalance")
	m.op.Unlock()
	if err := m.dropKey(ctx, last, h.epoch); err != nil {
		m.log.Warn("cannot delete the key of a handed-over address", "addr", last, "err", err)
	}
	return next
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// take takes a free address under l: the key (create-if-absent), the
// hook's Add, OnAcquire. It reports whether the node now serves a; false
// with no error when another node was first.
func (m *Manager) take(ctx context.Context, a netip.Addr, l *lease) (bool, error) {
	m.op.Lock()
	defer m.op.Unlock()
	m.mu.Lock()
	if m.lease != l || m.linkDown || m.closed {
		m.mu.Unlock()
		return false, nil
	}
	fence := l.fenceAt(m.margin)
	m.mu.Unlock()
	// Nothing of a take may outlast the lease's fencing time: the fence
	// waits for op.
	tctx, cancel := context.WithDeadline(ctx, fence)
	defer cancel()
	key := addrKey(m.prefix, a)
	since := time.Now()
	rec := Holder{V: RecordVersion, Node: m.cfg.Node, Incarnation: m.inc, Addr: a.String(), Since: since.UTC(), Lease: leaseHex(int64(l.id))}
	resp, err := m.cli.Txn(tctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, encode(rec), clientv3.WithLease(l.id))).
		Commit()
	if err != nil {
		return false, fmt.Errorf("vip: take %s: %w", a, err)
	}
	if !resp.Succeeded {
		return false, nil
	}
	epoch := resp.Header.Revision
	giveUp := func(why error) (bool, error) {
		hctx, cancel := context.WithTimeout(context.Background(), m.margin)
		_ = m.hook.Del(hctx, a)
		cancel()
		if err := m.dropKey(ctx, a, epoch); err != nil {
			m.log.Warn("cannot delete the key of a holding that failed", "addr", a, "err", err)
		}
		m.mu.Lock()
		m.backoff[a] = time.Now().Add(2 * m.ttl)
		m.mu.Unlock()
		return false, why
	}
	if err := failpoint.Eval("vip/after-take"); err != nil {
		return giveUp(err)
	}
	if err := m.hook.Add(tctx, a); err != nil {
		m.mu.Lock()
		m.stats.hookErrors++
		m.mu.Unlock()
		return giveUp(err)
	}
	if !time.Now().Before(fence) {
		return giveUp(fmt.Errorf("vip: take %s: the lease could not be renewed meanwhile", a))
	}
	if m.cfg.OnAcquire != nil {
		if err := m.cfg.OnAcquire(a, epoch); err != nil {
			return giveUp(fmt.Errorf("vip: serve %s: %w", a, err))
		}
	}
	m.mu.Lock()
	m.held[a] = held{epoch: epoch, since: since}
	m.stats.takeovers++
	delete(m.freeSince, a)
	m.mu.Unlock()
	m.log.Info("service address taken", "addr", a, "epoch", epoch)
	return true, nil
}

// Holding is an address's holder, as read from etcd.
type Holding struct {
	Addr string `json:"addr"`
	Node string `json:"node"`
	// Epoch is the holding's key's create revision.
	Epoch int64     `json:"epoch"`
	Since time.Time `json:"since"`
	// Lease is the holder's lease, hex.
	Lease       string `json:"lease"`
	Incarnation string `json:"incarnation"`
}

func holding(a netip.Addr, h Holder, createRev, leaseID int64) Holding {
	return Holding{Addr: a.String(), Node: h.Node, Epoch: createRev, Since: h.Since, Lease: leaseHex(leaseID), Incarnation: h.Incarnation}
}

// leaseHex is a lease id as records and status show it.
func leaseHex(id int64) string { return strconv.FormatInt(id, 16) }
