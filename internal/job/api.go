package job

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The public calls behind the admin API and the CLI. Any node serves them:
// they read and write etcd, and the coordinator and directors react. None
// needs Start, except that a job only runs while some node's engine runs.

// Options are a job's settings at Submit. Zero values take the type's
// settings (TypeSettings).
type Options struct {
	// Priority is 1 (highest) to 10.
	Priority int
	// Policy names the impact policy the Throttle applies.
	Policy string
	// Params are the job type's parameters ("path", "dry-run", ...).
	Params map[string]string
}

// Submit queues a job of the named type and returns its id. It refuses an
// unregistered type (ErrUnknownType), a disabled one (ErrTypeDisabled), a
// priority outside 1-10 (ErrBadPriority), a policy the Throttle does not
// know (ErrUnknownPolicy) and parameters the type refuses. Each call
// queues a new job.
func (e *Engine) Submit(ctx context.Context, typeName string, o Options) (JobID, error) {
	rec, err := e.newJob(ctx, typeName, o)
	if err != nil {
		return 0, err
	}
	if pv, ok := e.typeOf(typeName).(ParamValidator); ok {
		if err := pv.ValidateParams(ctx, e.cfg.Env, o.Params); err != nil {
			return 0, err
		}
	}
	for {
		ok, err := e.insertJob(ctx, &rec, nil)
		if err != nil {
			return 0, err
		}
		if ok {
			return rec.ID, nil
		}
	}
}

// newJob validates a submission as Submit does and returns the queued
// job's record, without an id.
func (e *Engine) newJob(ctx context.Context, typeName string, o Options) (jobRecord, error) {
	typ := e.typeOf(typeName)
	if typ == nil {
		return jobRecord{}, fmt.Errorf("%w: %q: known types are %s", ErrUnknownType, typeName, strings.Join(e.typeNames(), ", "))
	}
	ts, err := e.typeSettings(ctx, typ)
	if err != nil {
		return jobRecord{}, err
	}
	return e.newJobWith(typ, ts, o)
}

// newJobWith is newJob with the type's settings already read.
func (e *Engine) newJobWith(typ Type, ts TypeSettings, o Options) (jobRecord, error) {
	typeName := typ.Name()
	if !ts.Enabled {
		return jobRecord{}, fmt.Errorf("%w: %s: enable it first (weft job types modify %s --enabled true)", ErrTypeDisabled, typeName, typeName)
	}
	if o.Priority == 0 {
		o.Priority = ts.Priority
	}
	if o.Policy == "" {
		o.Policy = ts.Policy
	}
	if err := checkPriority(o.Priority); err != nil {
		return jobRecord{}, err
	}
	if err := e.checkPolicy(o.Policy); err != nil {
		return jobRecord{}, err
	}
	if err := checkParams(typ, o.Params); err != nil {
		return jobRecord{}, err
	}
	if pc, ok := typ.(ParamChecker); ok {
		if err := pc.CheckParams(o.Params); err != nil {
			return jobRecord{}, err
		}
	}
	t := now()
	rec := jobRecord{Type: typeName, State: Queued, Priority: o.Priority, Policy: o.Policy,
		Params: cloneParams(o.Params), Created: t, Changed: t}
	for _, p := range typ.Phases() {
		rec.Phases = append(rec.Phases, PhaseReport{Name: p.Name(), State: PhasePending})
	}
	return rec, nil
}

