package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// coordinator is the elected node's scheduler. Every step reads its state
// from etcd and writes with a transaction fenced on its election key, so a
// successor continues from whatever was last committed, a repeated step is
// harmless, and a deposed coordinator can write nothing:
//
//   - split the current phase of a running job into tasks (leftovers of an
//     interrupted split are deleted first);
//   - end a phase when all its tasks are done (sum the report, delete the
//     tasks, move to the next phase or mark the job succeeded), or fail the
//     job when a task failed;
//   - finish a cancel once managers have released their tasks;
//   - schedule: start, preempt and resume jobs (schedule.go);
//   - every ScheduleInterval, submit the jobs whose type's schedule is
//     due (cron_fire.go);
//   - sample progress; delete ended jobs beyond retention.
//
// Only the coordinator's goroutine touches it.
type coordinator struct {
	e        *Engine
	fence    []clientv3.Cmp
	rates    map[JobID]*rateWindow
	progress map[JobID]time.Time // last progress write
	// cronAt is when schedules are next checked (Config.Now's clock);
	// zero: at the first reconcile.
	cronAt time.Time
}

func newCoordinator(e *Engine, leaderKey string, leaderRev int64) *coordinator {
	return &coordinator{e: e,
		fence:    []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(leaderKey), "=", leaderRev)},
		rates:    map[JobID]*rateWindow{},
		progress: map[JobID]time.Time{}}
}

// run reconciles on changes under Prefix and every Tick, until ctx ends
// (nil), the lease is lost or another node became coordinator. Changes
// that may end a phase or change a job (urgent) are acted on at once;
// others at most once per gap (a quarter Tick) after the last reconcile.
func (c *coordinator) run(ctx context.Context, lost <-chan struct{}) error {
	gap := max(c.e.cfg.Tick/4, 5*time.Millisecond)
	tick := time.NewTicker(c.e.cfg.Tick)
	defer tick.Stop()
	var events clientv3.WatchChan
	for {
		if events == nil {
			events = c.e.cfg.Client.Watch(clientv3.WithRequireLeader(ctx), Prefix, clientv3.WithPrefix())
		}
		err := c.reconcile(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errFenced):
			return err
		case err != nil:
			c.e.log.Warn("coordinator", "err", err)
		}
		at := time.Now()
		var due <-chan time.Time
		var rest *time.Timer
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-lost:
				return fmt.Errorf("job: coordinator lease lost")
			case <-tick.C:
				break wait
			case <-due:
				break wait
			case resp, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				switch {
				case urgent(resp.Events):
					break wait
				case !relevant(resp.Events) || due != nil:
				case time.Since(at) >= gap:
					break wait
				default:
					rest = time.NewTimer(gap - time.Since(at))
					due = rest.C
				}
			}
		}
		if rest != nil {
			rest.Stop()
		}
	}
}

// urgent reports whether watch events may end a phase or change a job's
// state, so that the coordinator reconciles at once rather than at most
// once per debounce gap: a task's claim ended (its owner key deleted when
// the task is done, failed or released, or its node's lease expired) or
// a job's record was written (submitted, paused, cancelled, modified).
// Checkpoints, the bulk of the events while a job runs, are not.
func urgent(evs []*clientv3.Event) bool {
	for _, ev := range evs {
		k := string(ev.Kv.Key)
		if ev.Type == clientv3.EventTypeDelete && strings.HasPrefix(k, prefixOwners) || strings.HasPrefix(k, prefixJobs) {
			return true
		}
	}
	return false
}

// relevant reports whether watch events can change a coordinator decision
// (node status updates, progress and the callbacks' keys cannot).
func relevant(evs []*clientv3.Event) bool {
	for _, ev := range evs {
		k := string(ev.Kv.Key)
		if !strings.HasPrefix(k, prefixNodes) && !strings.HasPrefix(k, prefixProgress) &&
			!strings.HasPrefix(k, prefixCallbacks) && k != keyCallbackCursor {
			return true
		}
	}
	return false
}

