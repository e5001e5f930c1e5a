package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/gateway/nfs"
)

// The NFS gateways' shared duplicate-request cache (nfs.DRCStore) in etcd.
//
// Schema (version 1):
//
//	/weft/nfs/drc/v1/<client-ip>/<xid>-<prog>-<proc>-<argsum>  →  the RPC reply, as sent
//
// (nfs.DRCKey.Name: fixed-width hexadecimal). Each record is put under a
// lease of nfsDRCLease; a lease serves new records for nfsDRCRotate, then
// a new one is granted, so a record lives between nfsDRCLease −
// nfsDRCRotate and nfsDRCLease — far past a client's retransmissions —
// and nothing keeps leases alive. A later version would live under
// /weft/nfs/drc/v2/; version 1's records expire by themselves, so a
// migration has nothing to do.
//
// Concurrent puts are committed together (group commit): the put that
// finds no transaction in flight commits every put waiting, in
// transactions of at most nfsDRCBatch operations, and goes on while more
// wait; the others wait for it. No goroutine of its own.
const (
	nfsDRCPrefix = "/weft/nfs/drc/v1/"
	nfsDRCLease  = 6 * time.Minute
	nfsDRCRotate = time.Minute
	// nfsDRCBatch stays under etcd's default --max-txn-ops (128).
	nfsDRCBatch = 100
)

// nfsDRC is the etcd store.
//
// Locking: mu guards the lease and the queue; it is not held across a
// call to etcd.
type nfsDRC struct {
	cli *clientv3.Client

	mu      sync.Mutex
	lease   clientv3.LeaseID
	leaseAt time.Time
	queue   []*nfsDRCPut
	busy    bool // a put is committing the queue

	puts, txns, hits, misses atomic.Uint64
}

type nfsDRCPut struct {
	key   string
	reply []byte
	done  chan error
}

var _ nfs.DRCStore = (*nfsDRC)(nil)

func newNFSDRC(cli *clientv3.Client) *nfsDRC { return &nfsDRC{cli: cli} }

func nfsDRCKey(k nfs.DRCKey) string { return nfsDRCPrefix + k.Client.String() + "/" + k.Name() }

// Put implements nfs.DRCStore: the record is committed when it returns nil.
func (d *nfsDRC) Put(ctx context.Context, k nfs.DRCKey, reply []byte) error {
	p := &nfsDRCPut{key: nfsDRCKey(k), reply: reply, done: make(chan error, 1)}
	d.mu.Lock()
	d.queue = append(d.queue, p)
	if d.busy {
		d.mu.Unlock()
		select {
		case err := <-p.done:
			return err
		case <-ctx.Done():
			return fmt.Errorf("server: nfs duplicate-request cache: %w", ctx.Err())
		}
	}
	d.busy = true
	for len(d.queue) > 0 {
		batch := d.queue
		d.queue = nil
		d.mu.Unlock()
		d.commit(ctx, batch)
		d.mu.Lock()
	}
	d.busy = false
	d.mu.Unlock()
	return <-p.done
}

// commit writes batch and tells each put its outcome.
func (d *nfsDRC) commit(ctx context.Context, batch []*nfsDRCPut) {
	for len(batch) > 0 {
		n := min(len(batch), nfsDRCBatch)
		err := d.txn(ctx, batch[:n])
		for _, p := range batch[:n] {
			p.done <- err
		}
		batch = batch[n:]
	}
}

func (d *nfsDRC) txn(ctx context.Context, batch []*nfsDRCPut) error {
	lease, err := d.currentLease(ctx)
	if err != nil {
		return err
	}
	ops := make([]clientv3.Op, len(batch))
	for i, p := range batch {
		ops[i] = clientv3.OpPut(p.key, string(p.reply), clientv3.WithLease(lease))
	}
	d.txns.Add(1)
	d.puts.Add(uint64(len(batch)))
	if _, err := d.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		// A lease that expired early (etcd restored, say) is granted again.
		d.mu.Lock()
		if d.lease == lease {
			d.lease = 0
		}
		d.mu.Unlock()
		return fmt.Errorf("server: nfs duplicate-request cache: put %d records: %w", len(batch), err)
	}
	return nil
}

// currentLease returns the lease new records go under, granting one when
// the current one is older than nfsDRCRotate. Only the committing put
// calls it.
func (d *nfsDRC) currentLease(ctx context.Context) (clientv3.LeaseID, error) {
	d.mu.Lock()
	l, at := d.lease, d.leaseAt
	d.mu.Unlock()
	if l != 0 && time.Since(at) < nfsDRCRotate {
		return l, nil
	}
	g, err := d.cli.Grant(ctx, int64(nfsDRCLease/time.Second))
	if err != nil {
		return 0, fmt.Errorf("server: nfs duplicate-request cache: grant a lease: %w", err)
	}
	d.mu.Lock()
	d.lease, d.leaseAt = g.ID, time.Now()
	d.mu.Unlock()
	return g.ID, nil
}

// Get implements nfs.DRCStore.
func (d *nfsDRC) Get(ctx context.Context, k nfs.DRCKey) ([]byte, bool, error) {
	resp, err := d.cli.Get(ctx, nfsDRCKey(k))
	if err != nil {
		return nil, false, fmt.Errorf("server: nfs duplicate-request cache: get: %w", err)
	}
	if len(resp.Kvs) == 0 {
		d.misses.Add(1)
		return nil, false, nil
	}
	d.hits.Add(1)
	return resp.Kvs[0].Value, true, nil
}
