package etcdkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/kv"
)

// DefaultLimits are etcd's own defaults (--max-txn-ops 128,
// --max-request-bytes 1.5 MiB), which an external cluster most likely runs
// with. Members started by package etcdx allow 1024 ops and 8 MiB; pass
// EmbeddedLimits for them.
var DefaultLimits = kv.Limits{MaxOps: 128, MaxBytes: 1536 * 1024}

// EmbeddedLimits match the members that package etcdx starts.
var EmbeddedLimits = kv.Limits{MaxOps: 1024, MaxBytes: 8 << 20}

// Config configures a Store.
type Config struct {
	// Client is an open etcd client; the Store does not close it.
	Client *clientv3.Client
	// Prefix is prepended to every key, e.g. "weft/meta/". Keys of other
	// users of the cluster must not start with it.
	Prefix string
	// Options tune retries; Options.Limits zero means DefaultLimits. Limits
	// above the cluster's own make oversized commits fail inside etcd, which
	// is reported as kv.ErrTooLarge too.
	Options kv.Options
	// SessionReads lets read-only transactions (View) skip the quorum round
	// of a linearizable read: they read from the member the client talks to
	// (a serializable read, about half the latency), at a revision no older
	// than any this Store has committed or read. That keeps read-your-writes
	// and monotonic reads for everything done through this Store; another
	// client's write shows once the member has applied it (normally within a
	// millisecond). Update transactions are unaffected: they always start
	// with a linearizable read.
	SessionReads bool
}

// Store is a kv.Store on etcd.
//
// Each transaction reads at one revision R, pinned by its first read, and
// commits with one Txn: If(ModRevision(k) == seen, for every key read;
// ModRevision(range) < R+1, for every range scanned).Then(writes). A range
// compare catches inserts and changes in a range; deletes are caught by the
// per-key compare of every key the scan returned.
type Store struct {
	cli     *clientv3.Client
	prefix  string
	opts    kv.Options
	session bool
	// floor is the newest revision this Store has committed or read:
	// session reads never answer from an older one.
	floor atomic.Int64
}

// observe raises the floor to rev.
func (s *Store) observe(rev int64) {
	for {
		cur := s.floor.Load()
		if rev <= cur || s.floor.CompareAndSwap(cur, rev) {
			return
		}
	}
}

var _ kv.Store = (*Store)(nil)

// New returns a Store over cfg.Client. It does no I/O.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("etcdkv: no etcd client in Config")
	}
	o := cfg.Options
	if o.Limits == (kv.Limits{}) {
		o.Limits = DefaultLimits
	}
	return &Store{cli: cfg.Client, prefix: cfg.Prefix, opts: o, session: cfg.SessionReads}, nil
}

// Update implements kv.Store.
func (s *Store) Update(ctx context.Context, fn func(kv.Tx) error) error {
	return kv.Run(ctx, backend{s: s}, s.opts, false, fn)
}

// View implements kv.Store.
func (s *Store) View(ctx context.Context, fn func(kv.Tx) error) error {
	return kv.Run(ctx, backend{s: s, view: true}, s.opts, true, fn)
}

// Limits implements kv.Store.
func (s *Store) Limits() kv.Limits { return s.opts.Limits }

// Close implements kv.Store. The client stays open: it belongs to the caller.
func (s *Store) Close() error { return nil }

// backend adapts Store to kv.Backend without exporting Begin and Commit.
type backend struct {
	s    *Store
	view bool // a View: session reads allowed
}

var (
	_ kv.Backend  = backend{}
	_ kv.Snapshot = (*snapshot)(nil)
)

func (b backend) Begin(ctx context.Context, attempt int) (kv.Snapshot, error) {
	return &snapshot{s: b.s, session: b.view && b.s.session}, nil
}

func (b backend) Commit(ctx context.Context, t *kv.Txn) error {
	s := b.s
	if err := t.CheckLimits(s.opts.Limits, len(s.prefix)); err != nil {
		return err
	}
	reads, ranges := t.ReadSet()
	rev := t.Revision()
	cmps := make([]clientv3.Cmp, 0, len(reads)+len(ranges))
	for k, modRev := range reads {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.prefix+k), "=", modRev))
	}
	for _, r := range ranges {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(s.prefix+string(r.Start)), "<", r.Rev+1).WithRange(s.end(r.End)))
	}
	writes := t.Writes()
	ops := make([]clientv3.Op, len(writes))
	for i, w := range writes {
		if w.Delete {
			ops[i] = clientv3.OpDelete(s.prefix + string(w.Key))
		} else {
			ops[i] = clientv3.OpPut(s.prefix+string(w.Key), string(w.Value))
		}
	}
	seen := max(rev, s.floor.Load()) // nothing newer had been observed when the commit was sent
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		err = s.wrap(ctx, "commit", err)
		if !errors.Is(err, kv.ErrUnavailable) {
			return err
		}
		if resp, err = s.resolve(ctx, t, cmps, ops, seen, err); err != nil || resp == nil {
			return err
		}
	}
	s.observe(resp.Header.Revision)
	if !resp.Succeeded {
		return fmt.Errorf("%w: a key read at revision %d changed before the commit", kv.ErrConflict, rev)
	}
	t.SetCommitRev(resp.Header.Revision)
	return nil
}