// reconcile does every step once.
func (c *coordinator) reconcile(ctx context.Context) error {
	jobs, err := c.e.listJobs(ctx)
	if err != nil {
		return err
	}
	live := map[JobID]bool{}
	for _, j := range jobs {
		var err error
		switch j.rec.State {
		case Running:
			live[j.rec.ID] = true
			err = c.drive(ctx, j.rec)
		case Cancelling:
			err = c.finishCancel(ctx, j.rec)
		case Queued, SystemPaused:
			if c.e.typeOf(j.rec.Type) == nil {
				err = c.end(ctx, j.rec, Failed, fmt.Sprintf("job type %q is not registered on coordinator node %s", j.rec.Type, c.e.cfg.Node), nil)
			}
		}
		if errors.Is(err, errFenced) {
			return err
		}
		if err != nil {
			c.e.log.Warn("coordinator: job", "job", j.rec.ID, "err", err)
		}
	}
	for id := range c.rates {
		if !live[id] {
			delete(c.rates, id)
			delete(c.progress, id)
		}
	}
	if err := c.schedule(ctx); err != nil {
		return err
	}
	if now := c.e.cfg.Now(); !now.Before(c.cronAt) {
		c.cronAt = now.Add(c.e.cfg.ScheduleInterval)
		if err := c.e.fireSchedules(ctx, now, c.fence); errors.Is(err, errFenced) {
			return err
		} else if err != nil {
			c.e.log.Warn("coordinator: schedules", "err", err)
		}
	}
	return c.retain(ctx)
}

// drive advances a running job: split its current phase, or end it.
func (c *coordinator) drive(ctx context.Context, rec jobRecord) error {
	typ := c.e.typeOf(rec.Type)
	if typ == nil {
		return c.end(ctx, rec, Failed, fmt.Sprintf("job type %q is not registered on coordinator node %s", rec.Type, c.e.cfg.Node), nil)
	}
	phases := typ.Phases()
	if rec.Phase >= len(phases) || len(rec.Phases) != len(phases) {
		return c.end(ctx, rec, Failed, fmt.Sprintf("job type %s has %d phases on coordinator node %s, the job recorded %d", rec.Type, len(phases), c.e.cfg.Node, len(rec.Phases)), nil)
	}
	if !rec.PhaseSplit {
		return c.split(ctx, rec, phases[rec.Phase])
	}
	v, err := c.e.listPhase(ctx, rec.ID, rec.Phase)
	if err != nil {
		return err
	}
	c.sample(ctx, rec, v)
	done := true
	for _, t := range v.tasks {
		if t.rec.Failed != "" {
			return c.end(ctx, rec, Failed, fmt.Sprintf("phase %s failed: %s", phases[rec.Phase].Name(), t.rec.Failed), v.tasks)
		}
		done = done && t.rec.Done
	}
	if !done {
		return nil
	}
	i := rec.Phase
	sfx := phaseSuffix(rec.ID, i)
	extra := []clientv3.Op{
		clientv3.OpDelete(prefixTasks+sfx, clientv3.WithPrefix()),
		clientv3.OpDelete(prefixOwners+sfx, clientv3.WithPrefix()),
	}
	last := i+1 == len(phases)
	if last {
		extra = append(extra, clientv3.OpDelete(progressKey(rec.ID)), deleteDataOp(rec.ID))
	}
	next, err := c.e.updateJob(ctx, rec.ID, func(r *jobRecord) error {
		if r.State != Running || r.Phase != i || !r.PhaseSplit {
			return errNoChange
		}
		t := now()
		r.Phases[i] = report(r.Phases[i], v.tasks)
		r.Phases[i].State, r.Phases[i].Ended = PhaseSucceeded, t
		if last {
			r.State, r.Ended, r.Changed, r.Reason = Succeeded, t, t, ""
			return nil
		}
		r.Phase, r.PhaseSplit = i+1, false
		return nil
	}, c.fence, extra...)
	if err != nil {
		return err
	}
	c.e.log.Info("job phase done", "job", rec.ID, "phase", phases[i].Name(), "last", last)
	if last || next.State != Running || next.Phase != i+1 || next.PhaseSplit {
		return nil
	}
	// The next phase at once, not at the next reconcile (a debounce
	// later): each phase of a short job would wait for it.
	return c.split(ctx, next, phases[i+1])
}

