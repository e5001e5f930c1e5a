package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/weftfs/weft/internal/runner"
)

// Node is a node as listed: its record, and its liveness joined in.
type Node struct {
	NodeRecord
	State Availability `json:"state"`
	Live  *NodeLive    `json:"live,omitempty"`
}

// ListNodes returns every registered node, in name order, with its
// availability.
func (s *Store) ListNodes(ctx context.Context) ([]Node, error) {
	live := map[string]*NodeLive{}
	err := s.scan(ctx, prefixLiveNode, func(k string, v []byte) error {
		var nl NodeLive
		if err := decode(k, v, &nl); err != nil {
			return err
		}
		live[strings.TrimPrefix(k, prefixLiveNode)] = &nl
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Node
	err = s.scan(ctx, prefixNodes, func(k string, v []byte) error {
		var n Node
		if err := decode(k, v, &n.NodeRecord); err != nil {
			return err
		}
		n.State = Down
		if l := live[n.Name]; l != nil {
			n.State, n.Live = Up, l
		}
		out = append(out, n)
		return nil
	})
	return out, err
}

// Session keeps a node registered and alive: it holds an etcd lease and the
// node's live keys bound to it, and if the lease is lost (etcd unreachable
// for longer than the TTL) its "lease" worker obtains a new one and
// publishes again. (The etcd client renews the lease itself while it
// lives.) Close revokes the lease, so the node shows down at once.
type Session struct {
	store *Store
	name  string
	ttl   time.Duration
	log   *slog.Logger
	live  NodeLive

	mu      sync.Mutex
	sess    *concurrency.Session
	renewed chan struct{}         // closed (and replaced) when sess is replaced
	drives  map[DriveID]DriveLive // last published, republished on a new lease

	worker *runner.Handle
	own    *runner.Runner // the Session's own runner, when none was given
}

// Registration is a node registering: its record and live record, the
// lease TTL, and where the Session's worker runs.
type Registration struct {
	Record NodeRecord
	Live   NodeLive
	// TTL is the lease's time to live, at least a second.
	TTL time.Duration
	Log *slog.Logger
	// Runner runs the Session's "lease" worker; nil: a runner of its own,
	// stopped by Close.
	Runner *runner.Runner
	// Holds lists the drives the registering process has open and locked
	// (drive.Open locks a drive's directory): proof that no other live
	// process serves them, used to take over the registration of a
	// crashed earlier incarnation (see staleIncarnation).
	Holds []DriveID
	// processStart overrides ProcessStart (tests).
	processStart func(pid int) (uint64, bool)
}

// takeOver checks the live key of r's node: absent, or this process's
// own, is fine; another process's is ErrNodeInUse, unless that process is
// provably gone (staleIncarnation), in which case its lease is revoked —
// its live keys and anything else bound to it (the job engine's claims)
// go at once — and the new process registers without waiting for the old
// lease to expire, which may never happen while the etcd members the node
// hosts are what the quorum lacks.
func (s *Store) takeOver(ctx context.Context, r Registration) error {
	name, live := r.Record.Name, r.Live
	resp, err := s.cli.Get(ctx, liveNodeKey(name))
	if err != nil {
		return fmt.Errorf("cluster: register node %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	kv := resp.Kvs[0]
	var cur NodeLive
	if err := decode(string(kv.Key), kv.Value, &cur); err != nil {
		return err
	}
	if cur.BootID == live.BootID {
		return nil
	}
	alive := r.processStart
	if alive == nil {
		alive = ProcessStart
	}
	why, stale, err := s.staleIncarnation(ctx, name, cur, live, r.Holds, alive)
	if err != nil {
		return err
	}
	if !stale {
		// Not provably gone (another machine, no drives to prove it by):
		// a crashed process's lease still runs out, a live one's does not.
		if s.liveKeyExpires(ctx, name) {
			return nil
		}
		return fmt.Errorf("%w: node %s is already up (pid %d on %s since %s); stop it first or pick another --name",
			ErrNodeInUse, name, cur.PID, cur.Host, cur.Started.Format(time.RFC3339))
	}
	r.Log.Warn("taking over the registration of a crashed earlier incarnation", "node", name, "pid", cur.PID, "host", cur.Host,
		"since", cur.Started.Format(time.RFC3339), "why", why)
	if kv.Lease != 0 {
		if _, err := s.cli.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("cluster: register node %s: revoke the lease of its crashed incarnation (pid %d): %w", name, cur.PID, err)
		}
	}
	return nil
}

// RegisterNode is Register without a runner (the Session runs its own).
func (s *Store) RegisterNode(ctx context.Context, rec NodeRecord, live NodeLive, ttl time.Duration, log *slog.Logger) (*Session, error) {
	return s.Register(ctx, Registration{Record: rec, Live: live, TTL: ttl, Log: log})
}

// Register writes r.Record and starts a Session whose lease TTL is r.TTL.
// It refuses (ErrNodeInUse) when another live process already holds the
// name — two processes must never serve as the same node.
func (s *Store) Register(ctx context.Context, r Registration) (*Session, error) {
	rec, live, ttl := r.Record, r.Live, r.TTL
	if !ValidName(rec.Name) {
		return nil, fmt.Errorf("%w: node name %q: use 1-63 characters of a-z, 0-9, '-', '_', '.'", ErrInvalid, rec.Name)
	}
	if ttl < time.Second {
		return nil, fmt.Errorf("%w: lease TTL %s is below 1s", ErrInvalid, ttl)
	}
	if r.Log == nil {
		r.Log = slog.Default()
	}
	if err := s.takeOver(ctx, r); err != nil {
		return nil, err
	}
	rec.V, live.V = RecordVersion, RecordVersion
	var old NodeRecord
	if _, err := s.getRecord(ctx, nodeKey(rec.Name), &old); err == nil {
		rec.Registered = old.Registered
	} else {
		rec.Registered = time.Now().UTC()
	}
	if _, err := s.cli.Put(ctx, nodeKey(rec.Name), encode(rec)); err != nil {
		return nil, fmt.Errorf("cluster: register node %s: %w", rec.Name, err)
	}
	ns := &Session{store: s, name: rec.Name, ttl: ttl, log: r.Log, live: live, drives: map[DriveID]DriveLive{}, renewed: make(chan struct{})}
	if err := ns.renew(ctx); err != nil {
		return nil, err
	}
	run := r.Runner
	if run == nil {
		ns.own = runner.New(runner.Config{Log: r.Log})
		run = ns.own
	}
	// Re-registering is retried every second: the node shows down until
	// it succeeds, so a longer back-off would only lengthen that.
	h, err := run.Go("lease", &leaseWorker{ns: ns}, runner.Options{MinBackoff: time.Second, MaxBackoff: time.Second})
	if err != nil {
		ns.mu.Lock()
		ns.sess.Close()
		ns.mu.Unlock()
		if ns.own != nil {
			_ = ns.own.Stop(ctx)
		}
		return nil, err
	}
	ns.worker = h
	return ns, nil
}

// liveKeyExpires waits for the live key of node name to disappear, for as
// long as its lease has left plus 3 s (a new etcd leader extends leases by
// its election timeout, and revokes expired ones every 500 ms), and
// reports whether it did. The key of a crashed process outlives it by its
// lease, and longer when the control plane lost its quorum meanwhile (a new
// leader grants every lease its full TTL again): a node restarted then
// would be refused its own name. A live process renews its lease and
// keeps the name.
func (s *Store) liveKeyExpires(ctx context.Context, name string) bool {
	r, err := s.cli.Get(ctx, liveNodeKey(name))
	if err != nil || len(r.Kvs) == 0 {
		return err == nil
	}
	lease := clientv3.LeaseID(r.Kvs[0].Lease)
	ttl, err := s.cli.TimeToLive(ctx, lease)
	if err != nil || ttl.TTL > 60 {
		return false
	}
	deadline := time.Now().Add(time.Duration(ttl.TTL)*time.Second + 3*time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
		r, err = s.cli.Get(ctx, liveNodeKey(name))
		if err != nil {
			return false
		}
		if len(r.Kvs) == 0 || clientv3.LeaseID(r.Kvs[0].Lease) != lease {
			return len(r.Kvs) == 0
		}
	}
	return false
}

// renew takes a new lease and publishes the live keys under it.
func (ns *Session) renew(ctx context.Context) error {
	// The lease is granted under ctx (without a quorum a grant waits for
	// ever: stopping the node must not); the session that keeps it alive
	// lives until it is closed or orphaned.
	grant, err := ns.store.cli.Grant(ctx, int64(ns.ttl/time.Second))
	if err != nil {
		return fmt.Errorf("cluster: lease for node %s: %w", ns.name, err)
	}
	sess, err := concurrency.NewSession(ns.store.cli, concurrency.WithLease(grant.ID), concurrency.WithTTL(int(ns.ttl/time.Second)),
		concurrency.WithContext(context.Background()))
	if err != nil {
		return fmt.Errorf("cluster: lease for node %s: %w", ns.name, err)
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	lease := clientv3.WithLease(sess.Lease())
	ops := []clientv3.Op{clientv3.OpPut(liveNodeKey(ns.name), encode(ns.live), lease)}
	for id, dl := range ns.drives {
		ops = append(ops, clientv3.OpPut(liveDriveKey(id), encode(dl), lease))
	}
	if _, err := ns.store.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		sess.Close()
		return fmt.Errorf("cluster: publish node %s: %w", ns.name, err)
	}
	if ns.sess != nil {
		ns.sess.Orphan()
	}
	ns.sess = sess
	close(ns.renewed)
	ns.renewed = make(chan struct{})
	return nil
}

// Current returns the node's lease as an etcd session while it lives; if
// it was lost, Current waits until the "lease" worker has taken a new one
// (or ctx ends). It is the node's one definition of alive: the job engine
// binds its claims and candidacy to it (it implements job.LeaseSource).
// The caller must not close the session; Close does.
func (ns *Session) Current(ctx context.Context) (*concurrency.Session, error) {
	for {
		ns.mu.Lock()
		sess, renewed := ns.sess, ns.renewed
		ns.mu.Unlock()
		select {
		case <-sess.Done():
		default:
			return sess, nil
		}
		select {
		case <-renewed:
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: node %s has no live lease: %w", ns.name, ctx.Err())
		}
	}
}

// Release is the job engine's word that it no longer uses sess: nothing
// to do, the lease is the node's (Close revokes it).
func (*Session) Release(*concurrency.Session, bool) {}

// leaseWorker is the Session's "lease" worker: it rests until the lease
// is lost (the etcd session's Done channel wakes it), then takes a new
// lease and publishes the live keys again, one attempt per step.
type leaseWorker struct {
	ns   *Session
	lost bool // logged as lost, not renewed yet
}

var (
	_ runner.Worker = (*leaseWorker)(nil)
	_ runner.Waker  = (*leaseWorker)(nil)
)

func (l *leaseWorker) done() <-chan struct{} {
	l.ns.mu.Lock()
	defer l.ns.mu.Unlock()
	return l.ns.sess.Done()
}

// WakeC wakes the worker when the current lease ends.
func (l *leaseWorker) WakeC() <-chan struct{} { return l.done() }

// Step renews a lost lease; with the lease alive it does nothing.
func (l *leaseWorker) Step(ctx context.Context) (runner.State, error) {
	ns := l.ns
	select {
	case <-l.done():
	default:
		return runner.Idle, nil
	}
	if !l.lost {
		ns.log.Warn("node lease lost; re-registering", "node", ns.name)
		l.lost = true
	}
	rctx, cancel := context.WithTimeout(ctx, ns.ttl)
	err := ns.renew(rctx)
	cancel()
	if err != nil {
		return runner.Idle, fmt.Errorf("re-register node %s: %w", ns.name, err)
	}
	l.lost = false
	ns.log.Info("node lease renewed", "node", ns.name)
	return runner.Idle, nil
}

// PublishDrive records a drive's usage and health under the node's lease, so
// that it disappears (drive down) when the node does.
func (ns *Session) PublishDrive(ctx context.Context, id DriveID, dl DriveLive) error {
	dl.V = RecordVersion
	if dl.Updated.IsZero() {
		dl.Updated = time.Now().UTC()
	}
	ns.mu.Lock()
	ns.drives[id] = dl
	lease := ns.sess.Lease()
	ns.mu.Unlock()
	if _, err := ns.store.cli.Put(ctx, liveDriveKey(id), encode(dl), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("cluster: publish drive %s: %w", id, err)
	}
	return nil
}

// Lease returns the node's current lease id (it changes after a re-register).
func (ns *Session) Lease() clientv3.LeaseID {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.sess.Lease()
}

// Close stops the lease worker and revokes the lease: the node and its
// drives show down immediately.
func (ns *Session) Close() error {
	// The lease worker's step is bounded (a renewal waits at most the
	// TTL); so are these waits, for a worker stuck anyway.
	ctx, cancel := context.WithTimeout(context.Background(), ns.ttl+time.Second)
	defer cancel()
	_ = ns.worker.Stop(ctx)
	if ns.own != nil {
		_ = ns.own.Stop(ctx)
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.sess.Close()
}
