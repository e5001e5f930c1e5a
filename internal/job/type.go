package job

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Type is a kind of job (repair, collect, ...): a name, the exclusion sets
// it belongs to, and ordered phases. Implementations live in package jobs
// and are registered on every node's Engine with Register; a Type must be
// safe for concurrent use and hold no per-job state (that lives in etcd).
//
// A Type may also implement Defaulter (its default priority and policy) and
// SpaceSaver (it frees space, so it keeps running in low-space mode), and
// ParamChecker (it validates Options.Params at Submit).
type Type interface {
	// Name is the type's name as users type it ("repair"): 1-32 of a-z,
	// 0-9, '-' and '_'.
	Name() string
	// Set is the exclusion sets the type's jobs belong to.
	Set() ExclusionSet
	// Phases is the type's phases in the order they run; at least one. It
	// must return the same phases (names and order) on every node.
	Phases() []Phase
}

// Phase is one step of a job type. A phase's work is a set of tasks, each a
// range [From, To) over an ordered numeric domain (LINs for a LIN scan, a
// drive's hashed block-id space for a drive scan, 0..n for a list) within
// an opaque scope (e.g. a drive id); a task is the sequence of items the
// phase lists in its range. The engine calls Split once per run of the phase
// (on the coordinator), then Items and Process on whichever nodes claim the
// tasks, possibly on a range narrower than Split produced (a steal splits a
// task in two).
type Phase interface {
	// Name is the phase's name, shown in reports ("mark", "sweep").
	Name() string
	// Split returns the phase's tasks. Ranges of one scope must not
	// overlap; an empty result finishes the phase at once. Split more
	// tasks than job.Parallelism suggests rather than fewer: idle workers
	// steal, but only down to a minimum range. An error fails the job.
	Split(ctx context.Context, env Env, job *Job) ([]TaskSpec, error)
	// Items lists up to limit item keys k with from <= k < to in scope, in
	// increasing order. Fewer than limit means the range is exhausted. An
	// item a listing from any lower from includes must be listed from its
	// own key too: a steal splits a task at an item's key (the holder
	// drops the items at or past it, the thief lists from it), so an item
	// listed only from below its key would be processed by nobody. An
	// error is retried, then fails the job.
	Items(ctx context.Context, env Env, scope string, from, to uint64, limit int) ([]uint64, error)
	// Process handles one item. It must be idempotent: after a crash, a
	// steal or a pause an item may be processed again (never skipped). A
	// returned error is retried, then fails the phase and the job with the
	// error in the report; a finding that is a result rather than a failure
	// (a checksum mismatch found by a scan) goes in ItemResult.Errors. When
	// ctx is cancelled the engine is pausing or stopping: return promptly;
	// the item will be processed again later.
	Process(ctx context.Context, env Env, job *Job, scope string, item uint64) (ItemResult, error)
}

// TaskSpec is one task as Split returns it: items From <= k < To of Scope.
type TaskSpec struct {
	Scope    string
	From, To uint64
	// Node, when set, is the only node that may run the task (affinity):
	// only that node's director claims it, and only that node's workers
	// steal from it (the stolen half keeps the affinity). A drive scan
	// pins a drive's tasks to the node serving the drive so that no block
	// crosses the network. While the node is down the task waits: nobody
	// else takes it, and the phase ends only once the node is back and has
	// run it (a down node's drives are down, and repair, not the scan,
	// handles them; Split should skip tasks for nodes it knows are down).
	Node string
	// Serial: the task is never split by a steal; one worker goes through
	// its items in key order, reserving whole listed batches. For a pass
	// whose items decide from what the items before them did (a
	// rebalance's settle passes follow a running view of the drives' usage
	// that their own moves update): two workers with two views would both
	// move the same surplus.
	Serial bool
}

// ItemResult is what processing one item yielded. The engine sums results
// per task and per phase; Note keeps the last non-empty note (at most
// maxNote bytes).
type ItemResult struct {
	// Items counts what the item stood for (usually 1; a directory may
	// stand for its entries).
	Items int64
	// Bytes counts bytes read or moved.
	Bytes int64
	// Errors counts findings the type reports without failing (mismatches
	// found by a scan, files it could not repair but will retry later).
	Errors int64
	// Note is a short human-readable remark for the report.
	Note string
	// Counts are named counters the type defines ("bad", "fixed"), summed
	// per task and, in the phase report, per scope (PhaseReport.Scopes):
	// a type that reports per drive returns them from a phase whose
	// scopes are drives. Names are at most maxCountName bytes.
	Counts map[string]int64
	// Summary is a longer text (a table) for the phase report, at most
	// maxSummary bytes; the last non-empty one is kept as
	// PhaseReport.Summary. A phase that writes a summary usually has one
	// item (a report phase).
	Summary string
}

// add sums an item's result into a task's counters.
func (t *taskRecord) add(o ItemResult) {
	t.Items += o.Items
	t.Bytes += o.Bytes
	t.Errors += o.Errors
	if o.Note != "" {
		t.Note = clip(o.Note, maxNote)
	}
	for k, v := range o.Counts {
		if t.Counts == nil {
			t.Counts = map[string]int64{}
		}
		t.Counts[clip(k, maxCountName)] += v
	}
	if o.Summary != "" {
		t.Summary = clip(o.Summary, maxSummary)
	}
}

// maxNote bounds a note kept in a task record or report.
const maxNote = 200

// maxSummary bounds a summary kept in a task record or report; it keeps a
// per-drive table of a few hundred drives well within etcd's value limit.
const maxSummary = 32 << 10

