package vip

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/runner"
)

// Errors of the package.
var (
	// ErrConfig: a Config is incomplete or out of range.
	ErrConfig = errors.New("vip: bad configuration")
	// ErrHook: the hook command failed.
	ErrHook = errors.New("vip: address hook failed")
	// ErrRecord: a record under KeyPrefix cannot be read.
	ErrRecord = errors.New("vip: unreadable record")
	// ErrStarted: Start was called twice, or after Close.
	ErrStarted = errors.New("vip: manager already started")
)

// Defaults of Config.
const (
	// DefaultTTL is the lease's time to live: a holder that dies is
	// replaced within about this long (and one etcd election timeout if
	// it led etcd), well within 10 s.
	DefaultTTL = 3 * time.Second
	// MinTTL is the shortest TTL accepted (etcd grants at least its
	// election timeout × 1.5, rounded up to seconds, whatever is asked).
	MinTTL = time.Second
)

// Config configures a Manager.
type Config struct {
	// Client reaches etcd. Required.
	Client *clientv3.Client
	// Node is this node's name. Required.
	Node string
	// Addrs are the service addresses, IPv4 or IPv6 (netip text form).
	// Every node running a Manager on them is a candidate for each.
	Addrs []string
	// TTL is the lease's time to live, whole seconds (rounded up). Zero
	// means DefaultTTL.
	TTL time.Duration
	// Margin is how long before its lease could expire a holder that
	// could not renew it fences itself: at (last successful renewal's
	// send time) + TTL - Margin. It must cover OnRelease and the hook's
	// Del. Zero means TTL/4.
	Margin time.Duration
	// Hook moves addresses on this machine. Nil means LoopbackHook().
	Hook Hook
	// LinkCheck reports whether this node's public link works; an error
	// gives every address up and stops taking any until it passes again.
	// Nil: the link is always up.
	LinkCheck func(ctx context.Context) error
	// CheckEvery is how often LinkCheck runs (each run is bounded by it).
	// Zero means TTL/3.
	CheckEvery time.Duration
	// OnAcquire starts serving addr: it is called after the key is taken
	// and Hook.Add succeeded, while the lease is valid. epoch is the
	// holding's epoch (higher than any earlier holding's of any address,
	// by any node): derive a write verifier from it. An error gives the
	// address up (it is not served) and the node leaves it to others for
	// 2 TTLs. It must return quickly (well within Margin).
	OnAcquire func(addr netip.Addr, epoch int64) error
	// OnRelease stops serving addr (closes its listeners and
	// connections) before it returns: a fence calls it before the lease
	// could have expired, so that no two nodes ever serve one address.
	// It must return quickly (well within Margin). Neither callback may
	// call Close (it waits for them).
	OnRelease func(addr netip.Addr)
	// Rebalance, if positive, lets a node that has held more than its
	// share (addresses / live candidates, rounded up) for this long,
	// while another candidate holds less than its share, hand one
	// address over (the one it took last): a planned move, which the
	// clients see as a clean failover of milliseconds. At most one move
	// per Rebalance. Zero: an address is never moved away from a node
	// serving it (a node that comes back gets addresses only as they
	// fall free).
	Rebalance time.Duration
	// Runner runs the Manager's workers ("vip-lease", "vip-elect",
	// "vip-link"). Nil: a runner of its own, stopped by Close.
	Runner *runner.Runner
	// Log receives state changes. Nil means slog.Default().
	Log *slog.Logger
	// Prefix is where the keys live. Empty means KeyPrefix (tests give
	// another to run apart).
	Prefix string
}

// Manager holds service addresses for this node: see the package comment.
// Its methods are safe for concurrent use.
//
// Locking: op serialises the changes of what is served (taking an
// address, releasing one, fencing), so a fence never runs between a take
// and its OnAcquire; mu guards the fields below it and is never held
// across a call to etcd, the hook or a callback. op is taken before mu.
type Manager struct {
	cfg    Config
	cli    *clientv3.Client
	addrs  []netip.Addr // in this node's preference order
	hook   Hook
	log    *slog.Logger
	inc    string
	prefix string
	ttl    time.Duration // asked for; lease.ttl is what etcd granted
	margin time.Duration
	check  time.Duration

	run     *runner.Runner
	own     bool
	handles []*runner.Handle
	wake    chan struct{} // wakes the elect worker

	op sync.Mutex

	mu        sync.Mutex
	started   bool
	closed    bool
	lease     *lease // nil while none
	held      map[netip.Addr]held
	linkDown  bool
	freeSince map[netip.Addr]time.Time
	backoff   map[netip.Addr]time.Time
	overSince time.Time // since when this node holds more than its share (Rebalance)
	lastMove  time.Time // when it last handed an address over
	// unreadable are addresses whose record this binary could not read,
	// logged once each.
	unreadable map[netip.Addr]bool
	stats      stats
}