// resolve settles a commit whose outcome is unknown: the request failed in
// transport (the member it was sent to became unreachable with the request
// in flight, or answered that the proposal timed out), so it may have been
// applied or not. Answering the caller "unavailable" (EIO at a mount) for
// a change that took effect, or that another attempt would make at once,
// is what a partition did to one write in a few thousand.
//
// First the written keys are read back: if they show it applied (see
// applied; one transaction is one revision), it was. Otherwise it is sent
// again once, guarded
// so that it cannot apply twice or over another writer: besides its own
// compares, every key it writes must be unchanged since seen (the newest
// revision the Store had observed before the first send). If the first
// attempt was applied after all, or anybody wrote those keys meanwhile,
// the guard fails and the transaction is a conflict: kv.Run starts it
// over from a fresh snapshot, as for any other conflict. A resend that
// fails in transport again is reported as the first failure was.
//
// It returns the resend's response (Succeeded false: a conflict), or nil
// and nil when the first attempt is proven applied (t's commit revision
// set), or an error.
func (s *Store) resolve(ctx context.Context, t *kv.Txn, cmps []clientv3.Cmp, ops []clientv3.Op, seen int64, failed error) (*clientv3.TxnResponse, error) {
	writes := t.Writes()
	reads, _ := t.ReadSet()
	if at, ok := s.applied(ctx, writes, reads, seen); ok {
		s.observe(at)
		t.SetCommitRev(at)
		return nil, nil
	}
	if ctx.Err() != nil {
		return nil, failed
	}
	guard := slices.Clone(cmps)
	for _, w := range writes {
		if _, read := reads[string(w.Key)]; !read {
			guard = append(guard, clientv3.Compare(clientv3.ModRevision(s.prefix+string(w.Key)), "<", seen+1))
		}
	}
	resp, err := s.cli.Txn(ctx).If(guard...).Then(ops...).Commit()
	if err != nil {
		return nil, failed
	}
	return resp, nil
}

// applied reports whether writes are in the store as one transaction
// newer than seen made them, and at which revision. The proof is a key
// the transaction read and wrote (a read-modify-write, or a key it found
// absent and created) that holds the value written, at a revision X newer
// than seen: another transaction writing that key would have had to read
// it too and write the same bytes. Every other written key must fit: hold
// its value at X too, or have changed after X (a directory's times,
// written blind, may well have been written again by the next create);
// every key deleted must be absent or have changed after X. A
// transaction that read none of the keys it wrote is proven only if every
// key it put holds its value at one revision.
func (s *Store) applied(ctx context.Context, writes []kv.Write, reads map[string]int64, seen int64) (int64, bool) {
	gets := make([]clientv3.Op, len(writes))
	for i, w := range writes {
		gets[i] = clientv3.OpGet(s.prefix + string(w.Key))
	}
	resp, err := s.cli.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return 0, false
	}
	now := make([]*mvccpb.KeyValue, len(writes))
	for i := range writes {
		if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
			now[i] = kvs[0]
		}
	}
	// X: where the keys read and written hold the values written.
	var at int64
	blind := true
	for i, w := range writes {
		if _, read := reads[string(w.Key)]; !read || w.Delete {
			continue
		}
		blind = false
		if got := now[i]; got != nil && got.ModRevision > seen && bytes.Equal(got.Value, w.Value) {
			if at != 0 && got.ModRevision != at {
				return 0, false
			}
			at = got.ModRevision
		}
	}
	if blind { // no read key to prove it: every put must hold its value at one revision
		for i, w := range writes {
			if w.Delete {
				continue
			}
			if got := now[i]; got == nil || got.ModRevision <= seen || !bytes.Equal(got.Value, w.Value) || (at != 0 && got.ModRevision != at) {
				return 0, false
			}
			at = now[i].ModRevision
		}
	}
	if at == 0 {
		return 0, false
	}
	for i, w := range writes {
		got := now[i]
		switch {
		case got == nil: // deleted, by it or since
		case got.ModRevision > at: // changed since
		case got.ModRevision == at && !w.Delete && bytes.Equal(got.Value, w.Value):
		default:
			return 0, false
		}
	}
	return at, true
}

// end maps a range end to etcd: nil (no bound) becomes the prefix's end.
func (s *Store) end(end []byte) string {
	if end != nil {
		return s.prefix + string(end)
	}
	if e := kv.PrefixEnd([]byte(s.prefix)); e != nil {
		return string(e)
	}
	return "\x00" // the whole keyspace
}

