package etcdkv

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/kv"
)

var _ kv.Follower = (*Store)(nil)

// Backend implements kv.Follower.
func (s *Store) Backend(readOnly bool) kv.Backend { return backend{s: s, view: readOnly} }

// followCtx marks the watch stream: a watch that needs a leader fails when
// its member loses the leader (rather than going quiet), and Progress must
// name the same stream.
func followCtx(ctx context.Context) context.Context { return clientv3.WithRequireLeader(ctx) }

// Follow implements kv.Follower with an etcd watch on the Store's prefix.
// A delivery's Rev is its last change's revision, or for a progress report
// the member's revision when it reported (etcd reports progress only when
// the watch has caught up).
func (s *Store) Follow(ctx context.Context, after int64, fn func(kv.Changes)) error {
	wctx, cancel := context.WithCancel(followCtx(ctx))
	defer cancel()
	// The watch starts at after itself, not after+1: etcd does not answer
	// progress requests for a watch of a future revision, and the changes
	// of revision after are skipped below.
	wch := s.cli.Watch(wctx, s.prefix, clientv3.WithPrefix(), clientv3.WithRev(max(after, 1)), clientv3.WithProgressNotify())
	for wr := range wch {
		if err := wr.Err(); err != nil {
			if wr.CompactRevision > 0 || errors.Is(err, rpctypes.ErrCompacted) {
				return fmt.Errorf("%w: etcd compacted revision %d, the watch asked for %d", kv.ErrCompacted, wr.CompactRevision, after+1)
			}
			return s.wrap(ctx, "watch", err)
		}
		if wr.Created {
			// The creation header's revision says nothing about what was
			// delivered (a watch from an old revision catches up later).
			continue
		}
		var c kv.Changes
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision <= after {
				continue // delivered before (or revision after itself)
			}
			ch := kv.Change{Key: ev.Kv.Key[len(s.prefix):], Rev: ev.Kv.ModRevision}
			if ev.Type == mvccpb.DELETE {
				ch.Delete = true
			} else {
				ch.Value = ev.Kv.Value
				if ch.Value == nil {
					ch.Value = []byte{}
				}
			}
			c.Changes = append(c.Changes, ch)
			c.Rev = ev.Kv.ModRevision
		}
		if len(wr.Events) == 0 {
			c.Rev = wr.Header.Revision
		}
		if c.Rev == 0 {
			continue // only changes already delivered
		}
		after = max(after, c.Rev)
		fn(c)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: the etcd watch from revision %d ended", kv.ErrUnavailable, after+1)
}

// Progress implements kv.Follower.
func (s *Store) Progress(ctx context.Context) error {
	if err := s.cli.RequestProgress(followCtx(ctx)); err != nil {
		return s.wrap(ctx, "watch progress request", err)
	}
	return nil
}