// maxCountName bounds a counter name.
const maxCountName = 32

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Job is what phases see of the job they work for. They must not modify it.
type Job struct {
	ID   JobID
	Type string
	// Params are the job's parameters as submitted (path, dry-run, ...).
	Params map[string]string
	// Phase is the index of the running phase in Type.Phases().
	Phase int
	// Parallelism is the number of tasks the engine suggests Split make
	// (live nodes × workers × a factor); Split may make more or fewer.
	Parallelism int
	// Created is when the job was submitted: a phase can tell what existed
	// before the job from what appeared while it ran.
	Created time.Time
	// Reports are the reports of the phases before Phase (ended), so that
	// a report phase can sum what earlier phases found (their
	// PhaseReport.Scopes and counters).
	Reports []PhaseReport
}

// Env is what a phase gets from the node it runs on. The engine does not
// look inside: internal/server fills a value that implements Env and the
// richer interface job types assert (defined beside them in package jobs:
// metadata, block client, ...), which keeps this package free of domain
// imports.
type Env interface {
	// Node is the name of the node making the call.
	Node() string
	// Log is the logger phases log to.
	Log() *slog.Logger
}

// ExclusionSet is a bit set of exclusion sets. Jobs whose sets intersect in
// Mark never run together; jobs sharing Restripe run together unless the
// restripe_exclusive setting says otherwise.
type ExclusionSet uint8

const (
	// SetNone: the job excludes nothing (treedelete).
	SetNone ExclusionSet = 0
	// SetMark: the job marks referenced blocks; one at a time.
	SetMark ExclusionSet = 1 << iota
	// SetRestripe: the job moves blocks.
	SetRestripe
)

// String returns "none", "mark", "restripe" or "mark+restripe".
func (s ExclusionSet) String() string {
	var parts []string
	if s&SetMark != 0 {
		parts = append(parts, "mark")
	}
	if s&SetRestripe != 0 {
		parts = append(parts, "restripe")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// ParseExclusionSet is String's inverse ("mark+restripe", "none", "").
func ParseExclusionSet(s string) (ExclusionSet, error) {
	var set ExclusionSet
	if s == "" || s == "none" {
		return SetNone, nil
	}
	for p := range strings.SplitSeq(s, "+") {
		switch p {
		case "mark":
			set |= SetMark
		case "restripe":
			set |= SetRestripe
		default:
			return 0, fmt.Errorf("%w: exclusion set %q: use none, mark, restripe or mark+restripe", ErrInvalid, s)
		}
	}
	return set, nil
}

// Defaulter is implemented by a Type whose jobs default to a priority
// other than 5 or a policy other than "low" (zero values keep those);
// ModifyType overrides both cluster-wide.
type Defaulter interface {
	Defaults() (priority int, policy string)
}

// ScheduleDefaulter is implemented by a Type that runs on a schedule
// unless an administrator changes it: DefaultSchedule returns a cron
// expression (ParseCron; Register refuses a bad one). ModifyType
// overrides it cluster-wide, "" for none.
type ScheduleDefaulter interface {
	DefaultSchedule() string
}

// defaultSchedule returns t's default schedule, "" for none.
func defaultSchedule(t Type) string {
	if d, ok := t.(ScheduleDefaulter); ok {
		return d.DefaultSchedule()
	}
	return ""
}

// SpaceSaver is implemented by a Type whose jobs free space; FreesSpace
// true keeps them running in low-space mode.
type SpaceSaver interface {
	FreesSpace() bool
}

// ParamChecker is implemented by a Type that validates parameters; Submit
// returns its error (wrap ErrInvalid and name the parameter).
type ParamChecker interface {
	CheckParams(params map[string]string) error
}

// ParamLister is implemented by a Type that names the parameters it takes:
// Submit refuses any other (besides ParamReason, which every type takes),
// so that a misspelt parameter ("drive=" for "drives=") is an error, not a
// job that silently ignores it.
type ParamLister interface {
	ParamNames() []string
}

// ParamValidator is implemented by a Type whose parameters name things of
// the cluster (drives, pools, paths): Submit calls it with the submitting
// node's Env after CheckParams, so that a job naming something that does
// not exist is refused when it is submitted rather than failing later.
// Errors wrap ErrInvalid and name the parameter and the value; an error
// that does not (the control plane did not answer) is returned as it is.
// Schedules do not call it: a scheduled job's parameters are the type's.
type ParamValidator interface {
	ValidateParams(ctx context.Context, env Env, params map[string]string) error
}

// ParamReason is the parameter every job type takes: free text saying why
// the job was started (events set it), shown with the job.
const ParamReason = "reason"

// Limits on a job's parameters, checked by Submit for every type.
const (
	// MaxParams is the most parameters a job may have.
	MaxParams = 32
	// MaxParamValue is the longest parameter value, in bytes.
	MaxParamValue = 4096
)

// SplitRange cuts [from, to) of scope into n tasks of nearly equal width
// (fewer when the range is narrower than n). It is the usual Split of a
// phase over a uniform domain.
func SplitRange(scope string, from, to uint64, n int) []TaskSpec {
	if to <= from {
		return nil
	}
	if n < 1 {
		n = 1
	}
	width := to - from
	if uint64(n) > width {
		n = int(width)
	}
	out := make([]TaskSpec, 0, n)
	step, rem := width/uint64(n), width%uint64(n)
	lo := from
	for i := range n {
		hi := lo + step
		if uint64(i) < rem {
			hi++
		}
		out = append(out, TaskSpec{Scope: scope, From: lo, To: hi})
		lo = hi
	}
	return out
}

// validName reports whether s is a valid name of a job type or of a job
// parameter: 1-32 characters of a-z, 0-9, '-' and '_'.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