// split writes the tasks of rec's current phase and marks it split.
func (c *coordinator) split(ctx context.Context, rec jobRecord, phase Phase) error {
	nodes, err := c.e.cfg.Client.Get(ctx, prefixNodes, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("job: count nodes: %w", err)
	}
	i := rec.Phase
	job := &Job{ID: rec.ID, Type: rec.Type, Params: cloneParams(rec.Params), Phase: i,
		Parallelism: max(1, int(nodes.Count)) * c.e.cfg.Parallelism, Created: rec.Created,
		Reports: earlierReports(rec)}
	specs, err := phase.Split(ctx, c.e.cfg.Env, job)
	if err == nil {
		err = checkSpecs(specs)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return c.end(ctx, rec, Failed, fmt.Sprintf("phase %s: split: %v", phase.Name(), err), nil)
	}
	sfx := phaseSuffix(rec.ID, i)
	if err := c.commit(ctx,
		clientv3.OpDelete(prefixTasks+sfx, clientv3.WithPrefix()),
		clientv3.OpDelete(prefixOwners+sfx, clientv3.WithPrefix())); err != nil {
		return err
	}
	const batch = 100 // under etcd's default limit of 128 operations
	for start := 0; start < len(specs); start += batch {
		var ops []clientv3.Op
		for _, s := range specs[start:min(start+batch, len(specs))] {
			t := taskRecord{Job: rec.ID, Phase: i, Scope: s.Scope, From: s.From, To: s.To, Cursor: s.From, Affinity: s.Node, Serial: s.Serial}
			ops = append(ops, clientv3.OpPut(prefixTasks+t.suffix(), encode(&t)))
		}
		if err := c.commit(ctx, ops...); err != nil {
			return err
		}
	}
	_, err = c.e.updateJob(ctx, rec.ID, func(r *jobRecord) error {
		if r.State != Running || r.Phase != i || r.PhaseSplit {
			return errNoChange
		}
		r.PhaseSplit = true
		r.Phases[i] = PhaseReport{Name: phase.Name(), State: PhaseRunning, Started: now(), Tasks: len(specs)}
		return nil
	}, c.fence)
	if err == nil {
		c.e.m.phasesSplit.Add(1)
		c.e.log.Info("job phase split", "job", rec.ID, "phase", phase.Name(), "tasks", len(specs))
	}
	return err
}

// checkSpecs enforces Split's contract: non-empty ranges that do not
// overlap within a scope.
func checkSpecs(specs []TaskSpec) error {
	s := slices.Clone(specs)
	slices.SortFunc(s, func(a, b TaskSpec) int {
		if c := strings.Compare(a.Scope, b.Scope); c != 0 {
			return c
		}
		switch {
		case a.From < b.From:
			return -1
		case a.From > b.From:
			return 1
		}
		return 0
	})
	for i, t := range s {
		if t.From >= t.To {
			return fmt.Errorf("task [%d, %d) of scope %q is empty", t.From, t.To, t.Scope)
		}
		if i > 0 && s[i-1].Scope == t.Scope && s[i-1].To > t.From {
			return fmt.Errorf("tasks [%d, %d) and [%d, %d) of scope %q overlap", s[i-1].From, s[i-1].To, t.From, t.To, t.Scope)
		}
	}
	return nil
}

// commit runs ops if this node is still the coordinator.
func (c *coordinator) commit(ctx context.Context, ops ...clientv3.Op) error {
	resp, err := c.e.cfg.Client.Txn(ctx).If(c.fence...).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("job: coordinator write: %w", err)
	}
	if !resp.Succeeded {
		return errFenced
	}
	return nil
}

