package job

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Job-engine key schema in etcd, format version 1.
//
// Every key lives under Prefix (inside the control plane's /weft/, see
// internal/cluster/schema.go). Values are JSON objects carrying "v", the
// record's format version; a reader refuses a record whose "v" is newer than
// RecordVersion (ErrNewerFormat) instead of misreading it.
//
//	/weft/jobs/seq                   last allocated JobID (decimal); bumped
//	                                 with a compare-and-swap at Submit
//	/weft/jobs/settings              settingsRecord: max running jobs,
//	                                 restripe one-at-a-time, retention
//	/weft/jobs/lowspace              lowSpaceRecord; present = low-space mode
//	/weft/jobs/types/<type>          typeRecord: a type's priority, policy,
//	                                 enabled flag and schedule set by
//	                                 ModifyType (absent: the type's own
//	                                 defaults)
//	/weft/jobs/schedule/<type>       scheduleRecord: the coordinator's
//	                                 memory of a type's schedule: when it
//	                                 last fired (or was set), so that a
//	                                 new coordinator neither repeats nor
//	                                 forgets a run; written with a
//	                                 compare-and-swap on its ModRevision
//	/weft/jobs/job/<id %020d>        jobRecord: state, priority, policy,
//	                                 params, times, current phase, per-phase
//	                                 reports. Kept after the job ends; the
//	                                 coordinator deletes terminal jobs beyond
//	                                 the newest Settings.KeepJobs (100).
//	/weft/jobs/progress/<id %020d>   progressRecord: the current phase's
//	                                 done/total and recent rate, written by
//	                                 the coordinator every few seconds
//	/weft/jobs/task/<T>              taskRecord: one task and its checkpoint
//	                                 (Cursor and counters), written by the
//	                                 owning manager every CheckpointInterval,
//	                                 at pause and at stop; "affinity" pins
//	                                 it to one node (version 2)
//	/weft/jobs/owner/<T>             ownerRecord: who holds task T, bound to
//	                                 the owner's lease (gone when it dies)
//	/weft/jobs/node/<node>           nodeRecord: a director's status (its
//	                                 managers, workers, duty, items/s), bound
//	                                 to the node's lease
//	/weft/jobs/data/<id %020d>/<k>  job data (data.go): what a phase leaves
//	                                 for a later one, opaque to the engine
//	                                 (the job type versions its values);
//	                                 deleted when the job ends and when its
//	                                 record is deleted
//	/weft/jobs/coordinator/<lease>   election keys (concurrency.Election);
//	                                 the oldest is the coordinator, value =
//	                                 its node name
//	/weft/jobs/policies/<name>       custom impact policies: their own
//	                                 records, documented in policy_schema.go
//	/weft/jobs/eventseq              last allocated event id (decimal);
//	                                 bumped with a compare-and-swap at
//	                                 RecordEvent
//	/weft/jobs/event/<id %020d>      eventRecord: one entry of the event
//	                                 log (kind, subject, detail, the job it
//	                                 started or why none). RecordEvent
//	                                 deletes, in the transaction that adds
//	                                 event N, every event below
//	                                 N-KeepEvents+1 (1000 kept); the
//	                                 callbacks worker rewrites it, with a
//	                                 compare-and-swap on its ModRevision
//	                                 fenced on the coordinator's term, to
//	                                 append each callback run (Callbacks)
//	/weft/jobs/callback/<name>       callbackRecord: a callback added by
//	                                 AddCallback (never changed; deleted by
//	                                 DeleteCallback)
//	/weft/jobs/callbackcursor        callbackCursorRecord: the last event
//	                                 whose callbacks have all run; written
//	                                 only by the coordinator's callbacks
//	                                 worker, fenced on its term and with a
//	                                 compare-and-swap on its ModRevision
//
// where T = <id %020d>/<phase %03d>/s<hex scope>/<from %016x>. A task's key
// is derived from its range, so a steal, which splits [From, To) at mid,
// creates the key of [mid, To) without any counter; ranges of a scope never
// overlap, so keys never collide.
//
// Task records of a phase are deleted in the transaction that ends the
// phase (their counters are summed into the job record's report), and
// those of a job when it ends.
//
// Transactions: a claim is a compare-and-swap on the task's ModRevision and
// the owner key's absence; a checkpoint or release compares the task's
// ModRevision and the owner key's CreateRevision (so a node whose claim
// expired can never write); a steal compares the victim's ModRevision and
// owner; every coordinator write compares its election key's
// CreateRevision (so a deposed coordinator can never write).
//
// Migration: version 1 is the first. A change an older binary could misread
// bumps RecordVersion; decode then accepts every older "v" and upgrades the
// record in memory (the next write stores the new version), so a rolling
// upgrade needs no offline step. A version-1 binary refuses version-2
// records with ErrNewerFormat.
//
// Version 2 (task affinity, per-scope counters, summaries) adds optional
// fields: taskRecord.Affinity, .Counts and .Summary, and
// PhaseReport.Scopes and .Summary. A version-1 binary would claim a task
// pinned to another node, so a task record that uses any of its fields is
// written as version 2 (a version-1 node refuses that phase's tasks and
// leaves them alone; a version-1 coordinator cannot end such a phase, so
// the job waits until the coordinator is upgraded); every other record,
// and a task without them, is still written as version 1, which every
// binary reads. Job records stay version 1: the report fields are
// informational, and a version-1 node that rewrites a job record (a
// priority change) drops them, which a summary phase then reports as no
// per-scope data. Version 1 records need no migration: the new fields are
// simply absent.
//
// Version 3 (reservations) adds taskRecord.Reserved: the end of the batch
// of items its holder has listed and may be processing. A steal splits at
// or after it, so no item is processed by both halves. A version-2 binary
// would steal inside the reservation, so a task record that has one is
// written as version 3 (older nodes leave such tasks alone); a record
// without one reads as reserving nothing, as before.
//
// Version 4 (serial tasks) adds taskRecord.Serial: a task no steal may
// split (TaskSpec.Serial). A version-3 binary would steal from it, so a
// task record that has it is written as version 4 (older nodes leave such
// tasks alone); a record without it reads as stealable, as before.
//
// Schedules add typeRecord.Schedule and the schedule/ keys without a
// version change. An absent Schedule means the type's default schedule
// (mediascan's is monthly), just as an absent type record does, so
// records written before schedules existed read as "never changed". An
// older binary reads a type record with a schedule correctly (it ignores
// the field); writing such records as a new version would instead make
// older nodes refuse the type (no Submit, no types list) during a
// rolling upgrade. The one loss: ModifyType run on an older node rewrites
// the record without the field, so the type's default schedule returns
// (run it on an upgraded node). Older binaries never read schedule/ keys,
// and an older coordinator fires nothing: a run due meanwhile fires once
// when an upgraded node is coordinator.
//
// Callbacks add eventRecord's Params and Callbacks fields and the
// callback/ and callbackcursor keys without a version change, by the same
// reasoning: both fields are optional and informational (an older binary
// reads an event that has them correctly, without them), older binaries
// never rewrite an event record (so they cannot drop the runs), and they
// never read the new keys. The one difference during a rolling upgrade: an
// older coordinator runs no callbacks, so events recorded meanwhile have
// their callbacks run late, once an upgraded node is coordinator (the
// cursor stays where the last upgraded coordinator left it). Both new
// records are version 1.
const (
	// RecordVersion is the newest "v" this binary reads, and the one it
	// writes on a task record that uses the version-4 field.
	RecordVersion = 4

	// baseRecordVersion is the "v" of every other record this binary
	// writes: the oldest format that says all the record says.
	baseRecordVersion = 1

	// Prefix is the root of the job engine's keys.
	Prefix = "/weft/jobs/"

	keySeq         = Prefix + "seq"
	keySettings    = Prefix + "settings"
	keyLowSpace    = Prefix + "lowspace"
	prefixTypes    = Prefix + "types/"
	prefixSched    = Prefix + "schedule/"
	prefixJobs     = Prefix + "job/"
	prefixProgress = Prefix + "progress/"
	prefixTasks    = Prefix + "task/"
	prefixOwners   = Prefix + "owner/"
	prefixData     = Prefix + "data/"
	prefixNodes    = Prefix + "node/"
	keyEventSeq    = Prefix + "eventseq"
	prefixEvents   = Prefix + "event/"
	electionPrefix = Prefix + "coordinator"

	prefixCallbacks   = Prefix + "callback/"
	keyCallbackCursor = Prefix + "callbackcursor"
)