// held is one address this node serves.
type held struct {
	epoch int64
	since time.Time
}

// lease is one etcd lease of the Manager.
type lease struct {
	id  clientv3.LeaseID
	ttl time.Duration // granted
	// sent is when the last successful grant or renewal of it was sent:
	// etcd cannot expire it before sent + ttl.
	sent time.Time
}

// stats are the Manager's counters.
type stats struct {
	takeovers, fences, linkFailures, hookErrors uint64
	releases                                    map[string]uint64 // by reason
	lastRenew                                   time.Time
}

// New checks cfg and returns a Manager; Start starts it.
func New(cfg Config) (*Manager, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: no etcd client", ErrConfig)
	}
	if cfg.Node == "" {
		return nil, fmt.Errorf("%w: no node name", ErrConfig)
	}
	if len(cfg.Addrs) == 0 {
		return nil, fmt.Errorf("%w: no service address: give at least one", ErrConfig)
	}
	m := &Manager{cfg: cfg, cli: cfg.Client, hook: cfg.Hook, log: cfg.Log, prefix: cfg.Prefix, ttl: cfg.TTL,
		margin: cfg.Margin, check: cfg.CheckEvery, wake: make(chan struct{}, 1),
		held: map[netip.Addr]held{}, freeSince: map[netip.Addr]time.Time{}, backoff: map[netip.Addr]time.Time{}, unreadable: map[netip.Addr]bool{},
		stats: stats{releases: map[string]uint64{}}}
	seen := map[netip.Addr]bool{}
	for _, s := range cfg.Addrs {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			return nil, fmt.Errorf("%w: service address %q: want an IPv4 or IPv6 address such as 10.0.0.50 or 127.0.0.50", ErrConfig, s)
		}
		a = a.Unmap()
		if seen[a] {
			return nil, fmt.Errorf("%w: service address %s given twice", ErrConfig, a)
		}
		seen[a] = true
		m.addrs = append(m.addrs, a)
	}
	if m.ttl == 0 {
		m.ttl = DefaultTTL
	}
	if m.ttl < MinTTL {
		return nil, fmt.Errorf("%w: lease TTL %s is below %s", ErrConfig, m.ttl, MinTTL)
	}
	m.ttl = (m.ttl + time.Second - 1).Truncate(time.Second)
	if m.margin == 0 {
		m.margin = m.ttl / 4
	}
	if m.margin <= 0 || m.margin >= m.ttl/2 {
		return nil, fmt.Errorf("%w: fencing margin %s: want more than 0 and less than half the TTL (%s)", ErrConfig, m.margin, m.ttl)
	}
	if m.check == 0 {
		m.check = m.ttl / 3
	}
	if m.check < 0 || cfg.Rebalance < 0 {
		return nil, fmt.Errorf("%w: link check interval %s, rebalance period %s: want 0 (the default) or more", ErrConfig, m.check, cfg.Rebalance)
	}
	if m.hook == nil {
		m.hook = LoopbackHook()
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.log = m.log.With("node", cfg.Node)
	if m.prefix == "" {
		m.prefix = KeyPrefix
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	m.inc = hex.EncodeToString(b[:])
	// Each node prefers the addresses in its own order, so that nodes
	// that find several free at once mostly take different ones.
	h := fnv.New32a()
	h.Write([]byte(cfg.Node))
	slices.SortFunc(m.addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	k := int(h.Sum32() % uint32(len(m.addrs)))
	m.addrs = append(m.addrs[k:], m.addrs[:k]...)
	return m, nil
}

// Start takes the address off this machine (what a crashed earlier
// process may have left), then starts the workers: they take a lease,
// register this node as a candidate and take free addresses. It returns
// at once; addresses are taken in the background.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started || m.closed {
		m.mu.Unlock()
		return ErrStarted
	}
	m.started = true
	m.mu.Unlock()
	for _, a := range m.addrs {
		hctx, cancel := context.WithTimeout(ctx, m.ttl)
		if err := m.hook.Del(hctx, a); err != nil {
			m.log.Debug("service address not on this machine at start", "addr", a, "err", err)
		}
		cancel()
	}
	m.run = m.cfg.Runner
	if m.run == nil {
		m.run, m.own = runner.New(runner.Config{Log: m.log}), true
	}
	retry := runner.Options{MinBackoff: 200 * time.Millisecond, MaxBackoff: m.ttl / 2}
	for _, w := range []struct {
		name string
		w    runner.Worker
		o    runner.Options
	}{
		{"vip-lease", (*leaseWorker)(m), retry},
		{"vip-elect", (*electWorker)(m), retry},
		{"vip-link", (*linkWorker)(m), runner.Options{Idle: m.check, MinBackoff: m.check, MaxBackoff: m.check}},
	} {
		if w.name == "vip-link" && m.cfg.LinkCheck == nil {
			continue
		}
		h, err := m.run.Go(w.name, w.w, w.o)
		if err != nil {
			_ = m.Close(ctx)
			return fmt.Errorf("vip: start: %w", err)
		}
		m.handles = append(m.handles, h)
	}
	return nil
}

