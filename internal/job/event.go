package job

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The event log: every cluster event that starts a job, or would have
// started one, with what came of it. Whatever watches the cluster (on the
// coordinator's node) records events; users read them with Events (weft
// job events list). The record format is eventRecord in schema.go.

// Event kinds. The engine stores any of them; it never interprets them.
const (
	// EventDriveDown: a drive in service went down (and, past the repair
	// grace period, a repair is due).
	EventDriveDown = "drive-down"
	// EventDriveAdded: a drive id the cluster had not seen before.
	EventDriveAdded = "drive-added"
	// EventNodeAdded: a node name the cluster had not seen before.
	EventNodeAdded = "node-added"
	// EventPoolUnbalanced: the used fractions of a pool's drives spread
	// more than Settings.RebalanceThreshold points.
	EventPoolUnbalanced = "pool-unbalanced"
	// EventLowSpace: a pool fell below Settings.LowSpaceThreshold percent
	// free; low-space mode started.
	EventLowSpace = "low-space"
	// EventSpaceRecovered: every pool is back above the threshold (plus
	// one point); low-space mode ended.
	EventSpaceRecovered = "space-recovered"
	// EventSchedule: a job schedule fired (reserved for schedules).
	EventSchedule = "schedule"
	// EventUnderProtected: stripes are below their pool's protection
	// (written while drives or nodes were down) and the cluster may now
	// place them better: a drive or node came back, or new ones were
	// written; a repair is due.
	EventUnderProtected = "under-protected"
	// EventDataLost: a job found a file with data it cannot rebuild
	// (recorded once per file, when it enters the lost-data list).
	EventDataLost = "data-lost"
	// EventPoolThreshold: a pool's used share went past its high
	// threshold (its own, or a MIGRATE rule's THRESHOLD out of it); a
	// tier job is due.
	EventPoolThreshold = "pool-threshold"
)

// EventKinds returns the kinds RecordEvent accepts.
func EventKinds() []string {
	return []string{EventDriveDown, EventDriveAdded, EventNodeAdded, EventPoolUnbalanced, EventLowSpace, EventSpaceRecovered, EventSchedule,
		EventUnderProtected, EventDataLost, EventPoolThreshold}
}

// DefaultKeepEvents is how many events the log keeps (Config.KeepEvents).
const DefaultKeepEvents = 1000

// Event is one entry of the event log.
type Event struct {
	// ID is allocated by RecordEvent: 1, 2, 3, … in the order events are
	// recorded, never reused.
	ID uint64 `json:"id"`
	// Time is when the event was recorded (UTC); it never decreases with
	// the id (on one clock).
	Time time.Time `json:"time"`
	// Kind is one of EventKinds().
	Kind string `json:"kind"`
	// Subject is what the event is about: "d7", "node n2", "pool default".
	Subject string `json:"subject"`
	// Detail is one human-readable line: what was observed.
	Detail string `json:"detail,omitempty"`
	// Job is the job the event started, or the one already queued or
	// running that covers it; 0 when none.
	Job JobID `json:"job,omitempty"`
	// Outcome says what came of the event: "started multiscan job 12",
	// "multiscan job 12 already queued", "no job: …".
	Outcome string `json:"outcome"`
	// Params are the event's values as a callback receives them (its
	// WEFT_PARAM_<KEY> variables and %key arguments, see Callback): "pool",
	// "usage", "drive", "node", "job", … where the recorder knows them. A
	// key is 1-32 of a-z, 0-9 and '_', starting with a letter; a value at
	// most 500 bytes. RecordEvent adds "job" when Job is set.
	Params map[string]string `json:"params,omitempty"`
	// Callbacks are the runs of the callbacks the event matched, in the
	// order they ran: empty when RecordEvent stores the event, appended
	// by the coordinator's callbacks worker (CallbackWorker) as each run
	// ends.
	Callbacks []CallbackRun `json:"callbacks,omitempty"`
}