// insertJob allocates the next job id to rec and writes it. extra, if not
// nil, adds compares and operations (built from the id) to the
// transaction. It returns false, writing nothing, when a compare failed: a
// concurrent Submit took the id, or one of extra's compares failed.
func (e *Engine) insertJob(ctx context.Context, rec *jobRecord, extra func(JobID) ([]clientv3.Cmp, []clientv3.Op)) (bool, error) {
	resp, err := e.cfg.Client.Get(ctx, keySeq)
	if err != nil {
		return false, fmt.Errorf("job: read job id counter: %w", err)
	}
	var last uint64
	var rev int64
	if len(resp.Kvs) == 1 {
		if last, err = strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64); err != nil {
			return false, fmt.Errorf("%w: key %s: %v", ErrCorrupt, keySeq, err)
		}
		rev = resp.Kvs[0].ModRevision
	}
	rec.ID = JobID(last + 1)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(keySeq), "=", rev)}
	ops := []clientv3.Op{clientv3.OpPut(keySeq, rec.ID.String()), clientv3.OpPut(jobKey(rec.ID), encode(rec))}
	if extra != nil {
		c, o := extra(rec.ID)
		cmps, ops = append(cmps, c...), append(ops, o...)
	}
	tr, err := e.cfg.Client.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, fmt.Errorf("job: submit %s job: %w", rec.Type, err)
	}
	if tr.Succeeded {
		e.log.Info("job submitted", "job", rec.ID, "type", rec.Type, "priority", rec.Priority, "policy", rec.Policy)
	}
	return tr.Succeeded, nil
}

func checkPriority(p int) error {
	if p < 1 || p > 10 {
		return fmt.Errorf("%w: %d: use 1 (highest) to 10", ErrBadPriority, p)
	}
	return nil
}

func (e *Engine) checkPolicy(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty policy name", ErrUnknownPolicy)
	}
	if pc, ok := e.cfg.Throttle.(PolicyChecker); ok && !pc.KnownPolicy(name) {
		return fmt.Errorf("%w: %q (weft job policy list shows them)", ErrUnknownPolicy, name)
	}
	return nil
}

// JobView is a job as shown to users: its record with the current phase's
// report and progress computed from live checkpoints.
type JobView struct {
	ID       JobID             `json:"id"`
	Type     string            `json:"type"`
	State    State             `json:"state"`
	Priority int               `json:"priority"`
	Policy   string            `json:"policy"`
	Params   map[string]string `json:"params,omitempty"`
	Created  time.Time         `json:"created"`
	Started  time.Time         `json:"started,omitzero"`
	Ended    time.Time         `json:"ended,omitzero"`
	// Reason says why the job is in its state: the failure, the job that
	// preempted it, the exclusion set it waits for, low-space mode.
	Reason string `json:"reason,omitempty"`
	// Phase is the index of the current (or last) phase in Phases.
	Phase  int           `json:"phase"`
	Phases []PhaseReport `json:"phases"`
	// Progress is the current phase's progress; nil when it has no tasks
	// (not started, between phases, ended).
	Progress *Progress `json:"progress,omitempty"`
}

// Get returns a job; ErrNotFound when there is none (ids of ended jobs
// beyond retention are gone).
func (e *Engine) Get(ctx context.Context, id JobID) (JobView, error) {
	j, err := e.getJob(ctx, id)
	if err != nil {
		return JobView{}, err
	}
	return e.view(ctx, j.rec)
}