// Close stops the workers, stops serving every address (OnRelease, then
// the hook's Del) and revokes the lease, so that the others take the
// addresses over at once. Idempotent.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	var errs []error
	for i := len(m.handles) - 1; i >= 0; i-- {
		if err := m.handles[i].Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	m.op.Lock()
	m.mu.Lock()
	l := m.lease
	m.lease = nil
	addrs := m.heldAddrs()
	m.mu.Unlock()
	for _, a := range addrs {
		m.releaseLocal(a, "stopped")
	}
	m.op.Unlock()
	if l != nil {
		rctx, cancel := context.WithTimeout(ctx, m.ttl)
		if _, err := m.cli.Revoke(rctx, l.id); err != nil {
			errs = append(errs, fmt.Errorf("vip: revoke lease %s (the addresses move when it expires): %w", leaseHex(int64(l.id)), err))
		}
		cancel()
	}
	if m.own && m.run != nil {
		if err := m.run.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Held returns the addresses this node serves, with their epochs.
func (m *Manager) Held() map[netip.Addr]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[netip.Addr]int64, len(m.held))
	for a, h := range m.held {
		out[a] = h.epoch
	}
	return out
}

// snapshot returns a copy of the counters.
func (m *Manager) snapshot() stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.stats
	st.releases = make(map[string]uint64, len(m.stats.releases))
	for k, v := range m.stats.releases {
		st.releases[k] = v
	}
	return st
}

// heldAddrs returns the held addresses. Locking: mu held.
func (m *Manager) heldAddrs() []netip.Addr {
	out := make([]netip.Addr, 0, len(m.held))
	for a := range m.held {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// wakeElect makes the elect worker look again.
func (m *Manager) wakeElect() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// current returns the live lease and its fencing time, nil if none.
func (m *Manager) current() (*lease, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil {
		return nil, time.Time{}
	}
	return m.lease, m.lease.fenceAt(m.margin)
}

// fenceAt is when a holder must have stopped serving unless it renews.
func (l *lease) fenceAt(margin time.Duration) time.Time { return l.sent.Add(l.ttl - margin) }

// releaseLocal stops serving a: OnRelease, then the hook's Del. The key
// is left as it is. Locking: op held, mu not.
func (m *Manager) releaseLocal(a netip.Addr, reason string) {
	m.mu.Lock()
	h, ok := m.held[a]
	delete(m.held, a)
	if ok {
		m.stats.releases[reason]++
	}
	m.mu.Unlock()
	if !ok {
		return
	}
	if m.cfg.OnRelease != nil {
		m.cfg.OnRelease(a)
	}
	hctx, cancel := context.WithTimeout(context.Background(), m.margin)
	err := m.hook.Del(hctx, a)
	cancel()
	if err != nil {
		m.mu.Lock()
		m.stats.hookErrors++
		m.mu.Unlock()
		m.log.Warn("service address released, but the hook could not remove it from this machine", "addr", a, "err", err)
	}
	m.log.Info("service address released", "addr", a, "epoch", h.epoch, "reason", reason, "held", time.Since(h.since).Round(time.Millisecond))
}

// dropKey deletes a's key if it is still the holding of epoch.
func (m *Manager) dropKey(ctx context.Context, a netip.Addr, epoch int64) error {
	key := addrKey(m.prefix, a)
	dctx, cancel := context.WithTimeout(ctx, m.ttl)
	defer cancel()
	_, err := m.cli.Txn(dctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", epoch)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return fmt.Errorf("vip: give up %s (it moves when the lease expires): %w", a, err)
	}
	return nil
}