// report sums tasks into a phase's report, per scope too (Scopes) for
// tasks pinned to a node or carrying counters.
func report(p PhaseReport, tasks []taskEntry) PhaseReport {
	p.Tasks = len(tasks)
	p.Items, p.Bytes, p.Errors, p.Scopes = 0, 0, 0, nil
	var noted, summarized time.Time
	scopes := map[string]*ScopeReport{}
	nodes := map[string]map[string]bool{}
	for _, t := range tasks {
		p.Items += t.rec.Items
		p.Bytes += t.rec.Bytes
		p.Errors += t.rec.Errors
		if t.rec.Note != "" && !t.rec.Updated.Before(noted) {
			p.Note, noted = t.rec.Note, t.rec.Updated
		}
		if t.rec.Summary != "" && !t.rec.Updated.Before(summarized) {
			p.Summary, summarized = t.rec.Summary, t.rec.Updated
		}
		if t.rec.Failed != "" && p.Error == "" {
			p.Error = t.rec.Failed
		}
		if t.rec.Affinity == "" && len(t.rec.Counts) == 0 {
			continue
		}
		sr := scopes[t.rec.Scope]
		if sr == nil {
			sr = &ScopeReport{Scope: t.rec.Scope, Affinity: t.rec.Affinity}
			scopes[t.rec.Scope], nodes[t.rec.Scope] = sr, map[string]bool{}
		}
		sr.add(t.rec)
		if t.rec.Node != "" {
			nodes[t.rec.Scope][t.rec.Node] = true
		}
	}
	for scope, sr := range scopes {
		for n := range nodes[scope] {
			sr.Nodes = append(sr.Nodes, n)
		}
		slices.Sort(sr.Nodes)
		p.Scopes = append(p.Scopes, *sr)
	}
	slices.SortFunc(p.Scopes, func(a, b ScopeReport) int { return strings.Compare(a.Scope, b.Scope) })
	if len(p.Scopes) > maxScopes {
		rest := ScopeReport{Scope: "..."}
		for _, sr := range p.Scopes[maxScopes-1:] {
			rest.Tasks += sr.Tasks
			rest.Items += sr.Items
			rest.Bytes += sr.Bytes
			rest.Errors += sr.Errors
			for k, v := range sr.Counts {
				if rest.Counts == nil {
					rest.Counts = map[string]int64{}
				}
				rest.Counts[k] += v
			}
		}
		p.Scopes = append(p.Scopes[:maxScopes-1], rest)
	}
	return p
}

// add sums a task into its scope's report.
func (sr *ScopeReport) add(t taskRecord) {
	sr.Tasks++
	sr.Items += t.Items
	sr.Bytes += t.Bytes
	sr.Errors += t.Errors
	for k, v := range t.Counts {
		if sr.Counts == nil {
			sr.Counts = map[string]int64{}
		}
		sr.Counts[k] += v
	}
}

// earlierReports returns copies of the reports of the phases before rec's
// current one (Job.Reports).
func earlierReports(rec jobRecord) []PhaseReport {
	n := min(rec.Phase, len(rec.Phases))
	if n <= 0 {
		return nil
	}
	return slices.Clone(rec.Phases[:n])
}

// end moves a job to a terminal state, summing the current phase's tasks
// (if any) into its report and deleting the job's tasks.
func (c *coordinator) end(ctx context.Context, rec jobRecord, state State, reason string, tasks []taskEntry) error {
	sfx := jobSuffix(rec.ID)
	_, err := c.e.updateJob(ctx, rec.ID, func(r *jobRecord) error {
		if r.State.Terminal() || (r.State != Cancelling && state == Cancelled) {
			return errNoChange
		}
		t := now()
		if i := r.Phase; i < len(r.Phases) {
			p := &r.Phases[i]
			switch {
			case r.PhaseSplit && p.State == PhaseRunning:
				*p = report(*p, tasks)
				p.Ended, p.State = t, PhaseCancelled
				if state == Failed {
					p.State = PhaseFailed
				}
			case state == Failed && p.State == PhasePending:
				p.State, p.Error, p.Ended = PhaseFailed, reason, t
			}
		}
		r.State, r.Reason, r.Ended, r.Changed = state, reason, t, t
		return nil
	}, c.fence,
		clientv3.OpDelete(prefixTasks+sfx, clientv3.WithPrefix()),
		clientv3.OpDelete(prefixOwners+sfx, clientv3.WithPrefix()),
		clientv3.OpDelete(progressKey(rec.ID)), deleteDataOp(rec.ID))
	if err == nil {
		c.e.log.Info("job ended", "job", rec.ID, "state", state, "reason", reason)
	}
	return err
}

// finishCancel ends a cancelling job once no task of it is held, or after
// CancelGrace.
func (c *coordinator) finishCancel(ctx context.Context, rec jobRecord) error {
	var tasks []taskEntry
	if rec.PhaseSplit {
		v, err := c.e.listPhase(ctx, rec.ID, rec.Phase)
		if err != nil {
			return err
		}
		if len(v.owners) > 0 && time.Since(rec.Changed) < c.e.cfg.CancelGrace {
			return nil
		}
		tasks = v.tasks
	}
	return c.end(ctx, rec, Cancelled, "cancelled", tasks)
}

