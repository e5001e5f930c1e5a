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
}

// RecordEvent appends ev to the event log, stamping its ID and Time, and
// returns it as stored. In the same transaction it deletes
// the events beyond the newest Config.KeepEvents. An unknown Kind or an
// empty Subject is ErrInvalid. Each call records a new event.
func (e *Engine) RecordEvent(ctx context.Context, ev Event) (Event, error) {
	if !slices.Contains(EventKinds(), ev.Kind) {
		return ev, fmt.Errorf("%w: event kind %q: use one of %s", ErrInvalid, ev.Kind, strings.Join(EventKinds(), ", "))
	}
	if ev.Subject == "" {
		return ev, fmt.Errorf("%w: %s event without a subject", ErrInvalid, ev.Kind)
	}
	ev.Detail, ev.Outcome = clip(ev.Detail, maxEventText), clip(ev.Outcome, maxEventText)
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

// maxEventText bounds an event's detail and outcome.
const maxEventText = 500

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