func jobKey(id JobID) string      { return fmt.Sprintf("%s%020d", prefixJobs, uint64(id)) }
func progressKey(id JobID) string { return fmt.Sprintf("%s%020d", prefixProgress, uint64(id)) }
func typeKey(name string) string  { return prefixTypes + name }
func schedKey(name string) string { return prefixSched + name }
func nodeKey(node string) string  { return prefixNodes + node }
func eventKey(id uint64) string   { return fmt.Sprintf("%s%020d", prefixEvents, id) }
func callbackKey(n string) string { return prefixCallbacks + n }

// phaseSuffix is the part of T shared by a phase's tasks.
func phaseSuffix(id JobID, phase int) string { return fmt.Sprintf("%020d/%03d/", uint64(id), phase) }
func jobSuffix(id JobID) string              { return fmt.Sprintf("%020d/", uint64(id)) }

// taskSuffix is T for a task.
func taskSuffix(id JobID, phase int, scope string, from uint64) string {
	return fmt.Sprintf("%ss%s/%016x", phaseSuffix(id, phase), hex.EncodeToString([]byte(scope)), from)
}

// jobRecord is a job. Written at Submit, by user calls (state, priority,
// policy) and by the coordinator (state, phase, reports), always with a
// compare-and-swap on its ModRevision.
type jobRecord struct {
	V        int               `json:"v"`
	ID       JobID             `json:"id"`
	Type     string            `json:"type"`
	State    State             `json:"state"`
	Priority int               `json:"priority"`
	Policy   string            `json:"policy"`
	Params   map[string]string `json:"params,omitempty"`
	Created  time.Time         `json:"created"`
	Started  time.Time         `json:"started,omitzero"` // first time running
	Ended    time.Time         `json:"ended,omitzero"`
	Changed  time.Time         `json:"changed"` // last state change
	// Reason says why the job is in its state (failure, preemption, the
	// exclusion set it waits on).
	Reason string `json:"reason,omitempty"`
	// Phase is the index of the current phase (the last one run, once the
	// job ended); PhaseSplit is set once its tasks exist.
	Phase      int           `json:"phase"`
	PhaseSplit bool          `json:"phase_split,omitempty"`
	Phases     []PhaseReport `json:"phases"`
}

