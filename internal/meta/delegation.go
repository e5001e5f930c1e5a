package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/runner"
)

// Directory delegations and namespace write-back.
//
// A client with write-back (Config.WriteBack, a kvcache store) takes the
// delegation of a directory it creates or removes files in: a record
// ("d" lin) naming its session, written in the same transaction as one of
// those changes. While it holds it, nobody else reads or changes that
// directory's entries — every transaction that does reads the record
// (loadDirs, checkEmpty) and, finding another session's, asks for it back
// (recall) and waits. So the holder knows the directory's entries
// exactly, and may acknowledge a create or an unlink there on its own
// knowledge: the change is decided on the cache, shown to its own reads
// at once, and committed a moment later with others in one transaction
// (kvcache.Store.Defer), where it is validated again. fsync, a recall, a
// synchronous operation of the same client and unmount wait for those
// commits (Flush). The price, as for a local file system: a change
// acknowledged and not yet committed is lost if the client dies first —
// it never half-happens.
//
// Recall: the other client sets the record's recalled flag; the holder,
// watching its cache, commits what it deferred and deletes the record;
// the other client, polling, proceeds. A record of a session that no
// longer exists (a crashed client), or one not given back within
// RecallTimeout, is deleted by the client that needs the directory; the
// holder's deferred changes there then fail their validation and are
// reported by its Flush.
//
// Every time here — the recall's timeout and its session checks, a
// delegation's idleness and cooldown — is read from the Meta's clock
// (Config.Now), so tests make time pass instead of waiting for it.

// Tunables of delegations.
const (
	// RecallTimeout is how long a client waits for a live holder to give
	// a delegation back before it takes the directory anyway.
	RecallTimeout = 10 * time.Second
	// DelegationIdle is how long a holder keeps a delegation it does not
	// use (no change deferred there, no file opened there covered).
	DelegationIdle = 30 * time.Second
	// DelegationCooldown is how long a client does not take a delegation
	// it gave back, or asked another client for: directories shared by
	// several clients stay synchronous.
	DelegationCooldown = 2 * time.Second
	// MaxUncommittedData bounds the deferred changes a file's deferred
	// data commit may sit behind (see deferStripes): about two commits'
	// worth, a fraction of a second of an untar, is what a client that
	// dies loses of files it closed and did not fsync.
	MaxUncommittedData = 256
)

// delegatedError means a directory is delegated to another session; the
// operation recalls it and runs again.
type delegatedError struct {
	dir    LIN
	holder SessionID
}

func (e *delegatedError) Error() string {
	return fmt.Sprintf("meta: directory LIN %d is delegated to session %x", e.dir, uint64(e.holder))
}

// deferrer is what Meta uses of a caching store for write-back (package
// kvcache).
type deferrer interface {
	Defer(ctx context.Context, fn func(kv.Tx) error) (bool, error)
	Flush(ctx context.Context) error
	Changed() <-chan struct{}
	Settle(ctx context.Context, n int) error
	CatchUp(ctx context.Context) error
	Complete(ctx context.Context, r kv.Range, max int) (bool, error)
	WatchPrefix(prefix []byte)
	TouchedKeys() ([][]byte, bool)
	Epoch() uint64
	SetBeforeCommit(fn func(context.Context) error)
}

// maxCompleteEntries bounds the entries of a delegated directory the cache
// loads whole (so that creates there are decided locally).
const maxCompleteEntries = 50000

// loadDirs reads like load (the inodes of dirs and lins, and extra), plus
// the delegation record of each directory in dirs, and fails with a
// *delegatedError if another session holds one. It returns extra's values.
func (o *op) loadDirs(dirs, lins []LIN, extra ...[]byte) ([][]byte, error) {
	keys := slices.Clone(extra)
	for _, d := range dirs {
		keys = append(keys, keyDeleg(d))
	}
	vals, err := o.load(append(slices.Clone(dirs), lins...), keys...)
	if err != nil {
		return nil, err
	}
	for i, d := range dirs {
		if err := o.checkDeleg(d, vals[len(extra)+i]); err != nil {
			return nil, err
		}
	}
	return vals[:len(extra)], nil
}

