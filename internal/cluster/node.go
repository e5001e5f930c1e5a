package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
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
// node's live keys bound to it, renews the lease, and if the lease is lost
// (etcd unreachable for longer than the TTL) obtains a new one and publishes
// again. Close revokes the lease, so the node shows down at once.
type Session struct {
	store *Store
	name  string
	ttl   time.Duration
	log   *slog.Logger
	live  NodeLive

	mu     sync.Mutex
	sess   *concurrency.Session
	drives map[DriveID]DriveLive // last published, republished on a new lease

	stop chan struct{}
	done chan struct{}
}

// RegisterNode writes rec and starts a Session whose lease TTL is ttl.
// It refuses (ErrNodeInUse) when another live process already holds the
// name — two processes must never serve as the same node.
func (s *Store) RegisterNode(ctx context.Context, rec NodeRecord, live NodeLive, ttl time.Duration, log *slog.Logger) (*Session, error) {
	if !ValidName(rec.Name) {
		return nil, fmt.Errorf("%w: node name %q: use 1-63 characters of a-z, 0-9, '-', '_', '.'", ErrInvalid, rec.Name)
	}
	if ttl < time.Second {
		return nil, fmt.Errorf("%w: lease TTL %s is below 1s", ErrInvalid, ttl)
	}
	var cur NodeLive
	if _, err := s.getRecord(ctx, liveNodeKey(rec.Name), &cur); err == nil && cur.BootID != live.BootID && !s.liveKeyExpires(ctx, rec.Name) {
		return nil, fmt.Errorf("%w: node %s is already up (pid %d on %s since %s); stop it first or pick another --name",
			ErrNodeInUse, rec.Name, cur.PID, cur.Host, cur.Started.Format(time.RFC3339))
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
	ns := &Session{store: s, name: rec.Name, ttl: ttl, log: log, live: live,
		drives: map[DriveID]DriveLive{}, stop: make(chan struct{}), done: make(chan struct{})}
	if err := ns.renew(ctx); err != nil {
		return nil, err
	}
	go ns.loop()
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
	sess, err := concurrency.NewSession(ns.store.cli, concurrency.WithTTL(int(ns.ttl/time.Second)), concurrency.WithContext(context.Background()))
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
	return nil
}

func (ns *Session) loop() {
	defer close(ns.done)
	for {
		ns.mu.Lock()
		done := ns.sess.Done()
		ns.mu.Unlock()
		select {
		case <-ns.stop:
			return
		case <-done:
		}
		ns.log.Warn("node lease lost; re-registering", "node", ns.name)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), ns.ttl)
			err := ns.renew(ctx)
			cancel()
			if err == nil {
				ns.log.Info("node lease renewed", "node", ns.name)
				break
			}
			ns.log.Warn("re-register failed", "node", ns.name, "err", err)
			select {
			case <-ns.stop:
				return
			case <-time.After(time.Second):
			}
		}
	}
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

// Close stops renewing and revokes the lease: the node and its drives show
// down immediately.
func (ns *Session) Close() error {
	close(ns.stop)
	<-ns.done
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.sess.Close()
}
