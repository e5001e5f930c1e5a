package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Store reads and writes the control plane. It is safe for concurrent use;
// every method is one or a few etcd round trips and holds no local state
// beyond the cluster id.
type Store struct {
	cli       *clientv3.Client
	clusterID string
}

// Open attaches to the control plane behind cli, bootstrapping it (cluster
// id, schema version) if this is the first node of a new cluster. It refuses
// a control plane written by a newer weft (ErrNewerSchema).
func Open(ctx context.Context, cli *clientv3.Client) (*Store, error) {
	// Read first: a client identity may read the control plane but not
	// write it, and etcd's authentication checks every operation of a
	// transaction, taken or not.
	sr, err := cli.Get(ctx, keySchema)
	if err != nil {
		return nil, fmt.Errorf("cluster: read schema: %w", err)
	}
	if len(sr.Kvs) == 0 {
		if err := bootstrap(ctx, cli); err != nil {
			return nil, err
		}
	}
	resp, err := cli.Txn(ctx).Then(clientv3.OpGet(keySchema), clientv3.OpGet(keyClusterID)).Commit()
	if err != nil {
		return nil, fmt.Errorf("cluster: read schema: %w", err)
	}
	sk := resp.Responses[0].GetResponseRange().Kvs
	ik := resp.Responses[1].GetResponseRange().Kvs
	if len(sk) != 1 || len(ik) != 1 {
		return nil, fmt.Errorf("%w: control plane has %s but not %s", ErrCorruptRecord, keySchema, keyClusterID)
	}
	v, err := strconv.Atoi(string(sk[0].Value))
	if err != nil {
		return nil, fmt.Errorf("%w: %s = %q", ErrCorruptRecord, keySchema, sk[0].Value)
	}
	if v > SchemaVersion {
		return nil, fmt.Errorf("%w: the control plane is at schema version %d, this weft knows up to %d: upgrade weft on this node", ErrNewerSchema, v, SchemaVersion)
	}
	if err := migrate(ctx, cli, v); err != nil {
		return nil, err
	}
	return &Store{cli: cli, clusterID: string(ik[0].Value)}, nil
}

// bootstrap creates the schema, the cluster id and the creation time in
// one transaction: whoever creates /weft/schema first also sets the id;
// everyone else reads what is there.
func bootstrap(ctx context.Context, cli *clientv3.Client) error {
	id := newClusterID()
	now := time.Now().UTC().Format(time.RFC3339)
	_, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(keySchema), "=", 0)).
		Then(
			clientv3.OpPut(keySchema, strconv.Itoa(SchemaVersion)),
			clientv3.OpPut(keyClusterID, id),
			clientv3.OpPut(keyCreated, now),
			// An empty event-watcher record: every drive and node that
			// joins from now on is an addition the event log records (a
			// cluster without one predates it: the watcher takes what
			// exists when it first looks as the initial membership).
			clientv3.OpPut(keyWatch, encode(WatchRecord{V: RecordVersion, Updated: time.Now().UTC()})),
		).Commit()
	if err != nil {
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	return nil
}

// migrate brings the control plane from version v to SchemaVersion. There is
// only version 1 so far.
func migrate(_ context.Context, _ *clientv3.Client, v int) error {
	if v == SchemaVersion {
		return nil
	}
	return fmt.Errorf("%w: no migration from control-plane schema %d", ErrNewerSchema, v)
}

// ClusterID returns the cluster's id.
func (s *Store) ClusterID() string { return s.clusterID }

// Client returns the etcd client the store uses.
func (s *Store) Client() *clientv3.Client { return s.cli }

func newClusterID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// AllocDriveID allocates a fresh, never reused drive id.
func (s *Store) AllocDriveID(ctx context.Context) (DriveID, error) {
	for attempt := 0; attempt < 100; attempt++ {
		r, err := s.cli.Get(ctx, keySeqDrive)
		if err != nil {
			return 0, fmt.Errorf("cluster: allocate drive id: %w", err)
		}
		var last uint64
		var rev int64
		if len(r.Kvs) == 1 {
			last, err = strconv.ParseUint(string(r.Kvs[0].Value), 10, 32)
			if err != nil {
				return 0, fmt.Errorf("%w: %s = %q", ErrCorruptRecord, keySeqDrive, r.Kvs[0].Value)
			}
			rev = r.Kvs[0].ModRevision
		}
		next := last + 1
		t, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(keySeqDrive), "=", rev)).
			Then(clientv3.OpPut(keySeqDrive, strconv.FormatUint(next, 10))).Commit()
		if err != nil {
			return 0, fmt.Errorf("cluster: allocate drive id: %w", err)
		}
		if t.Succeeded {
			return DriveID(next), nil
		}
	}
	return 0, fmt.Errorf("cluster: allocate drive id: too much contention, try again")
}

// getRecord reads one JSON record. A missing key is ErrNotFound.
func (s *Store) getRecord(ctx context.Context, key string, into any) (int64, error) {
	r, err := s.cli.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("cluster: get %s: %w", key, err)
	}
	if len(r.Kvs) == 0 {
		return 0, ErrNotFound
	}
	return r.Kvs[0].ModRevision, decode(key, r.Kvs[0].Value, into)
}

// scan reads every record under prefix, in key order, decoding each with fn.
func (s *Store) scan(ctx context.Context, prefix string, fn func(key string, val []byte) error) error {
	r, err := s.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("cluster: list %s: %w", prefix, err)
	}
	for _, kv := range r.Kvs {
		if err := fn(string(kv.Key), kv.Value); err != nil {
			return err
		}
	}
	return nil
}
