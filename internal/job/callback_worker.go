package job

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/runner"
)

// CallbackInterval is how long the callbacks worker rests when it has
// caught up with the event log: a callback runs up to this long after its
// event was recorded (plus the runs queued before it).
const CallbackInterval = 2 * time.Second

// callbackBatch is how many events a step reads at most.
const callbackBatch = 64

// CallbackWorker is a node's "callbacks" worker: on the coordinator's
// node it follows the event log and runs, for each new event, the
// callbacks that match it (Callback.Matches), one after another in name
// order, and events in id order; on every other node it is idle. Run it
// on every node as a worker of the node's runner, CallbackInterval apart:
// whichever node is coordinator runs the callbacks.
//
// One step runs at most one command (it may block up to the callback's
// Timeout; stopping the runner kills the command), stores its run with
// its event (Event.Callbacks) and returns Busy; a step with nothing to run
// moves the cursor and returns Idle.
//
// Progress is in etcd, so a new coordinator continues where the last one
// stopped: the cursor (callbackCursorRecord) is the last event whose
// callbacks have all run, and an event's stored runs say which of its
// callbacks have. A run is stored, and the cursor moved, in one
// transaction fenced on the coordinator's term. So a failover never skips
// an event and re-runs at most the one command that was running, or had
// ended without its run stored, when the old coordinator lost its term
// (at least once: a callback must tolerate running twice for an event).
// The first step ever, in a cluster without a cursor, starts after the
// newest event: callbacks never run for events recorded before the
// cluster had callbacks, nor (Callback.Created) before their own creation.
// Events that fall out of the log (Config.KeepEvents) before their turn
// are skipped, with a warning in the log.
type CallbackWorker struct {
	e *Engine
	// term returns the node's term as coordinator (nil: not coordinator);
	// Engine.currentTerm, replaced by tests.
	term func() *coordTerm
	// deposed is a term whose fence failed: the node is no longer
	// coordinator though the engine has not noticed yet; nothing runs
	// under it.
	deposed *coordTerm
	// gapLogged is the last event id a warning about skipped events was
	// logged for.
	gapLogged uint64
}

var _ runner.Worker = (*CallbackWorker)(nil)

// CallbackWorker returns the node's callbacks worker (see the type). Call
// it once per node.
func (e *Engine) CallbackWorker() *CallbackWorker {
	return &CallbackWorker{e: e, term: e.currentTerm}
}

// Step runs the next pending callback, if this node is coordinator (see
// CallbackWorker). An error is one of etcd, or a run that could not be
// stored (the runner logs it and backs off).
func (w *CallbackWorker) Step(ctx context.Context) (runner.State, error) {
	t := w.term()
	if t == nil || t == w.deposed {
		return runner.Idle, nil
	}
	// Read the cursor and the registry under the term's fence: a node
	// that lost its term learns it here, before it runs anything.
	resp, err := w.e.cfg.Client.Txn(ctx).If(t.fence()...).Then(
		clientv3.OpGet(keyCallbackCursor),
		clientv3.OpGet(prefixCallbacks, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)),
		clientv3.OpGet(keyEventSeq),
	).Commit()
	if err != nil {
		return runner.Idle, fmt.Errorf("job: callbacks: read cursor: %w", err)
	}
	if !resp.Succeeded {
		w.deposed = t
		w.e.log.Warn("callbacks: this node's coordinator term ended; its successor runs the callbacks")
		return runner.Idle, nil
	}
	curKvs, cbKvs, seqKvs := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs
	if len(curKvs) == 0 {
		return w.startCursor(ctx, t, seqKvs)
	}
	var cur callbackCursorRecord
	if err := decode(keyCallbackCursor, curKvs[0].Value, &cur); err != nil {
		return runner.Idle, err
	}
	curRev := curKvs[0].ModRevision
	cbs := make([]Callback, 0, len(cbKvs))
	for _, kv := range cbKvs {
		var r callbackRecord
		if err := decode(string(kv.Key), kv.Value, &r); err != nil {
			return runner.Idle, err
		}
		cbs = append(cbs, r.Callback)
	}
	evResp, err := w.e.cfg.Client.Get(ctx, eventKey(cur.Last+1), clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefixEvents)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithLimit(callbackBatch))
	if err != nil {
		return runner.Idle, fmt.Errorf("job: callbacks: read events after %d: %w", cur.Last, err)
	}
	done := cur.Last
	for _, kv := range evResp.Kvs {
		var r eventRecord
		if err := decode(string(kv.Key), kv.Value, &r); err != nil {
			// A record this node cannot read must not stop every later
			// event's callbacks.
			w.e.log.Warn("callbacks: skipping an event this node cannot read", "key", string(kv.Key), "err", err)
			done = max(done, keyEventID(string(kv.Key)))
			continue
		}
		ev := r.Event
		if ev.ID > done+1 && done == cur.Last && w.gapLogged != ev.ID {
			w.gapLogged = ev.ID
			w.e.log.Warn("callbacks: events left the event log before their callbacks ran; they are skipped",
				"from", done+1, "to", ev.ID-1, "keep_events", w.e.cfg.KeepEvents)
		}
		c, ok := pendingCallback(ev, cbs)
		if !ok {
			done = ev.ID
			continue
		}
		run := runCallback(ctx, c, ev, w.e.cfg.Node)
		if ctx.Err() != nil {
			return runner.Idle, nil // stopping: the next coordinator runs it again
		}
		logRun(w.e, ev, run)
		// Failpoint job/after-callback: the command ran, its run is not
		// stored. A crash here, or the point's error (the step fails
		// without storing), makes the next coordinator (or this one, at
		// its next step) run the command again: at least once.
		if err := failpoint.Eval("job/after-callback"); err != nil {
			return runner.Idle, fmt.Errorf("job: callbacks: run of %s for event %d not stored: %w", run.Name, ev.ID, err)
		}
		ev.Callbacks = append(ev.Callbacks, run)
		return w.store(ctx, t, cur, curRev, done, ev, kv.ModRevision)
	}
	if done != cur.Last {
		if _, err := w.moveCursor(ctx, t, curRev, done); err != nil {
			return runner.Idle, err
		}
	}
	if len(evResp.Kvs) == callbackBatch {
		return runner.Busy, nil
	}
	return runner.Idle, nil
}