// PhaseReport is one phase's report: counters summed over its tasks.
type PhaseReport struct {
	Name    string     `json:"name"`
	State   PhaseState `json:"state"`
	Started time.Time  `json:"started,omitzero"`
	Ended   time.Time  `json:"ended,omitzero"`
	// Tasks is the number of tasks (after steals) the phase ran as.
	Tasks  int   `json:"tasks"`
	Items  int64 `json:"items"`
	Bytes  int64 `json:"bytes"`
	Errors int64 `json:"errors"`
	// Note is the last note an item left; Error is why the phase failed.
	Note  string `json:"note,omitempty"`
	Error string `json:"error,omitempty"`
	// Scopes sums the tasks per scope, for phases whose tasks were pinned
	// to nodes or whose items returned Counts (ordered by scope; at most
	// maxScopes, the rest summed into the last entry named "...").
	Scopes []ScopeReport `json:"scopes,omitempty"`
	// Summary is the last summary an item left (ItemResult.Summary).
	Summary string `json:"summary,omitempty"`
}

// ScopeReport is one scope's share of a phase report (a drive's, for a
// drive scan).
type ScopeReport struct {
	Scope string `json:"scope"`
	// Nodes are the nodes that last checkpointed the scope's tasks (where
	// they ran), sorted; Affinity the node its tasks were pinned to.
	Nodes    []string         `json:"nodes,omitempty"`
	Affinity string           `json:"affinity,omitempty"`
	Tasks    int              `json:"tasks"`
	Items    int64            `json:"items"`
	Bytes    int64            `json:"bytes"`
	Errors   int64            `json:"errors"`
	Counts   map[string]int64 `json:"counts,omitempty"`
}

