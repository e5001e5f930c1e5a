package vfs

import (
	"context"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/meta"
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

// opens tracks this mount's open files and records them in meta.
type opens struct {
	m       *meta.Meta
	session meta.SessionID
	log     logger

	mu      sync.Mutex
	recs    map[meta.LIN]*openRec
	pending map[meta.LIN]time.Time // opened, not yet recorded: since when
	stop    chan struct{}
	done    chan struct{}
}

type logger interface {
	Warn(msg string, args ...any)
}

func newOpens(m *meta.Meta, session meta.SessionID, log logger) *opens {
	o := &opens{m: m, session: session, log: log, recs: map[meta.LIN]*openRec{}, pending: map[meta.LIN]time.Time{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go o.loop()
	return o
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

// loop records opens older than RegisterDelay.
func (o *opens) loop() {
	defer close(o.done)
	t := time.NewTicker(RegisterDelay / 2)
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-t.C:
		}
		o.mu.Lock()
		var due []meta.LIN
		for lin, since := range o.pending {
			if time.Since(since) >= RegisterDelay {
				due = append(due, lin)
			}
		}
		o.mu.Unlock()
		for _, lin := range due {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := o.register(ctx, lin); err != nil {
				o.log.Warn("recording an open file", "lin", lin, "err", err)
			}
			cancel()
		}
	}
}

// close stops recording; open handles are released by FS.Close.
func (o *opens) close() {
	select {
	case <-o.stop:
	default:
		close(o.stop)
	}
	<-o.done
}