// getDeleg reads directory dir's delegation record in tx; nil if there is
// none.
func getDeleg(tx kv.Tx, dir LIN) (*delegation, error) {
	b, err := tx.Get(keyDeleg(dir))
	if err != nil || b == nil {
		return nil, err
	}
	d, err := decodeDeleg(dir, b)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// checkDeleg records directory dir's delegation record b and fails if
// another session holds it.
func (o *op) checkDeleg(dir LIN, b []byte) error {
	if o.delegs == nil {
		o.delegs = map[LIN]*delegation{}
	}
	if b == nil {
		o.delegs[dir] = nil
		return nil
	}
	d, err := decodeDeleg(dir, b)
	if err != nil {
		return err
	}
	o.delegs[dir] = &d
	return o.heldElsewhere(dir, &d)
}

// heldElsewhere fails with a *delegatedError if d, directory dir's
// delegation record (nil: none), is another session's, or this client
// has no session.
func (o *op) heldElsewhere(dir LIN, d *delegation) error {
	if d != nil && (d.session != o.m.session || o.m.session == 0) {
		return &delegatedError{dir: dir, holder: d.session}
	}
	return nil
}

// mine reports whether this client holds dir's delegation, as read by
// loadDirs, and nobody asked for it back.
func (o *op) mine(dir LIN) bool {
	d := o.delegs[dir]
	return d != nil && d.session == o.m.session && o.m.session != 0 && !d.recalled
}

// acquire takes dir's delegation in this transaction if the client does
// write-back, nobody holds it (as read by loadDirs) and the client has not
// given it back or recalled it lately.
func (o *op) acquire(dir LIN) {
	wb := o.m.wb
	if d, read := o.delegs[dir]; wb == nil || !read || d != nil || wb.cooling(dir) {
		return
	}
	o.put(keyDeleg(dir), encodeDeleg(delegation{session: o.m.session}))
	o.acquired = append(o.acquired, dir)
}

// acquireNew takes the delegation of directory lin, which this
// transaction creates: nobody can hold it yet.
func (o *op) acquireNew(lin LIN) {
	o.put(keyDeleg(lin), encodeDeleg(delegation{session: o.m.session}))
	o.acquired = append(o.acquired, lin)
}

// retryDelegated runs fn, and while it fails on another session's
// delegation, recalls it and runs fn again.
func (m *Meta) retryDelegated(ctx context.Context, fn func() error) error {
	for i := 0; ; i++ {
		err := fn()
		var de *delegatedError
		if !errors.As(err, &de) || i >= 100 {
			return err
		}
		if err := m.recall(ctx, de.dir); err != nil {
			return err
		}
	}
}

// recall gets directory dir's delegation back from its holder: it sets
// the recalled flag and waits until the holder deletes the record. A
// record whose session is gone, or that stays past RecallTimeout, is
// deleted here. A cache then catches up with the store, so that it holds
// everything the holder committed before giving the directory back.
func (m *Meta) recall(ctx context.Context, dir LIN) error {
	if err := m.recallWait(ctx, dir); err != nil {
		return err
	}
	return m.sync(ctx)
}

func (m *Meta) recallWait(ctx context.Context, dir LIN) error {
	if m.wb != nil {
		m.wb.cool(dir)
	}
	start := m.now()
	var checked time.Time
	wait := 500 * time.Microsecond
	for {
		var cur *delegation
		err := m.store.Update(ctx, func(tx kv.Tx) error {
			d, err := getDeleg(tx, dir)
			if cur = d; err != nil || d == nil {
				return err
			}
			if d.session != m.session && !d.recalled {
				d.recalled = true
				tx.Put(keyDeleg(dir), encodeDeleg(*d))
			}
			return nil
		})
		if err != nil {
			return err
		}
		if cur == nil || (cur.session == m.session && m.session != 0) {
			return nil
		}
		why := ""
		if m.now().Sub(checked) >= time.Second && m.alive != nil {
			checked = m.now()
			alive, err := m.alive(ctx, cur.session)
			if err == nil && !alive {
				why = "its session has ended"
			}
		}
		if why == "" && m.now().Sub(start) > RecallTimeout {
			why = fmt.Sprintf("it was not given back within %s", RecallTimeout)
		}
		if why != "" {
			m.log.Warn("meta: taking back a directory delegation", "dir", dir, "session", fmt.Sprintf("%x", uint64(cur.session)), "why", why)
			return m.dropDeleg(ctx, dir, cur.session)
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// dropDeleg deletes dir's delegation record if session still holds it.
func (m *Meta) dropDeleg(ctx context.Context, dir LIN, session SessionID) error {
	return m.store.Update(ctx, func(tx kv.Tx) error {
		d, err := getDeleg(tx, dir)
		if err != nil || d == nil {
			return err
		}
		if d.session == session {
			tx.Delete(keyDeleg(dir))
		}
		return nil
	})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeBack is a client's delegations and its deferred changes. Its
// "delegations" worker (one step: catch up on delegations taken, or give
// back those recalled or idle) runs on Config.Runner.
//
// Locking: mu guards held, born, cooldown and pending.
type writeBack struct {
	m   *Meta
	d   deferrer
	log *slog.Logger

	// gate: deferIn holds it shared from the ready check to the end of
	// the Defer; check takes it to stop deferring in a directory, so that
	// everything deferred there is older than check's Flush.
	gate sync.RWMutex

	mu       sync.Mutex
	held     map[LIN]*held
	born     map[LIN]*held // see bear
	cooldown map[LIN]time.Time
	coolFor  time.Duration // DelegationCooldown; tests shorten it
	// pending are delegations committed and not caught up with yet (see
	// taken), in order.
	pending []takenDirs
	// lastFull is when check last looked at every delegation held (the
	// worker's own; see check).
	lastFull time.Time

	worker *runner.Handle
	own    *runner.Runner // the writeBack's own runner, when none was given
}

// takenDirs is one commit's delegations, waiting for the cache to catch up.
type takenDirs struct {
	dirs []LIN
	hs   []*held
}

// held is one delegation this client holds.
type held struct {
	ready bool      // the cache has caught up with its taking
	used  time.Time // last use: a change deferred, or a file opened covered
}

// delegationsIdle is how often the worker looks at every delegation held
// (for idle ones, and as a backstop); in between it looks at those whose
// records the cache saw change.
const delegationsIdle = time.Second

func newWriteBack(m *Meta, d deferrer, run *runner.Runner) (*writeBack, error) {
	w := &writeBack{m: m, d: d, log: m.log, held: map[LIN]*held{}, born: map[LIN]*held{}, cooldown: map[LIN]time.Time{}, coolFor: DelegationCooldown}
	d.WatchPrefix([]byte{pfxDeleg})
	if run == nil {
		w.own = runner.New(runner.Config{Log: m.log})
		run = w.own
	}
	h, err := run.Go("delegations", (*wbWorker)(w), runner.Options{Idle: delegationsIdle})
	if err != nil {
		return nil, fmt.Errorf("meta: write-back: %w", err)
	}
	w.worker = h
	return w, nil
}

// cooling reports whether dir's delegation is not to be taken now.
func (w *writeBack) cooling(dir LIN) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.held[dir]; ok {
		return true // taken already (or being given back)
	}
	t, ok := w.cooldown[dir]
	return ok && w.m.now().Sub(t) < w.coolFor
}

func (w *writeBack) cool(dir LIN) {
	w.mu.Lock()
	w.cooldown[dir] = w.m.now()
	w.mu.Unlock()
}

// ready reports whether changes in dir may be deferred, and notes the use.
func (w *writeBack) ready(dir LIN) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.held[dir]
	if h == nil || !h.ready {
		return false
	}
	h.used = w.m.now()
	return true
}

// bear notes file lin, just created in dir by a deferred create (or
// directory lin, made in dir while this client held it): while
// the delegation of dir held now stays held, no other client can reach
// lin (every path to it goes through dir's entries, and reading those
// recalls the delegation), so changes of lin alone — its attributes, the
// first commit of its stripes — may be deferred too (deferOn). A link
// elsewhere, a rename or an unlink of it ends that (forget), as giving
// dir back does: a delegation given back is never ready again (one taken
// anew is another held), so born keeps the held of lin's birth.
func (w *writeBack) bear(lin, dir LIN) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if h := w.held[dir]; h != nil && h.ready {
		w.born[lin] = h
	}
}

// holdNew notes the delegation of directory lin, made by a deferred mkdir
// (whose transaction writes the record): it is ready at once, as nothing
// anyone committed before can concern a fresh LIN, and its entries are
// known absent to the cache (reserveLINs). If the mkdir is dropped at
// its replay, so are the changes deferred in lin (lin does not exist),
// and the worker gives the delegation up when it finds no record.
func (w *writeBack) holdNew(lin LIN) {
	w.mu.Lock()
	w.held[lin] = &held{ready: true, used: w.m.now()}
	w.mu.Unlock()
}

// bornReady reports whether changes of lin alone may be deferred (see
// bear), and notes the use of its directory's delegation.
func (w *writeBack) bornReady(lin LIN) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.born[lin]
	if h == nil || !h.ready {
		delete(w.born, lin)
		return false
	}
	h.used = w.m.now()
	return true
}

// forget ends the deferral of lins' own changes (see bear).
func (w *writeBack) forget(lins ...LIN) {
	if w == nil {
		return
	}
	w.mu.Lock()
	for _, lin := range lins {
		delete(w.born, lin)
	}
	w.mu.Unlock()
}

// taken notes delegations committed by this client; they become ready
// once the cache has caught up with the commit (everything others
// committed before it is then in the cache). The cache then loads each
// directory's entries whole (unless it has too many), so that a name
// there is known taken or free without asking etcd; a directory this
// client created is known whole already. Both are done by the worker
// (catchUp), woken here.
func (w *writeBack) taken(dirs []LIN) {
	if len(dirs) == 0 {
		return
	}
	w.mu.Lock()
	var hs []*held
	for _, d := range dirs {
		h := &held{used: w.m.now()}
		w.held[d] = h
		hs = append(hs, h)
	}
	w.pending = append(w.pending, takenDirs{dirs: dirs, hs: hs})
	w.mu.Unlock()
	w.worker.Wake()
}

// wbWorker is the write-back's "delegations" worker.
type wbWorker writeBack

var (
	_ runner.Worker = (*wbWorker)(nil)
	_ runner.Waker  = (*wbWorker)(nil)
)

// WakeC wakes the worker at every delivery of the cache's follow stream:
// a recall is a change of the delegation record.
func (ww *wbWorker) WakeC() <-chan struct{} { return ww.d.Changed() }

// Step catches up on the delegations taken since the last step, if any
// (Busy), or else gives back those recalled, lost or idle (Idle).
func (ww *wbWorker) Step(ctx context.Context) (runner.State, error) {
	w := (*writeBack)(ww)
	w.mu.Lock()
	taken := w.pending
	w.pending = nil
	w.mu.Unlock()
	if len(taken) > 0 {
		w.catchUp(ctx, taken)
		return runner.Busy, nil
	}
	w.check(ctx, false)
	return runner.Idle, nil
}

// catchUp makes the delegations of taken ready once the cache has caught
// up with this client's newest commit, then loads their directories'
// entries whole. A failure leaves them not ready (changes there stay
// synchronous) until they are given back.
func (w *writeBack) catchUp(ctx context.Context, taken []takenDirs) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.d.CatchUp(ctx); err != nil {
		return
	}
	w.mu.Lock()
	for _, t := range taken {
		for _, h := range t.hs {
			h.ready = true
		}
	}
	w.mu.Unlock()
	for _, t := range taken {
		for _, d := range t.dirs {
			start, end := entriesRange(d)
			if _, err := w.d.Complete(ctx, kv.Range{Start: start, End: end}, maxCompleteEntries); err != nil {
				return
			}
		}
	}
}