// pendingCallback returns the first callback, by name, that matches ev
// and has not run for it.
func pendingCallback(ev Event, cbs []Callback) (Callback, bool) {
	for _, c := range cbs {
		if c.Matches(ev) && !slices.ContainsFunc(ev.Callbacks, func(r CallbackRun) bool { return r.Name == c.Name }) {
			return c, true
		}
	}
	return Callback{}, false
}

// startCursor writes the first cursor of the cluster: the newest event
// (from its counter), so that no older event runs a callback.
func (w *CallbackWorker) startCursor(ctx context.Context, t *coordTerm, seqKvs []*mvccpb.KeyValue) (runner.State, error) {
	var last uint64
	if len(seqKvs) == 1 {
		var err error
		if last, err = strconv.ParseUint(string(seqKvs[0].Value), 10, 64); err != nil {
			return runner.Idle, fmt.Errorf("%w: key %s: %v", ErrCorrupt, keyEventSeq, err)
		}
	}
	ok, err := w.moveCursor(ctx, t, 0, last)
	if err == nil && ok {
		w.e.log.Info("callbacks: first cursor; callbacks run for events after this one", "event", last)
	}
	return runner.Busy, err
}

// moveCursor sets the cursor to last, if the term lasts and the cursor's
// ModRevision is still rev (0: absent); false when either changed.
func (w *CallbackWorker) moveCursor(ctx context.Context, t *coordTerm, rev int64, last uint64) (bool, error) {
	cmps := append(t.fence(), clientv3.Compare(clientv3.ModRevision(keyCallbackCursor), "=", rev))
	tr, err := w.e.cfg.Client.Txn(ctx).If(cmps...).Then(w.cursorPut(last)).Commit()
	if err != nil {
		return false, fmt.Errorf("job: callbacks: move cursor to event %d: %w", last, err)
	}
	return tr.Succeeded, nil
}

func (w *CallbackWorker) cursorPut(last uint64) clientv3.Op {
	return clientv3.OpPut(keyCallbackCursor, encode(&callbackCursorRecord{Last: last, Node: w.e.cfg.Node, Updated: now()}))
}

// store writes ev (with its new run) over the record read at evRev, and
// the cursor at done when it moved, if the term lasts. When the term has
// ended, the run is lost (the successor runs the callback again) and
// nothing more runs under the term; when the event changed or left the
// log meanwhile, the run is lost and the next step reads it again.
func (w *CallbackWorker) store(ctx context.Context, t *coordTerm, cur callbackCursorRecord, curRev int64, done uint64, ev Event, evRev int64) (runner.State, error) {
	key := eventKey(ev.ID)
	cmps := append(t.fence(), clientv3.Compare(clientv3.ModRevision(key), "=", evRev),
		clientv3.Compare(clientv3.ModRevision(keyCallbackCursor), "=", curRev))
	ops := []clientv3.Op{clientv3.OpPut(key, encode(&eventRecord{Event: ev}))}
	if done != cur.Last {
		ops = append(ops, w.cursorPut(done))
	}
	run := ev.Callbacks[len(ev.Callbacks)-1]
	tr, err := w.e.cfg.Client.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return runner.Idle, fmt.Errorf("job: callbacks: store the run of callback %s for event %d (%s): %w; it runs again", run.Name, ev.ID, run.Result(), err)
	}
	if tr.Succeeded {
		return runner.Busy, nil
	}
	still, err := w.e.cfg.Client.Txn(ctx).If(t.fence()...).Commit()
	if err != nil {
		return runner.Idle, fmt.Errorf("job: callbacks: check the coordinator term: %w", err)
	}
	if !still.Succeeded {
		w.deposed = t
		w.e.log.Warn("callbacks: this node's coordinator term ended during a run; its successor runs the callback again",
			"callback", run.Name, "event", ev.ID)
		return runner.Idle, nil
	}
	w.e.log.Warn("callbacks: the event changed or left the event log during a run; its result is not kept", "callback", run.Name, "event", ev.ID)
	return runner.Busy, nil
}

// logRun logs a run: a failure (no exit, or a non-zero one) as a warning.
func logRun(e *Engine, ev Event, r CallbackRun) {
	args := []any{"callback", r.Name, "event", ev.ID, "kind", ev.Kind, "subject", ev.Subject, "result", r.Result(), "seconds", r.Seconds}
	if r.Error != "" || r.Exit != 0 {
		e.log.Warn("callback failed", append(args, "error", r.Error)...)
		return
	}
	e.log.Info("callback ran", args...)
}

// keyEventID returns the id in an event's key (0 if it has none).
func keyEventID(key string) uint64 {
	id, _ := strconv.ParseUint(strings.TrimPrefix(key, prefixEvents), 10, 64)
	return id
}
