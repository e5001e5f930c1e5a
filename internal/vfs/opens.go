package vfs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/runner"
)

// RegisterDelay is how long a file may be open in this mount before its
// open is recorded in meta.
//
// Recording an open costs a metadata commit, and releasing it another: two
// of the three commits of a create-and-close. Most files are closed within
// milliseconds (a compiler's output, a small file copied), so opens are
// recorded in the background after RegisterDelay, in one pass for all
// files opened meanwhile, and a file closed before then costs nothing.
//
// What the record protects: a file unlinked while open keeps its data until
// its last close (POSIX). Unlinks through this mount first record any
// unrecorded open of the victim, so they are exact. An unlink through
// another mount in the first RegisterDelay of an open does not see it, and
// deletes the data under the reader — the same window NFS clients have.
const RegisterDelay = 100 * time.Millisecond

// openRec is one LIN open in this mount.
type openRec struct {
	count      int  // open handles
	registered bool // recorded in meta (meta.Open done, meta.Release due)
}

// opens tracks this mount's open files and records them in meta; its
// "opens" worker records those open for RegisterDelay.
type opens struct {
	m       *meta.Meta
	session meta.SessionID
	log     *slog.Logger

	mu      sync.Mutex
	recs    map[meta.LIN]*openRec
	pending map[meta.LIN]time.Time // opened, not yet recorded: since when

	worker *runner.Handle
	own    *runner.Runner // when no runner was given, or its name was taken
}

// newOpens starts the "opens" worker on run, or on a runner of its own if
// run is nil or already runs an "opens" (another FS on the same runner).
func newOpens(m *meta.Meta, session meta.SessionID, log *slog.Logger, run *runner.Runner) *opens {
	o := &opens{m: m, session: session, log: log, recs: map[meta.LIN]*openRec{}, pending: map[meta.LIN]time.Time{}}
	o.worker, o.own = startWorker(run, "opens", (*opensWorker)(o), runner.Options{Idle: RegisterDelay / 2}, log)
	return o
}

// startWorker starts w on run, or on a new runner of its own (returned)
// when run is nil, or stopped, or runs a worker of that name already.
func startWorker(run *runner.Runner, name string, w runner.Worker, o runner.Options, log *slog.Logger) (*runner.Handle, *runner.Runner) {
	if run != nil {
		h, err := run.Go(name, w, o)
		if err == nil {
			return h, nil
		}
		log.Warn("vfs: the worker runs on a runner of its own", "worker", name, "why", err)
	}
	own := runner.New(runner.Config{Log: log})
	h, _ := own.Go(name, w, o) // a new runner runs nothing yet: it cannot fail
	return h, own
}

// open counts a new handle of lin.
func (o *opens) open(lin meta.LIN) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.recs[lin]
	if r == nil {
		r = &openRec{}
		o.recs[lin] = r
		o.pending[lin] = time.Now()
	}
	r.count++
}

// release drops a handle of lin; the last one releases the record in meta
// if it was made (which may purge an unlinked file).
func (o *opens) release(ctx context.Context, lin meta.LIN) error {
	o.mu.Lock()
	r := o.recs[lin]
	if r == nil {
		o.mu.Unlock()
		return nil
	}
	r.count--
	if r.count > 0 {
		o.mu.Unlock()
		return nil
	}
	delete(o.recs, lin)
	delete(o.pending, lin)
	registered := r.registered
	o.mu.Unlock()
	if !registered {
		return nil
	}
	return o.m.Release(context.WithoutCancel(ctx), o.session, lin)
}

// ensure records lin's open in meta now if it is open here and not yet
// recorded: called before this mount unlinks or replaces lin.
func (o *opens) ensure(ctx context.Context, lin meta.LIN) error {
	o.mu.Lock()
	r := o.recs[lin]
	if r == nil || r.registered {
		o.mu.Unlock()
		return nil
	}
	o.mu.Unlock()
	return o.register(ctx, lin)
}

// anyPending reports whether some open is not recorded yet.
func (o *opens) anyPending() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending) > 0
}

// register records lin's open in meta, unless it was closed meanwhile.
func (o *opens) register(ctx context.Context, lin meta.LIN) error {
	if err := o.m.Open(ctx, o.session, lin); err != nil {
		return err
	}
	o.mu.Lock()
	r := o.recs[lin]
	closed := r == nil
	if !closed {
		r.registered = true
		delete(o.pending, lin)
	}
	o.mu.Unlock()
	if closed {
		// Closed while we recorded it: undo.
		return o.m.Release(context.WithoutCancel(ctx), o.session, lin)
	}
	return nil
}

// opensWorker is the "opens" worker: a step records the opens older than
// RegisterDelay; it steps every RegisterDelay/2.
type opensWorker opens

var _ runner.Worker = (*opensWorker)(nil)

func (w *opensWorker) Step(ctx context.Context) (runner.State, error) {
	o := (*opens)(w)
	o.mu.Lock()
	var due []meta.LIN
	for lin, since := range o.pending {
		if time.Since(since) >= RegisterDelay {
			due = append(due, lin)
		}
	}
	o.mu.Unlock()
	for _, lin := range due {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := o.register(rctx, lin); err != nil && ctx.Err() == nil {
			o.log.Warn("recording an open file", "lin", lin, "err", err)
		}
		cancel()
	}
	return runner.Idle, nil
}

// close stops recording (and waits for the worker); open handles are
// released by FS.Close.
func (o *opens) close() {
	_ = o.worker.Stop(context.Background())
	if o.own != nil {
		_ = o.own.Stop(context.Background())
	}
}