// check gives back the delegations that were recalled, that this client
// no longer holds, or (all with everything) that went unused. Once it
// gives back, it finishes even if ctx is cancelled (bounded by a minute):
// the commit of what was deferred must not be cut short by a stop.
//
// The worker wakes at every delivery of the cache's stream, and an untar
// holds hundreds of directories (each is delegated from birth, for
// DelegationIdle after its last use), so check looks at every one
// only once per delegationsIdle (idleness is counted in seconds); in
// between, only at those whose records the stream changed (a recall, a
// record taken away), unless the cache cannot say which (TouchedKeys).
func (w *writeBack) check(ctx context.Context, everything bool) {
	keys, complete := w.d.TouchedKeys() // before the records are read: a later change is in the next list
	w.mu.Lock()
	now := w.m.now()
	full := everything || !complete || now.Sub(w.lastFull) >= delegationsIdle
	var touched map[LIN]bool
	if full {
		w.lastFull = now
	} else {
		touched = make(map[LIN]bool, len(keys))
		for _, k := range keys {
			if len(k) == len(keyDeleg(0)) {
				touched[linAt(k, 1)] = true
			}
		}
	}
	dirs := make([]LIN, 0, len(w.held))
	idle := map[LIN]bool{}
	for d, h := range w.held {
		if full || touched[d] {
			dirs = append(dirs, d)
			idle[d] = everything || full && now.Sub(h.used) > DelegationIdle
		}
	}
	w.mu.Unlock()
	if len(dirs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var give []LIN
	err := w.m.store.View(ctx, func(tx kv.Tx) error {
		give = give[:0]
		for _, d := range dirs {
			cur, err := getDeleg(tx, d)
			if err != nil {
				return err
			}
			if idle[d] || cur == nil || cur.session != w.m.session || cur.recalled {
				give = append(give, d)
			}
		}
		return nil
	})
	if err != nil || len(give) == 0 {
		return
	}
	// Commit what was deferred, then give back: whoever recalled sees the
	// deferred changes before the record goes.
	w.gate.Lock()
	w.mu.Lock()
	for _, d := range give {
		if h := w.held[d]; h != nil {
			h.ready = false // no more deferring there
		}
	}
	for lin, h := range w.born {
		if !h.ready {
			delete(w.born, lin) // others may reach it once the directory is given back
		}
	}
	w.mu.Unlock()
	w.gate.Unlock()
	if err := w.d.Flush(ctx); err != nil {
		w.log.Error("meta: namespace changes were lost", "err", err)
		w.m.noteLost(err)
	}
	for _, d := range give {
		if err := w.m.dropDeleg(ctx, d, w.m.session); err != nil {
			w.log.Warn("meta: giving back a directory delegation", "dir", d, "err", err)
			continue
		}
		w.mu.Lock()
		delete(w.held, d)
		w.cooldown[d] = w.m.now()
		w.mu.Unlock()
	}
	w.mu.Lock()
	for d, t := range w.cooldown {
		if w.m.now().Sub(t) > w.coolFor {
			delete(w.cooldown, d)
		}
	}
	w.mu.Unlock()
}

// close stops the worker, then gives back every delegation after
// committing what was deferred.
func (w *writeBack) close(ctx context.Context) {
	_ = w.worker.Stop(context.Background())
	if w.own != nil {
		_ = w.own.Stop(context.Background())
	}
	w.check(ctx, true)
}

// opMode says how an operation that may be deferred runs.
type opMode int

const (
	synchronous opMode = iota // in Update: decided and committed now; may take the delegation
	deferLocal                // Defer's run on the cache: must hold the delegation
	deferReplay               // Defer's replay at the commit
)

// errNotMine refuses to defer an operation (it then runs synchronously).
var errNotMine = errors.New("meta: not deferred")

// deferIn tries to defer fn, a change of directory dir's entries: it
// succeeds if this client does write-back and holds dir's delegation
// (ready), and fn succeeds on the cache alone. fn runs once as deferLocal
// (on this goroutine, before deferIn returns) and later as deferReplay;
// both runs use the same time and usage shard.
func (m *Meta) deferIn(ctx context.Context, dir LIN, fn func(o *op, mode opMode) error) bool {
	return m.deferIf(ctx, func(w *writeBack) bool { return w.ready(dir) }, fn)
}

// deferOn tries to defer fn, a change of inode lin alone (its attributes,
// the first commit of a file's stripes), as deferIn does: it succeeds if
// lin was born under a delegation this client still holds (a file it
// created by a deferred create, a directory it made there: see bear), and
// fn succeeds on the cache alone.
func (m *Meta) deferOn(ctx context.Context, lin LIN, fn func(o *op, mode opMode) error) bool {
	return m.deferIf(ctx, func(w *writeBack) bool { return w.bornReady(lin) }, fn)
}

// deferIf is deferIn and deferOn: it defers fn if this client does
// write-back and ok holds, under the gate (see writeBack.gate).
func (m *Meta) deferIf(ctx context.Context, ok func(w *writeBack) bool, fn func(o *op, mode opMode) error) bool {
	w := m.wb
	if w == nil {
		return false
	}
	w.gate.RLock()
	defer w.gate.RUnlock()
	if !ok(w) {
		return false
	}
	now := m.now().UnixNano()
	var runs atomic.Int32
	deferred, err := w.d.Defer(ctx, func(tx kv.Tx) error {
		mode := deferReplay
		if runs.Add(1) == 1 {
			mode = deferLocal
		}
		o := m.newOp(tx, true)
		o.now, o.shard = now, m.shardBase
		if err := fn(o, mode); err != nil {
			return err
		}
		return o.flush()
	})
	return deferred && err == nil
}

// uniq returns a and b, or a alone if they are the same.
func uniq(a, b LIN) []LIN {
	if a == b {
		return []LIN{a}
	}
	return []LIN{a, b}
}

// Delegations returns how many directory delegations this client holds.
func (m *Meta) Delegations() int {
	if m.wb == nil {
		return 0
	}
	m.wb.mu.Lock()
	defer m.wb.mu.Unlock()
	return len(m.wb.held)
}

// Covered opens. A client holding directory D's delegation knows that
// nobody else changes the files linked in D alone (one link): every change
// of a file's data or attributes (any that sets its ctime) by another
// session reads the delegation records of the file's directories and
// recalls a held one first (checkCovered), as a change of D's entries
// does. So the holder's cache has every committed change of such a file,
// and an open there needs no round trip to see changes committed before it
// (close-to-open): OpenAttr skips the Sync.
//
// Why the cache may be trusted without asking etcd: the delegation is
// ready (the cache caught up with its taking), the record the cache holds
// is this session's and not recalled, and the cache is serving (its watch,
// which requires a leader, was heard from within kvcache.MaxStale, a
// second). A recall committed before then is in the cache, and the holder
// does not trust a recalled record; one committed later leaves the other
// client waiting for the holder to give the directory back — nothing of
// it is committed yet — for up to RecallTimeout (10 s) unless the holder's
// session ends, long past the second the cache is trusted for.

// checkCovered fails with a *delegatedError if this operation changes a
// file (not a directory) linked in a directory another session (or a
// client without one) holds the delegation of: the change waits for the
// holder to give it back.
func (o *op) checkCovered() error {
	for lin := range o.changed {
		n := o.inodes[lin]
		if n == nil || n.typ == TypeDir || o.dropped[lin] {
			continue
		}
		for _, l := range n.links {
			if d, read := o.delegs[l.Parent]; read {
				if err := o.heldElsewhere(l.Parent, d); err != nil {
					return err
				}
				continue
			}
			b, err := o.tx.Get(keyDeleg(l.Parent))
			if err != nil {
				return err
			}
			if err := o.checkDeleg(l.Parent, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// OpenAttr returns lin's attributes as an open must see them: with every
// change committed before the call by any client (close-to-open). It
// waits for the cache to catch up first (Sync: one round trip to etcd),
// unless lin is a file linked once, in a directory whose delegation this
// client holds (see "Covered opens"): then the cache answers alone.
func (m *Meta) OpenAttr(ctx context.Context, lin LIN) (Attr, error) {
	if a, ok := m.coveredAttr(ctx, lin); ok {
		m.coveredOpens.Add(1)
		return a, nil
	}
	m.syncedOpens.Add(1)
	if err := m.sync(ctx); err != nil {
		return Attr{}, err
	}
	return m.GetAttr(ctx, lin)
}

// OpenCounts returns how many OpenAttr calls the cache answered alone
// (covered) and how many waited for it to catch up first (synced).
func (m *Meta) OpenCounts() (covered, synced int64) {
	return m.coveredOpens.Load(), m.syncedOpens.Load()
}

// coveredAttr returns lin's attributes and true if an open may take them
// from the cache without a Sync (see "Covered opens").
func (m *Meta) coveredAttr(ctx context.Context, lin LIN) (Attr, bool) {
	w := m.wb
	if w == nil || m.session == 0 || w.d.Epoch() == 0 || m.Delegations() == 0 {
		return Attr{}, false // the open's reads would be done twice for nothing
	}
	var a Attr
	var dir LIN
	err := m.store.View(ctx, func(tx kv.Tx) error {
		dir = 0
		o := m.newOp(tx, false)
		n, t, err := o.loadAttr(lin)
		if err != nil || n.typ == TypeDir || len(n.links) != 1 {
			return err
		}
		d, err := getDeleg(tx, n.links[0].Parent)
		if err != nil || d == nil || d.session != m.session || d.recalled {
			return err
		}
		a, dir = n.attr(t), n.links[0].Parent
		return nil
	})
	if err != nil || dir == 0 || !w.ready(dir) || w.d.Epoch() == 0 {
		return Attr{}, false
	}
	return a, true
}
