package namespace

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/meta"
)

// LocksPrefix is the etcd key prefix of the file lock records
// (meta/locks_schema.go): in the namespace's key space, where mounts may
// write, but never read or written by the namespace's transactions.
const LocksPrefix = cluster.MetaPrefix + meta.LockRoot

// Locks returns the cluster's lock table store in etcd (meta.LockStore):
// a record is put under its session's lease (meta.SessionID is the
// lease id), so that etcd deletes the locks of a client whose lease
// expires; a commit is one etcd transaction comparing the LIN's records
// against the revision they were read at.
func Locks(cli *clientv3.Client) meta.LockStore { return etcdLocks{cli: cli} }

type etcdLocks struct{ cli *clientv3.Client }

var _ meta.LockStore = etcdLocks{}

func (s etcdLocks) Load(ctx context.Context, lin meta.LIN) ([]meta.LockRecord, int64, error) {
	resp, err := s.cli.Get(ctx, cluster.MetaPrefix+meta.LockKeyPrefix(lin), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, wrapLocks(ctx, "read", err)
	}
	out := make([]meta.LockRecord, 0, len(resp.Kvs))
	for _, p := range resp.Kvs {
		_, ses, err := meta.ParseLockKey(string(p.Key[len(cluster.MetaPrefix):]))
		if err != nil {
			return nil, 0, err
		}
		out = append(out, meta.LockRecord{Session: ses, Value: p.Value, ModRev: p.ModRevision})
	}
	return out, resp.Header.Revision, nil
}

func (s etcdLocks) Commit(ctx context.Context, lin meta.LIN, session meta.SessionID, modRev, rev int64, value []byte) (bool, int64, error) {
	if session == 0 {
		return false, 0, fmt.Errorf("%w: file locks need a client session (a lease); this client has none", meta.ErrInvalid)
	}
	pfx := cluster.MetaPrefix + meta.LockKeyPrefix(lin)
	key := cluster.MetaPrefix + meta.LockKey(lin, session)
	op := clientv3.OpDelete(key)
	if value != nil {
		op = clientv3.OpPut(key, string(value), clientv3.WithLease(clientv3.LeaseID(session)))
	}
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(pfx), "<", rev+1).WithPrefix(),
		clientv3.Compare(clientv3.ModRevision(key), "=", modRev),
	).Then(op).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false, 0, fmt.Errorf("%w: the session's lease %x has expired: its locks are gone (remount)", meta.ErrLocksLost, uint64(session))
	}
	if err != nil {
		return false, 0, wrapLocks(ctx, "commit", err)
	}
	return resp.Succeeded, resp.Header.Revision, nil
}

// Wait watches lin's records from revision rev+1; the first change (or
// the watch failing, the revision compacted) returns.
func (s etcdLocks) Wait(ctx context.Context, lin meta.LIN, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.cli.Watch(wctx, cluster.MetaPrefix+meta.LockKeyPrefix(lin), clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if wr.CompactRevision > 0 || errors.Is(err, rpctypes.ErrCompacted) {
				return nil // changes after rev are gone: load again
			}
			return wrapLocks(ctx, "watch", err)
		}
		if len(wr.Events) > 0 {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: the etcd watch of LIN %d's locks ended", kv.ErrUnavailable, lin)
}

func wrapLocks(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return fmt.Errorf("%w: etcd lock %s: %w", kv.ErrUnavailable, op, err)
}
