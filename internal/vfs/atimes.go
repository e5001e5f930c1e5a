package vfs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/runner"
)

// AtimeDelay is how long an access time a read sets (relatime) may wait
// in this mount before it is committed to meta.
//
// An access time is worth less than the read that sets it: committing it
// synchronously made the first read of every file wait for a metadata
// transaction (a cold `find | xargs cat` of small files spent a third of
// its time there). Reads note the new access time here instead; the
// "atimes" worker commits those noted meanwhile every AtimeDelay, many
// files to a transaction (meta.SetAtimes). This mount's own GetAttr and
// Lookup show a noted time at once; other clients see it once committed.
// A mount that dies loses the access times it had not committed yet, as
// Linux's lazytime loses those not yet written back; an access time never
// moves backwards and never overrides one set explicitly (utimensat).
const AtimeDelay = time.Second

// atimes holds the access times noted by reads and not yet committed.
type atimes struct {
	m   *meta.Meta
	log *slog.Logger

	// commitMu is held while noted times are committed, and by an
	// explicit change of a file's atime, so that a noted time committed
	// late never overrides the explicit one.
	commitMu sync.Mutex

	mu      sync.RWMutex // read-locked by overlay, on every getattr of a file
	pending map[meta.LIN]time.Time

	worker *runner.Handle
	own    *runner.Runner
}

func newAtimes(m *meta.Meta, log *slog.Logger, run *runner.Runner) *atimes {
	a := &atimes{m: m, log: log, pending: map[meta.LIN]time.Time{}}
	a.worker, a.own = startWorker(run, "atimes", (*atimesWorker)(a), runner.Options{Idle: AtimeDelay}, log)
	return a
}

// read notes a read of file cur (its attributes as meta has them) at now:
// its atime is due if relatime says so and no later time is noted yet.
func (a *atimes) read(cur meta.Attr, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.pending[cur.LIN]; ok && t.After(cur.Atime) {
		cur.Atime = t
	}
	if relatime(cur, now) {
		a.pending[cur.LIN] = now
	}
}

// overlay sets at's atime to the one noted for its LIN, if later.
func (a *atimes) overlay(at *meta.Attr) {
	a.mu.RLock()
	t, ok := a.pending[at.LIN]
	a.mu.RUnlock()
	if ok && t.After(at.Atime) {
		at.Atime = t
	}
}

// explicit runs set, a change of lin's atime by a caller, with the time
// noted for lin dropped and no commit of noted times under way.
func (a *atimes) explicit(lin meta.LIN, set func() error) error {
	a.commitMu.Lock()
	defer a.commitMu.Unlock()
	a.mu.Lock()
	delete(a.pending, lin)
	a.mu.Unlock()
	return set()
}

// commit commits the times noted so far; those it could not commit are
// noted again (unless a later read noted a newer time meanwhile).
func (a *atimes) commit(ctx context.Context) error {
	a.commitMu.Lock()
	defer a.commitMu.Unlock()
	a.mu.Lock()
	due := a.pending
	if len(due) == 0 {
		a.mu.Unlock()
		return nil
	}
	a.pending = map[meta.LIN]time.Time{}
	a.mu.Unlock()
	err := a.m.SetAtimes(ctx, due)
	if err != nil {
		a.mu.Lock()
		for lin, t := range due {
			if cur, ok := a.pending[lin]; !ok || cur.Before(t) {
				a.pending[lin] = t
			}
		}
		a.mu.Unlock()
	}
	return err
}

// close commits what is noted (within ctx) and stops the worker.
func (a *atimes) close(ctx context.Context) {
	if err := a.commit(ctx); err != nil {
		a.log.Warn("vfs: access times not committed at close", "err", err)
	}
	_ = a.worker.Stop(context.Background())
	if a.own != nil {
		_ = a.own.Stop(context.Background())
	}
}

// atimesWorker is the "atimes" worker: a step commits the access times
// noted since the last; it steps every AtimeDelay.
type atimesWorker atimes

var _ runner.Worker = (*atimesWorker)(nil)

func (w *atimesWorker) Step(ctx context.Context) (runner.State, error) {
	if err := (*atimes)(w).commit(ctx); err != nil {
		if ctx.Err() != nil {
			return runner.Done, nil
		}
		return runner.Busy, err
	}
	return runner.Idle, nil
}