// sample records a running phase's progress and publishes it every
// StatusInterval.
func (c *coordinator) sample(ctx context.Context, rec jobRecord, v phaseView) {
	done, total := measure(tasksOf(v.tasks))
	w := c.rates[rec.ID]
	if w == nil {
		w = &rateWindow{window: time.Minute, phase: -1}
		c.rates[rec.ID] = w
	}
	t := time.Now()
	w.add(rec.Phase, t, done)
	if t.Sub(c.progress[rec.ID]) < c.e.cfg.StatusInterval {
		return
	}
	c.progress[rec.ID] = t
	p := progressRecord{Phase: rec.Phase, Done: done, Total: total, Rate: w.rate(), Updated: t.UTC()}
	if err := c.commit(ctx, clientv3.OpPut(progressKey(rec.ID), encode(&p))); err != nil && ctx.Err() == nil {
		c.e.log.Warn("coordinator: progress", "job", rec.ID, "err", err)
	}
}

func tasksOf(es []taskEntry) []taskRecord {
	out := make([]taskRecord, len(es))
	for i, e := range es {
		out[i] = e.rec
	}
	return out
}

// schedule applies the scheduler's decisions to the live jobs.
func (c *coordinator) schedule(ctx context.Context) error {
	jobs, err := c.e.listJobs(ctx)
	if err != nil {
		return err
	}
	settings, err := c.e.Settings(ctx)
	if err != nil {
		return err
	}
	low, err := c.e.lowSpace(ctx)
	if err != nil {
		return err
	}
	in := schedInput{MaxRunning: settings.MaxRunning, RestripeExclusive: settings.RestripeExclusive, LowSpace: low != nil}
	for _, j := range jobs {
		typ := c.e.typeOf(j.rec.Type)
		if !j.rec.State.live() || typ == nil {
			continue
		}
		sj := schedJob{ID: j.rec.ID, Set: typ.Set(), Priority: j.rec.Priority, State: j.rec.State, Reason: j.rec.Reason}
		if s, ok := typ.(SpaceSaver); ok {
			sj.FreesSpace = s.FreesSpace()
		}
		in.Jobs = append(in.Jobs, sj)
	}
	for _, d := range schedule(in) {
		_, err := c.e.updateJob(ctx, d.ID, func(r *jobRecord) error {
			if r.State != d.From || (d.To != d.From && !CanTransition(d.From, d.To)) {
				return errNoChange
			}
			if d.To != d.From {
				t := now()
				r.State, r.Changed = d.To, t
				if d.To == Running && r.Started.IsZero() {
					r.Started = t
				}
			}
			r.Reason = d.Reason
			return nil
		}, c.fence)
		if errors.Is(err, errFenced) {
			return err
		}
		if err != nil {
			c.e.log.Warn("coordinator: schedule", "job", d.ID, "err", err)
			continue
		}
		if d.To != d.From {
			c.e.log.Info("job scheduled", "job", d.ID, "from", d.From, "to", d.To, "reason", d.Reason)
		}
	}
	return nil
}

// retain deletes ended jobs beyond the newest Settings.KeepJobs.
func (c *coordinator) retain(ctx context.Context) error {
	settings, err := c.e.Settings(ctx)
	if err != nil {
		return err
	}
	resp, err := c.e.cfg.Client.Get(ctx, prefixJobs, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || int(resp.Count) <= settings.KeepJobs {
		return err
	}
	jobs, err := c.e.listJobs(ctx)
	if err != nil {
		return err
	}
	var ended []JobID
	for _, j := range jobs {
		if j.rec.State.Terminal() {
			ended = append(ended, j.rec.ID)
		}
	}
	for _, id := range ended[:max(0, len(ended)-settings.KeepJobs)] {
		if err := c.commit(ctx, clientv3.OpDelete(jobKey(id)), clientv3.OpDelete(progressKey(id)),
			clientv3.OpDelete(prefixTasks+jobSuffix(id), clientv3.WithPrefix()),
			clientv3.OpDelete(prefixOwners+jobSuffix(id), clientv3.WithPrefix()), deleteDataOp(id)); err != nil {
			return err
		}
	}
	return nil
}
