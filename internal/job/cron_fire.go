package job

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Schedules: the coordinator, every Config.ScheduleInterval, submits a
// job of each enabled type whose schedule (TypeSettings.Schedule) is due,
// with the type's settings, and records a schedule event saying which
// job started or why none did:
//
//   - a schedule is due at its first time after scheduleRecord.Since;
//     firing sets Since to the time of the check, so runs missed while no
//     coordinator checked (the cluster was down) fire once, not once each;
//   - the job and the new Since are written in one transaction that
//     compares the record's ModRevision (and the coordinator's election
//     key), so a run is never submitted twice, by a coordinator that
//     checks again or by its successor, and never forgotten: until the
//     transaction commits, the run stays due;
//   - if a job of the type is queued, running or paused, the run is
//     skipped (Since moves on) and the event names that job;
//   - a disabled type's runs pass silently (no job, no event);
//   - a schedule first seen, or changed (by ModifyType, which also arms
//     it, or by a default), fires first at its first time after it was
//     seen: setting a schedule never starts a run that was "missed"
//     before.
//
// The event is recorded after the transaction: if that write fails the
// job still runs, and the error is logged.

// schedEntry is a schedule record as read, with its key's ModRevision (0:
// none).
type schedEntry struct {
	rec    scheduleRecord
	modRev int64
}

// scheduleRecords reads every schedule record, by type name.
func (e *Engine) scheduleRecords(ctx context.Context) (map[string]schedEntry, error) {
	resp, err := e.cfg.Client.Get(ctx, prefixSched, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("job: read schedules: %w", err)
	}
	out := make(map[string]schedEntry, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r scheduleRecord
		if err := decode(string(kv.Key), kv.Value, &r); err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(string(kv.Key), prefixSched)] = schedEntry{r, kv.ModRevision}
	}
	return out, nil
}