// wrap turns an etcd or gRPC error into a kv error. Oversized requests are
// kv.ErrTooLarge (should CheckLimits underestimate); a compacted revision is
// a conflict (the snapshot is gone, start over); the rest is unavailability.
func (s *Store) wrap(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, rpctypes.ErrTooManyOps), errors.Is(err, rpctypes.ErrRequestTooLarge),
		status.Code(err) == codes.ResourceExhausted:
		return fmt.Errorf("%w: etcd refused the %s: %v", kv.ErrTooLarge, op, err)
	case errors.Is(err, rpctypes.ErrCompacted):
		return fmt.Errorf("%w: snapshot revision compacted during %s", kv.ErrConflict, op)
	}
	return fmt.Errorf("%w: etcd %s: %w", kv.ErrUnavailable, op, err)
}

// snapshot reads at the revision its first read returned.
type snapshot struct {
	s       *Store
	rev     int64
	session bool // first read may be serializable (see Config.SessionReads)
}

func (sn *snapshot) Revision() int64 { return sn.rev }

// opts returns the read options: at the pinned revision, and serializable
// (answered by the local member without a quorum round) unless lin.
func (sn *snapshot) opts(lin bool, extra ...clientv3.OpOption) []clientv3.OpOption {
	if sn.rev > 0 {
		extra = append(extra, clientv3.WithRev(sn.rev))
	}
	if !lin {
		extra = append(extra, clientv3.WithSerializable())
	}
	return extra
}

func (sn *snapshot) Get(ctx context.Context, keys [][]byte) ([]kv.Versioned, error) {
	out := make([]kv.Versioned, len(keys))
	if len(keys) == 1 {
		resp, err := sn.do(ctx, func(lin bool) clientv3.Op {
			return clientv3.OpGet(sn.s.prefix+string(keys[0]), sn.opts(lin)...)
		})
		if err != nil {
			return nil, err
		}
		sn.pin(resp.Get().Header.Revision)
		if kvs := resp.Get().Kvs; len(kvs) > 0 {
			out[0] = kv.Versioned{Value: kvs[0].Value, ModRev: kvs[0].ModRevision}
		}
		out[0].Key = keys[0]
		return out, nil
	}
	// Several gets in one read-only Txn: one round trip, one revision.
	resp, err := sn.do(ctx, func(lin bool) clientv3.Op {
		ops := make([]clientv3.Op, len(keys))
		for i, k := range keys {
			ops[i] = clientv3.OpGet(sn.s.prefix+string(k), sn.opts(lin)...)
		}
		return clientv3.OpTxn(nil, ops, nil)
	})
	if err != nil {
		return nil, err
	}
	txn := resp.Txn()
	sn.pin(txn.Header.Revision)
	for i, r := range txn.Responses {
		out[i].Key = keys[i]
		if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
			out[i].Value, out[i].ModRev = kvs[0].Value, kvs[0].ModRevision
		}
	}
	return out, nil
}

func (sn *snapshot) Scan(ctx context.Context, start, end []byte, limit int) ([]kv.Versioned, bool, int64, error) {
	resp, err := sn.do(ctx, func(lin bool) clientv3.Op {
		o := sn.opts(lin, clientv3.WithRange(sn.s.end(end)))
		if limit > 0 {
			o = append(o, clientv3.WithLimit(int64(limit)))
		}
		return clientv3.OpGet(sn.s.prefix+string(start), o...)
	})
	if err != nil {
		return nil, false, 0, err
	}
	g := resp.Get()
	sn.pin(g.Header.Revision)
	out := make([]kv.Versioned, len(g.Kvs))
	for i, p := range g.Kvs {
		out[i] = kv.Versioned{Key: p.Key[len(sn.s.prefix):], Value: p.Value, ModRev: p.ModRevision}
	}
	return out, g.More, sn.rev, nil
}

func (sn *snapshot) pin(rev int64) {
	if sn.rev == 0 {
		sn.rev = rev
	}
}

// do runs the read built by op. A serializable read at a pinned revision
// fails with ErrFutureRev on a member that has not applied it yet; it then
// runs again linearizably, which waits for that member to catch up.
func (sn *snapshot) do(ctx context.Context, op func(lin bool) clientv3.Op) (clientv3.OpResponse, error) {
	// The first read is linearizable: it pins a revision that includes every
	// write acknowledged before the transaction started, so that an Update
	// that fails (or writes nothing) acted on current data, not on a lagging
	// member's.
	//
	// A session read (Config.SessionReads) starts serializable too, and is
	// repeated linearizably only if the member answered from a revision
	// older than the Store's floor.
	first := sn.rev == 0
	lin := first && !sn.session
	resp, err := sn.s.cli.Do(ctx, op(lin))
	if !lin && errors.Is(err, rpctypes.ErrFutureRev) {
		resp, err = sn.s.cli.Do(ctx, op(true))
	} else if err == nil && first && sn.session && headerRev(resp) < sn.s.floor.Load() {
		resp, err = sn.s.cli.Do(ctx, op(true))
	}
	if err != nil {
		return resp, sn.s.wrap(ctx, "read", err)
	}
	sn.s.observe(headerRev(resp))
	return resp, nil
}

// headerRev is the revision a read was answered at.
func headerRev(r clientv3.OpResponse) int64 {
	if g := r.Get(); g != nil {
		return g.Header.Revision
	}
	if t := r.Txn(); t != nil {
		return t.Header.Revision
	}
	return 0
}
