package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/policy"
	"github.com/weftfs/weft/internal/runner"
)

// PolicyFollower keeps a copy of the installed policy, parsed, following
// PolicyKey with an etcd watch: a new install reaches it within the
// watch's delay (milliseconds), so a mount places new files by it without
// a remount. Its Step is a runner worker ("policy-follow"): one blocking
// step watches until the stream breaks or ctx ends; the runner backs off
// and the next step reads the key again, so a change missed while the
// stream was down is not lost.
//
// A record this binary cannot read (a newer format, or a text it cannot
// parse) keeps the policy it had and logs why: the mount goes on placing
// files as before rather than placing them nowhere.
//
// Locking: the current policy is an atomic pointer, read without a lock
// on every create.
type PolicyFollower struct {
	cli *clientv3.Client
	log *slog.Logger
	cur atomic.Pointer[followedPolicy]
	rev atomic.Int64 // revision of the last read or watched change
}

type followedPolicy struct {
	version uint64
	pol     *policy.Policy
}

var _ runner.Worker = (*PolicyFollower)(nil)

// NewPolicyFollower returns a follower over cli with no policy yet: call
// Load before serving, then run it as a worker.
func NewPolicyFollower(cli *clientv3.Client, log *slog.Logger) *PolicyFollower {
	if log == nil {
		log = slog.Default()
	}
	return &PolicyFollower{cli: cli, log: log}
}

// Current returns the installed policy and its version; nil and 0 while
// none is installed (or none could be read).
func (f *PolicyFollower) Current() (*policy.Policy, uint64) {
	c := f.cur.Load()
	if c == nil {
		return nil, 0
	}
	return c.pol, c.version
}

// Load reads the installed policy once. Errors are the control plane's;
// a record it cannot read is logged and skipped (see PolicyFollower).
func (f *PolicyFollower) Load(ctx context.Context) error {
	r, err := f.cli.Get(ctx, PolicyKey)
	if err != nil {
		return fmt.Errorf("cluster: read the installed policy %s: %w", PolicyKey, err)
	}
	if len(r.Kvs) == 0 {
		f.cur.Store(nil)
	} else {
		f.apply(r.Kvs[0].Value)
	}
	f.rev.Store(r.Header.Revision)
	return nil
}

// apply installs a record's policy, or keeps the current one if it does
// not decode or parse.
func (f *PolicyFollower) apply(b []byte) {
	rec, pol, err := DecodeInstalledPolicy(b)
	if err != nil {
		_, v := f.Current()
		f.log.Warn("cannot read the installed policy: new files are placed by the previous one", "kept_version", v, "err", err)
		return
	}
	f.cur.Store(&followedPolicy{version: rec.Version, pol: pol})
	f.log.Info("policy installed", "version", rec.Version, "rules", len(pol.Rules()))
}

// Step watches PolicyKey from the revision last seen and applies each
// change; it returns when ctx ends (Done) or the stream breaks (an error,
// after which the runner backs off and the next step reloads first).
func (f *PolicyFollower) Step(ctx context.Context) (runner.State, error) {
	if err := f.Load(ctx); err != nil {
		if ctx.Err() != nil {
			return runner.Done, nil
		}
		return runner.Idle, err
	}
	return followKey(ctx, f.cli, PolicyKey, "the installed policy", &f.rev, f.apply, func() { f.cur.Store(nil) })
}

// followKey watches key from the revision after *rev until ctx ends or the
// stream breaks, calling put with each new value and del when the key is
// deleted, and advancing *rev to each response's revision: the loop of a
// follower's Step (what names the key in errors). It returns Done when
// ctx ends, else Idle with an error (the runner backs off; the next Step
// reloads before it watches again).
func followKey(ctx context.Context, cli *clientv3.Client, key, what string, rev *atomic.Int64, put func([]byte), del func()) (runner.State, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range cli.Watch(wctx, key, clientv3.WithRev(rev.Load()+1)) {
		if err := resp.Err(); err != nil {
			return runner.Idle, fmt.Errorf("cluster: watching %s: %w", what, err)
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				del()
				continue
			}
			put(ev.Kv.Value)
		}
		rev.Store(resp.Header.Revision)
	}
	if ctx.Err() != nil {
		return runner.Done, nil
	}
	return runner.Idle, fmt.Errorf("cluster: the watch of %s ended", what)
}