// RecordEvent appends ev to the event log, stamping its ID and Time, and
// returns it as stored. In the same transaction it deletes
// the events beyond the newest Config.KeepEvents. An unknown Kind, an
// empty Subject or a malformed Params key is ErrInvalid. Params is copied
// (with "job" added when Job is set and Params has no "job"); Callbacks
// are dropped (only the callbacks worker writes them). Each call records
// a new event.
func (e *Engine) RecordEvent(ctx context.Context, ev Event) (Event, error) {
	if !slices.Contains(EventKinds(), ev.Kind) {
		return ev, fmt.Errorf("%w: event kind %q: use one of %s", ErrInvalid, ev.Kind, strings.Join(EventKinds(), ", "))
	}
	if ev.Subject == "" {
		return ev, fmt.Errorf("%w: %s event without a subject", ErrInvalid, ev.Kind)
	}
	ev.Detail, ev.Outcome = clip(ev.Detail, maxEventText), clip(ev.Outcome, maxEventText)
	params := make(map[string]string, len(ev.Params)+1)
	for k, v := range ev.Params {
		if !validParamKey(k) {
			return ev, fmt.Errorf("%w: %s event parameter %q: use 1-32 of a-z, 0-9, '_', starting with a letter", ErrInvalid, ev.Kind, k)
		}
		params[k] = clip(v, maxEventText)
	}
	if _, ok := params["job"]; !ok && ev.Job != 0 {
		params["job"] = strconv.FormatUint(uint64(ev.Job), 10)
	}
	ev.Params, ev.Callbacks = nil, nil
	if len(params) > 0 {
		ev.Params = params
	}
	for {
		resp, err := e.cfg.Client.Get(ctx, keyEventSeq)
		if err != nil {
			return ev, fmt.Errorf("job: read event id counter: %w", err)
		}
		var last uint64
		var rev int64
		if len(resp.Kvs) == 1 {
			if last, err = strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64); err != nil {
				return ev, fmt.Errorf("%w: key %s: %v", ErrCorrupt, keyEventSeq, err)
			}
			rev = resp.Kvs[0].ModRevision
		}
		// Stamped after reading the counter, so that a later id never has
		// an earlier time (the loser of a race stamps again).
		ev.ID, ev.Time = last+1, now()
		ops := []clientv3.Op{
			clientv3.OpPut(keyEventSeq, strconv.FormatUint(ev.ID, 10)),
			clientv3.OpPut(eventKey(ev.ID), encode(&eventRecord{Event: ev})),
		}
		if keep := uint64(e.cfg.KeepEvents); ev.ID > keep {
			// Ids are dense, so this leaves exactly the newest keep.
			ops = append(ops, clientv3.OpDelete(eventKey(0), clientv3.WithRange(eventKey(ev.ID-keep+1))))
		}
		tr, err := e.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(keyEventSeq), "=", rev)).Then(ops...).Commit()
		if err != nil {
			return ev, fmt.Errorf("job: record %s event: %w", ev.Kind, err)
		}
		if tr.Succeeded {
			e.log.Info("event", "id", ev.ID, "kind", ev.Kind, "subject", ev.Subject, "detail", ev.Detail, "outcome", ev.Outcome)
			return ev, nil
		}
	}
}

// maxEventText bounds an event's detail, outcome and parameter values.
const maxEventText = 500

// validParamKey reports whether k may name an event parameter: it becomes
// part of an environment variable's name (WEFT_PARAM_<KEY>) and a %key in
// a callback's arguments, so it is a-z, 0-9 and '_', starting with a
// letter, 1-32 long.
func validParamKey(k string) bool {
	if len(k) == 0 || len(k) > 32 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for _, c := range []byte(k) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Events returns the newest limit events (1 to Config.KeepEvents), oldest
// first. A limit out of range is ErrInvalid.
func (e *Engine) Events(ctx context.Context, limit int) ([]Event, error) {
	if limit < 1 || limit > e.cfg.KeepEvents {
		return nil, fmt.Errorf("%w: event limit %d: use 1 to %d (the events kept)", ErrInvalid, limit, e.cfg.KeepEvents)
	}
	resp, err := e.cfg.Client.Get(ctx, prefixEvents, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("job: read events: %w", err)
	}
	out := make([]Event, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		var r eventRecord
		if err := decode(string(kv.Key), kv.Value, &r); err != nil {
			return nil, err
		}
		out[len(out)-1-i] = r.Event
	}
	return out, nil
}

// Event returns the event with id, with its callbacks' runs. An id that
// was never given, or whose event fell out of the log (the newest
// Config.KeepEvents are kept), is ErrNotFound.
func (e *Engine) Event(ctx context.Context, id uint64) (Event, error) {
	resp, err := e.cfg.Client.Get(ctx, eventKey(id))
	if err != nil {
		return Event{}, fmt.Errorf("job: read event %d: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return Event{}, fmt.Errorf("%w: event %d: not in the event log (the newest %d are kept; weft job events list shows them)", ErrNotFound, id, e.cfg.KeepEvents)
	}
	var r eventRecord
	if err := decode(eventKey(id), resp.Kvs[0].Value, &r); err != nil {
		return Event{}, err
	}
	return r.Event, nil
}