// List returns every job kept, oldest first.
func (e *Engine) List(ctx context.Context) ([]JobView, error) {
	jobs, err := e.listJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]JobView, 0, len(jobs))
	for _, j := range jobs {
		v, err := e.view(ctx, j.rec)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// view joins a job record with its current phase's live tasks and rate.
func (e *Engine) view(ctx context.Context, r jobRecord) (JobView, error) {
	v := JobView{ID: r.ID, Type: r.Type, State: r.State, Priority: r.Priority, Policy: r.Policy,
		Params: r.Params, Created: r.Created, Started: r.Started, Ended: r.Ended, Reason: r.Reason,
		Phase: r.Phase, Phases: r.Phases}
	if r.State.Terminal() || !r.PhaseSplit || r.Phase >= len(r.Phases) {
		return v, nil
	}
	pv, err := e.listPhase(ctx, r.ID, r.Phase)
	if err != nil {
		return v, err
	}
	v.Phases = append([]PhaseReport(nil), r.Phases...)
	v.Phases[r.Phase] = report(r.Phases[r.Phase], pv.tasks)
	done, total := measure(tasksOf(pv.tasks))
	var rate float64
	if resp, err := e.cfg.Client.Get(ctx, progressKey(r.ID)); err == nil && len(resp.Kvs) == 1 {
		var p progressRecord
		if decode(progressKey(r.ID), resp.Kvs[0].Value, &p) == nil && p.Phase == r.Phase && r.State == Running {
			rate = p.Rate
		}
	}
	p := progressOf(r.Phase, done, total, rate)
	v.Progress = &p
	return v, nil
}

// Pause pauses a queued, running or system-paused job: its managers stop
// at their next item, checkpoint and release their tasks. Resume continues
// it from those checkpoints. Pausing a paused job is a no-op; other states
// are ErrBadTransition.
func (e *Engine) Pause(ctx context.Context, id JobID) error {
	_, err := e.updateJob(ctx, id, func(r *jobRecord) error {
		if r.State == Paused {
			return errNoChange
		}
		if !CanTransition(r.State, Paused) {
			return fmt.Errorf("%w: job %d is %s: only queued, running or system-paused jobs can be paused", ErrBadTransition, id, r.State)
		}
		r.State, r.Changed, r.Reason = Paused, now(), "paused by user"
		return nil
	}, nil)
	return err
}

// Resume queues a paused job again; the coordinator runs it when a slot is
// free. A job paused by the system resumes by itself (ErrBadTransition).
func (e *Engine) Resume(ctx context.Context, id JobID) error {
	_, err := e.updateJob(ctx, id, func(r *jobRecord) error {
		switch r.State {
		case Queued, Running:
			return errNoChange
		case SystemPaused:
			return fmt.Errorf("%w: job %d is paused by the system (%s): it resumes by itself", ErrBadTransition, id, r.Reason)
		case Paused:
			r.State, r.Changed, r.Reason = Queued, now(), ""
			return nil
		}
		return fmt.Errorf("%w: job %d is %s: only paused jobs can be resumed", ErrBadTransition, id, r.State)
	}, nil)
	return err
}

// Cancel ends a job that has not ended: it goes to cancelling, and to
// cancelled once its managers have checkpointed (the report keeps what was
// done). Cancelling a cancelling job is a no-op; an ended one is
// ErrBadTransition.
func (e *Engine) Cancel(ctx context.Context, id JobID) error {
	_, err := e.updateJob(ctx, id, func(r *jobRecord) error {
		if r.State == Cancelling {
			return errNoChange
		}
		if !CanTransition(r.State, Cancelling) {
			return fmt.Errorf("%w: job %d has already ended (%s)", ErrBadTransition, id, r.State)
		}
		r.State, r.Changed, r.Reason = Cancelling, now(), "cancel requested"
		return nil
	}, nil)
	return err
}

// Modify changes a job's priority (0: unchanged) and impact policy ("":
// unchanged). The scheduler and the managers' throttles see the change
// within a Tick and an AllowanceInterval. Errors: ErrBadPriority,
// ErrUnknownPolicy, ErrNotFound, ErrBadTransition (the job ended).
func (e *Engine) Modify(ctx context.Context, id JobID, priority int, policy string) error {
	if priority != 0 {
		if err := checkPriority(priority); err != nil {
			return err
		}
	}
	if policy != "" {
		if err := e.checkPolicy(policy); err != nil {
			return err
		}
	}
	_, err := e.updateJob(ctx, id, func(r *jobRecord) error {
		if r.State.Terminal() {
			return fmt.Errorf("%w: job %d has ended (%s)", ErrBadTransition, id, r.State)
		}
		if (priority == 0 || priority == r.Priority) && (policy == "" || policy == r.Policy) {
			return errNoChange
		}
		if priority != 0 {
			r.Priority = priority
		}
		if policy != "" {
			r.Policy = policy
		}
		return nil
	}, nil)
	return err
}

// TypeView describes a registered job type and its settings.
type TypeView struct {
	Name       string       `json:"name"`
	Set        ExclusionSet `json:"-"`
	SetName    string       `json:"set"`
	Phases     []string     `json:"phases"`
	FreesSpace bool         `json:"frees_space"`
	TypeSettings
	// DefaultSchedule is the type's own schedule ("" none), which a fresh
	// cluster uses.
	DefaultSchedule string `json:"default_schedule,omitempty"`
	// NextRun is when the schedule next fires (zero: no schedule, or the
	// type is disabled); a time in the past means it is due and fires
	// within Config.ScheduleInterval of a coordinator.
	NextRun time.Time `json:"next_run,omitzero"`
	// LastRun is when it last fired, LastJob the job that started then
	// (0: none; LastOutcome says why).
	LastRun     time.Time `json:"last_run,omitzero"`
	LastJob     JobID     `json:"last_job,omitempty"`
	LastOutcome string    `json:"last_outcome,omitempty"`
}

// Types lists the registered job types with their settings, by name.
func (e *Engine) Types(ctx context.Context) ([]TypeView, error) {
	var out []TypeView
	scheds, err := e.scheduleRecords(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range e.typeNames() {
		t := e.typeOf(name)
		ts, err := e.typeSettings(ctx, t)
		if err != nil {
			return nil, err
		}
		v := TypeView{Name: name, Set: t.Set(), SetName: t.Set().String(), TypeSettings: ts, DefaultSchedule: defaultSchedule(t)}
		if st, ok := scheds[name]; ok {
			v.LastRun, v.LastJob, v.LastOutcome = st.rec.Fired, st.rec.Job, st.rec.Outcome
		}
		v.NextRun = nextRun(ts, scheds[name].rec, e.cfg.Now())
		for _, p := range t.Phases() {
			v.Phases = append(v.Phases, p.Name())
		}
		if s, ok := t.(SpaceSaver); ok {
			v.FreesSpace = s.FreesSpace()
		}
		out = append(out, v)
	}
	return out, nil
}

// ModifyType stores a type's cluster-wide settings: the priority and
// policy of jobs submitted without them, whether Submit accepts the type
// (jobs already submitted are not affected), and its schedule ("" none;
// the type's default schedule is stored as "follow the default"). A new
// or changed schedule fires first at its first time after the
// coordinator sees it, within Config.ScheduleInterval. Errors:
// ErrUnknownType, ErrBadPriority, ErrUnknownPolicy, ErrInvalid (the
// schedule, with ParseCron's reason).
func (e *Engine) ModifyType(ctx context.Context, name string, ts TypeSettings) error {
	typ := e.typeOf(name)
	if typ == nil {
		return fmt.Errorf("%w: %q: known types are %s", ErrUnknownType, name, strings.Join(e.typeNames(), ", "))
	}
	if err := checkPriority(ts.Priority); err != nil {
		return err
	}
	if err := e.checkPolicy(ts.Policy); err != nil {
		return err
	}
	rec := typeRecord{Priority: ts.Priority, Policy: ts.Policy, Disabled: !ts.Enabled}
	sched := ""
	if strings.TrimSpace(ts.Schedule) != "" {
		c, err := ParseCron(ts.Schedule)
		if err != nil {
			return fmt.Errorf("job type %s: %w", name, err)
		}
		sched = c.String()
	}
	if sched != defaultSchedule(typ) {
		rec.Schedule = &sched
	}
	ops := []clientv3.Op{clientv3.OpPut(typeKey(name), encode(&rec))}
	// Arm a new schedule now rather than at the coordinator's next check,
	// so that its first run is the first time after this call.
	st, err := e.scheduleRecord(ctx, name)
	if err != nil {
		return err
	}
	switch {
	case sched == "" && st.modRev != 0:
		ops = append(ops, clientv3.OpDelete(schedKey(name)))
	case sched != "" && (st.modRev == 0 || st.rec.Schedule != sched):
		next := st.rec
		next.Schedule, next.Since = sched, e.cfg.Now()
		ops = append(ops, clientv3.OpPut(schedKey(name), encode(&next)))
	}
	if _, err := e.cfg.Client.Txn(ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("job: write settings of job type %s: %w", name, err)
	}
	return nil
}

// Status is the engine's cluster-wide status.
type Status struct {
	// Coordinator is the coordinator's node name ("" while none is
	// elected).
	Coordinator string `json:"coordinator"`
	// LowSpace is set in low-space mode, with its reason.
	LowSpace       bool      `json:"low_space"`
	LowSpaceReason string    `json:"low_space_reason,omitempty"`
	LowSpaceSince  time.Time `json:"low_space_since,omitzero"`
	Settings       Settings  `json:"settings"`
	// Nodes are the live nodes' directors, by name.
	Nodes []NodeStatus `json:"nodes"`
}

// Status returns the coordinator, low-space mode, settings and each live
// node's managers (as last published, up to StatusInterval old).
func (e *Engine) Status(ctx context.Context) (Status, error) {
	var st Status
	resp, err := e.cfg.Client.Get(ctx, electionPrefix+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return st, fmt.Errorf("job: read coordinator: %w", err)
	}
	if len(resp.Kvs) == 1 {
		st.Coordinator = string(resp.Kvs[0].Value)
	}
	low, err := e.lowSpace(ctx)
	if err != nil {
		return st, err
	}
	if low != nil {
		st.LowSpace, st.LowSpaceReason, st.LowSpaceSince = true, low.Reason, low.Since
	}
	if st.Settings, err = e.Settings(ctx); err != nil {
		return st, err
	}
	nodes, err := e.cfg.Client.Get(ctx, prefixNodes, clientv3.WithPrefix())
	if err != nil {
		return st, fmt.Errorf("job: read node status: %w", err)
	}
	for _, kv := range nodes.Kvs {
		var r nodeRecord
		if err := decode(string(kv.Key), kv.Value, &r); err != nil {
			return st, err
		}
		st.Nodes = append(st.Nodes, r.NodeStatus)
	}
	return st, nil
}

// Engine modes, as Mode reports them.
const (
	ModeNormal   = "normal"
	ModeLowSpace = "low-space"
)

// Mode is the engine's cluster-wide mode: ModeNormal, or ModeLowSpace
// since a time and for a reason.
type Mode struct {
	Mode   string    `json:"mode"`
	Since  time.Time `json:"since,omitzero"`
	Reason string    `json:"reason,omitempty"`
}

// String is "normal" or "low-space since <time>: <reason>".
func (m Mode) String() string {
	if m.Mode != ModeLowSpace {
		return m.Mode
	}
	return fmt.Sprintf("%s since %s: %s", m.Mode, m.Since.Local().Format("2006-01-02 15:04:05"), m.Reason)
}

// Mode returns the engine's mode: one etcd read.
func (e *Engine) Mode(ctx context.Context) (Mode, error) {
	low, err := e.lowSpace(ctx)
	if err != nil {
		return Mode{}, err
	}
	if low == nil {
		return Mode{Mode: ModeNormal}, nil
	}
	return Mode{Mode: ModeLowSpace, Since: low.Since, Reason: low.Reason}, nil
}

// checkParams applies the limits every job's parameters obey: at most
// MaxParams, names of 1-32 of a-z, 0-9, '-', '_', values of valid UTF-8
// without control characters and at most MaxParamValue bytes, and, for a
// ParamLister, only the names it lists (and ParamReason).
func checkParams(typ Type, params map[string]string) error {
	if len(params) > MaxParams {
		return fmt.Errorf("%w: %s: %d parameters; a job takes at most %d", ErrInvalid, typ.Name(), len(params), MaxParams)
	}
	var known []string
	if pl, ok := typ.(ParamLister); ok {
		known = slices.Concat(pl.ParamNames(), []string{ParamReason})
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		if !validName(k) {
			return fmt.Errorf("%w: %s: parameter name %q: use 1-32 of a-z, 0-9, '-', '_'", ErrInvalid, typ.Name(), k)
		}
		if known != nil && !slices.Contains(known, k) {
			return fmt.Errorf("%w: %s takes no parameter %q; its parameters are %s", ErrInvalid, typ.Name(), k, strings.Join(known, ", "))
		}
		if len(v) > MaxParamValue {
			return fmt.Errorf("%w: %s: parameter %s is %d bytes long; at most %d", ErrInvalid, typ.Name(), k, len(v), MaxParamValue)
		}
		if !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
			return fmt.Errorf("%w: %s: parameter %s=%q holds control characters or invalid UTF-8", ErrInvalid, typ.Name(), k, v)
		}
	}
	return nil
}