// maxScopes bounds PhaseReport.Scopes, so that a job record stays small.
const maxScopes = 1024

// Duration is how long the phase ran, up to now if it has not ended.
func (p PhaseReport) Duration(now time.Time) time.Duration {
	if p.Started.IsZero() {
		return 0
	}
	if p.Ended.IsZero() {
		return now.Sub(p.Started)
	}
	return p.Ended.Sub(p.Started)
}

// taskRecord is a task and its checkpoint: items From <= k < Cursor are
// processed; Cursor <= k < To remain. Written by the coordinator when it
// splits a phase, by a thief when it lowers To, and by the owner with its
// checkpoints.
type taskRecord struct {
	V      int    `json:"v"`
	Job    JobID  `json:"job"`
	Phase  int    `json:"phase"`
	Scope  string `json:"scope,omitempty"`
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Cursor uint64 `json:"cursor"`
	// Done: Cursor reached To. Failed: why an item failed the task.
	Done   bool   `json:"done,omitempty"`
	Failed string `json:"failed,omitempty"`
	// Counters summed over the items processed in this task (an item
	// processed again after a crash counts twice; a steal never splits
	// inside a holder's reservation, so it never repeats an item).
	Items  int64  `json:"items"`
	Bytes  int64  `json:"bytes"`
	Errors int64  `json:"errors"`
	Note   string `json:"note,omitempty"`
	// Node is the node that wrote the last checkpoint; Updated its time.
	Node    string    `json:"node,omitempty"`
	Updated time.Time `json:"updated,omitzero"`
	// Version 2. Affinity is the only node that may claim or steal the
	// task (TaskSpec.Node); Counts and Summary sum ItemResult's.
	Affinity string           `json:"affinity,omitempty"`
	Counts   map[string]int64 `json:"counts,omitempty"`
	Summary  string           `json:"summary,omitempty"`
	// Version 3. Reserved is the end of the items its holder has listed
	// (Cursor <= key < Reserved may be in progress): a steal splits at or
	// after it, and the holder writes it before it processes a batch.
	Reserved uint64 `json:"reserved,omitempty"`
	// Version 4. Serial: never split by a steal (TaskSpec.Serial).
	Serial bool `json:"serial,omitempty"`
}

// needsV2 reports whether the record uses a version-2 field.
func (t *taskRecord) needsV2() bool {
	return t.Affinity != "" || len(t.Counts) > 0 || t.Summary != ""
}

// claimableBy reports whether node may claim or steal the task.
func (t *taskRecord) claimableBy(node string) bool {
	return t.Affinity == "" || t.Affinity == node
}

func (t *taskRecord) suffix() string { return taskSuffix(t.Job, t.Phase, t.Scope, t.From) }

// remaining is the width of the range not yet processed.
func (t *taskRecord) remaining() uint64 {
	if t.Done || t.Cursor >= t.To {
		return 0
	}
	return t.To - t.Cursor
}

// ownerRecord says who holds a task; written under the holder's lease.
type ownerRecord struct {
	V       int       `json:"v"`
	Node    string    `json:"node"`
	Claimed time.Time `json:"claimed"`
}

// settingsRecord is the engine's cluster-wide settings.
type settingsRecord struct {
	V int `json:"v"`
	Settings
}

// typeRecord overrides a type's defaults. Disabled (not Enabled) so that a
// missing field means enabled; Schedule nil means the type's default
// schedule (ScheduleDefaulter), a pointer to "" no schedule.
type typeRecord struct {
	V        int     `json:"v"`
	Priority int     `json:"priority,omitempty"`
	Policy   string  `json:"policy,omitempty"`
	Disabled bool    `json:"disabled,omitempty"`
	Schedule *string `json:"schedule,omitempty"`
}