// scheduleRecord reads one type's schedule record (modRev 0: none).
func (e *Engine) scheduleRecord(ctx context.Context, name string) (schedEntry, error) {
	resp, err := e.cfg.Client.Get(ctx, schedKey(name))
	if err != nil {
		return schedEntry{}, fmt.Errorf("job: read schedule of job type %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return schedEntry{}, nil
	}
	var r scheduleRecord
	if err := decode(schedKey(name), resp.Kvs[0].Value, &r); err != nil {
		return schedEntry{}, err
	}
	return schedEntry{r, resp.Kvs[0].ModRevision}, nil
}

// nextRun is when a type with settings ts and schedule record st next
// fires, as seen at now; zero for none (no schedule, disabled).
func nextRun(ts TypeSettings, st scheduleRecord, now time.Time) time.Time {
	if ts.Schedule == "" || !ts.Enabled {
		return time.Time{}
	}
	c, err := ParseCron(ts.Schedule)
	if err != nil {
		return time.Time{}
	}
	if st.Schedule == c.String() {
		return c.Next(st.Since)
	}
	return c.Next(now) // the coordinator arms it at its next check
}

// maxScheduleAttempts bounds how often one check retries a type whose
// record others changed meanwhile; the next check tries again.
const maxScheduleAttempts = 5

// fireSchedules checks every registered type's schedule once, at time
// now. fence (the coordinator's election key; nil in tests) guards every
// write: if it fails, fireSchedules returns errFenced. Other errors are
// per type, joined; the types' checks go on.
func (e *Engine) fireSchedules(ctx context.Context, now time.Time, fence []clientv3.Cmp) error {
	scheds, err := e.scheduleRecords(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range e.typeNames() {
		err := e.fireType(ctx, e.typeOf(name), now, fence, scheds[name])
		if errors.Is(err, errFenced) {
			return err
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// fireType checks one type's schedule, retrying when its record changed
// under it.
func (e *Engine) fireType(ctx context.Context, typ Type, now time.Time, fence []clientv3.Cmp, st schedEntry) error {
	for attempt := 1; ; attempt++ {
		done, err := e.fireOnce(ctx, typ, now, fence, st)
		if err != nil || done {
			return err
		}
		if len(fence) > 0 {
			ok, err := e.fenceHolds(ctx, fence)
			if err != nil {
				return err
			}
			if !ok {
				return errFenced
			}
		}
		if attempt == maxScheduleAttempts {
			return fmt.Errorf("job: schedule of job type %s changed at each of %d attempts; the next check tries again", typ.Name(), attempt)
		}
		if st, err = e.scheduleRecord(ctx, typ.Name()); err != nil {
			return err
		}
	}
}

// fireOnce is one attempt of fireType: done is false when a transaction's
// compares failed (the record, the job id counter or the fence changed).
func (e *Engine) fireOnce(ctx context.Context, typ Type, now time.Time, fence []clientv3.Cmp, st schedEntry) (done bool, err error) {
	name := typ.Name()
	ts, err := e.typeSettings(ctx, typ)
	if err != nil {
		return true, err
	}
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(schedKey(name)), "=", st.modRev)}, fence...)
	if ts.Schedule == "" {
		if st.modRev == 0 {
			return true, nil
		}
		return e.casWrite(ctx, cmps, clientv3.OpDelete(schedKey(name)))
	}
	c, err := ParseCron(ts.Schedule)
	if err != nil {
		return true, fmt.Errorf("job type %s: stored schedule: %w (weft job types modify %s --schedule sets another)", name, err, name)
	}
	if st.modRev == 0 || st.rec.Schedule != c.String() {
		e.log.Info("job schedule armed", "type", name, "schedule", c.String(), "next", c.Next(now))
		armed := st.rec // keeps the last firing, for Types
		armed.Schedule, armed.Since = c.String(), now
		return e.casWrite(ctx, cmps, clientv3.OpPut(schedKey(name), encode(&armed)))
	}
	due := c.Next(st.rec.Since)
	if due.IsZero() || due.After(now) {
		return true, nil
	}
	next := st.rec
	next.Since = now
	if !ts.Enabled {
		return e.casWrite(ctx, cmps, clientv3.OpPut(schedKey(name), encode(&next)))
	}
	ev := Event{Kind: EventSchedule, Subject: "type " + name, Detail: dueDetail(c, due, now), Params: map[string]string{"type": name}}
	next.Fired, next.Job = now, 0
	jobs, err := e.listJobs(ctx)
	if err != nil {
		return true, err
	}
	var rec jobRecord
	for _, j := range jobs {
		if j.rec.Type == name && !j.rec.State.Terminal() && j.rec.State != Cancelling {
			ev.Job = j.rec.ID
			ev.Outcome = fmt.Sprintf("%s job %d already %s: this run skipped", name, j.rec.ID, strings.ReplaceAll(string(j.rec.State), "_", " "))
			break
		}
	}
	if ev.Job == 0 {
		if rec, err = e.newJobWith(typ, ts, Options{}); err != nil {
			ev.Outcome = "no job: " + err.Error()
		}
	}
	if ev.Outcome != "" {
		next.Outcome = ev.Outcome
		if done, err = e.casWrite(ctx, cmps, clientv3.OpPut(schedKey(name), encode(&next))); !done || err != nil {
			return done, err
		}
	} else {
		ok, err := e.insertJob(ctx, &rec, func(id JobID) ([]clientv3.Cmp, []clientv3.Op) {
			next.Job, next.Outcome = id, fmt.Sprintf("started %s job %d", name, id)
			return cmps, []clientv3.Op{clientv3.OpPut(schedKey(name), encode(&next))}
		})
		if !ok || err != nil {
			return ok, err
		}
		ev.Job, ev.Outcome = next.Job, next.Outcome
	}
	e.log.Info("job schedule fired", "type", name, "due", due, "job", ev.Job, "outcome", ev.Outcome)
	if _, err := e.RecordEvent(ctx, ev); err != nil {
		return true, fmt.Errorf("job: schedule of job type %s fired (%s) but its event was not recorded: %w", name, ev.Outcome, err)
	}
	return true, nil
}

// casWrite runs ops if cmps hold; false when they did not.
func (e *Engine) casWrite(ctx context.Context, cmps []clientv3.Cmp, ops ...clientv3.Op) (bool, error) {
	resp, err := e.cfg.Client.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return false, fmt.Errorf("job: write schedule: %w", err)
	}
	return resp.Succeeded, nil
}

// maxMissedCount bounds the missed runs dueDetail counts.
const maxMissedCount = 1000

// dueDetail describes a firing: the schedule, the time that was due, and
// how many later times also passed before now (all covered by one run).
func dueDetail(c *Cron, due, now time.Time) string {
	s := fmt.Sprintf("schedule %q due %s", c.String(), due.Format("2006-01-02 15:04 MST"))
	n := 0
	for t := c.Next(due); !t.IsZero() && !t.After(now) && n < maxMissedCount; t = c.Next(t) {
		n++
	}
	switch {
	case n >= maxMissedCount:
		s += fmt.Sprintf("; %d or more later times passed too (one run covers them)", n)
	case n > 0:
		s += fmt.Sprintf("; %d later time(s) passed too (one run covers them)", n)
	}
	return s
}