// scheduleRecord is the coordinator's state for one type's schedule. The
// schedule next fires at its first time after Since. Written when the
// coordinator first sees the schedule (Since = then: a new schedule does
// not fire for times before it was set), and at each firing (Since = the
// time of the firing, so that runs missed while no coordinator checked
// fire once, not once each). Deleted when the type has no schedule.
type scheduleRecord struct {
	V int `json:"v"`
	// Schedule is the expression the record is for; the coordinator
	// starts over (Since = now) when the type's schedule differs.
	Schedule string    `json:"schedule"`
	Since    time.Time `json:"since"`
	// Fired is the time of the last firing, Job the job it started (0:
	// none) and Outcome what came of it, as recorded in its event.
	Fired   time.Time `json:"fired,omitzero"`
	Job     JobID     `json:"job,omitempty"`
	Outcome string    `json:"outcome,omitempty"`
}

// lowSpaceRecord marks low-space mode.
type lowSpaceRecord struct {
	V      int       `json:"v"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// progressRecord is a running job's progress in its current phase, in
// units of the phase's ranges.
type progressRecord struct {
	V       int       `json:"v"`
	Phase   int       `json:"phase"`
	Done    uint64    `json:"done"`
	Total   uint64    `json:"total"`
	Rate    float64   `json:"rate"` // units per second over the last minute
	Updated time.Time `json:"updated"`
}

// nodeRecord is a director's published status.
type nodeRecord struct {
	V int `json:"v"`
	NodeStatus
}

// eventRecord is one entry of the event log; written by RecordEvent,
// rewritten only by the callbacks worker (to append a callback's run),
// deleted when it falls out of retention.
type eventRecord struct {
	V int `json:"v"`
	Event
}

// callbackRecord is a callback (AddCallback).
type callbackRecord struct {
	V int `json:"v"`
	Callback
}

// callbackCursorRecord is where the callbacks worker is in the event log:
// every callback of events 1..Last has run (or was skipped); Node is the
// coordinator that wrote it, Updated when.
type callbackCursorRecord struct {
	V       int       `json:"v"`
	Last    uint64    `json:"last"`
	Node    string    `json:"node"`
	Updated time.Time `json:"updated"`
}

// versioned is implemented by every record; encode stamps the version.
type versioned interface{ setVersion() }

func (r *jobRecord) setVersion()      { r.V = baseRecordVersion }
func (r *ownerRecord) setVersion()    { r.V = baseRecordVersion }
func (r *settingsRecord) setVersion() { r.V = baseRecordVersion }
func (r *typeRecord) setVersion()     { r.V = baseRecordVersion }
func (r *scheduleRecord) setVersion() { r.V = baseRecordVersion }
func (r *lowSpaceRecord) setVersion() { r.V = baseRecordVersion }
func (r *progressRecord) setVersion() { r.V = baseRecordVersion }
func (r *nodeRecord) setVersion()     { r.V = baseRecordVersion }
func (r *eventRecord) setVersion()    { r.V = baseRecordVersion }

func (r *callbackRecord) setVersion()       { r.V = baseRecordVersion }
func (r *callbackCursorRecord) setVersion() { r.V = baseRecordVersion }

func (r *taskRecord) setVersion() {
	r.V = baseRecordVersion
	switch {
	case r.Serial:
		r.V = 4
	case r.Reserved != 0:
		r.V = 3
	case r.needsV2():
		r.V = 2
	}
}

// encode stamps r's version (see Migration above) and marshals it.
func encode(r versioned) string {
	r.setVersion()
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("job: encode %T: %v", r, err)) // only plain structs are encoded
	}
	return string(b)
}

// decode unmarshals the record at key, refusing one newer than
// RecordVersion (ErrNewerFormat) or one that does not parse (ErrCorrupt).
func decode(key string, b []byte, into versioned) error {
	var hdr struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		return fmt.Errorf("%w: key %s: %v", ErrCorrupt, key, err)
	}
	if hdr.V == nil || *hdr.V < 1 {
		return fmt.Errorf("%w: key %s: no record version", ErrCorrupt, key)
	}
	if *hdr.V > RecordVersion {
		return fmt.Errorf("%w: key %s has record version %d, this weft reads up to %d: upgrade weft on this node", ErrNewerFormat, key, *hdr.V, RecordVersion)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%w: key %s: %v", ErrCorrupt, key, err)
	}
	if j, ok := into.(*jobRecord); ok && !j.State.valid() {
		return fmt.Errorf("%w: key %s: unknown state %q", ErrCorrupt, key, j.State)
	}
	return nil
}
