package job

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// scheduledType is a fake type with a default schedule.
type scheduledType struct {
	*fakeType
	sched string
}

func (t scheduledType) DefaultSchedule() string { return t.sched }

// fakeClock is a clock tests move by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock { c := &fakeClock{}; c.set(t); return c }
func (c *fakeClock) Now() time.Time       { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) set(t time.Time)      { c.ns.Store(t.UnixNano()) }

// schedFixture is engines (never started, as if coordinators one after
// the other) on one etcd, with a type "scan" scheduled monthly by
// default, driven by a fake clock: check fires schedules at a time.
type schedFixture struct {
	t     *testing.T
	ctx   context.Context
	cli   *clientv3.Client
	clock *fakeClock
	typ   scheduledType
}

func newSchedFixture(t *testing.T, start string) *schedFixture {
	return &schedFixture{t: t, ctx: context.Background(), cli: etcdtest.New(t), clock: newFakeClock(mustTime(t, start)),
		typ: scheduledType{newFakeType("scan", SetRestripe, 1), "0 2 1 * *"}}
}

// engine returns a new engine on the fixture's etcd (another node).
func (f *schedFixture) engine(node string) *Engine {
	f.t.Helper()
	e, err := New(Config{Client: f.cli, Node: node, Env: &fakeEnv{node: node, d: newDomain(), log: testLogger()}, Log: testLogger(), Now: f.clock.Now})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := e.Register(f.typ); err != nil {
		f.t.Fatal(err)
	}
	if err := e.Register(newFakeType("other", SetNone, 1)); err != nil {
		f.t.Fatal(err)
	}
	return e
}

// check moves the clock to at and runs one schedule check on e.
func (f *schedFixture) check(e *Engine, at string) {
	f.t.Helper()
	f.clock.set(mustTime(f.t, at))
	if err := e.fireSchedules(f.ctx, f.clock.Now(), nil); err != nil {
		f.t.Fatalf("check at %s: %v", at, err)
	}
}

// jobs returns the ids of the jobs of type scan.
func (f *schedFixture) jobs(e *Engine) []JobID {
	f.t.Helper()
	all, err := e.List(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []JobID
	for _, j := range all {
		if j.Type == "scan" {
			out = append(out, j.ID)
		}
	}
	return out
}

// events returns the schedule events.
func (f *schedFixture) events(e *Engine) []Event {
	f.t.Helper()
	all, err := e.Events(f.ctx, 100)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []Event
	for _, ev := range all {
		if ev.Kind == EventSchedule {
			if typ := strings.TrimPrefix(ev.Subject, "type "); ev.Params["type"] != typ {
				f.t.Fatalf("schedule event %d: params %v, want type=%s", ev.ID, ev.Params, typ)
			}
			out = append(out, ev)
		}
	}
	return out
}

func (f *schedFixture) scanView(e *Engine) TypeView {
	f.t.Helper()
	types, err := e.Types(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, v := range types {
		if v.Name == "scan" {
			return v
		}
	}
	f.t.Fatal("no type scan")
	return TypeView{}
}

// end marks job id succeeded, as if it ran.
func (f *schedFixture) end(e *Engine, id JobID) {
	f.t.Helper()
	if _, err := e.updateJob(f.ctx, id, func(r *jobRecord) error { r.State = Succeeded; return nil }, nil); err != nil {
		f.t.Fatal(err)
	}
}

func (f *schedFixture) want(e *Engine, what string, jobs []JobID, events int) {
	f.t.Helper()
	if got := f.jobs(e); !slices.Equal(got, jobs) {
		f.t.Fatalf("%s: scan jobs %v, want %v", what, got, jobs)
	}
	if got := f.events(e); len(got) != events {
		f.t.Fatalf("%s: %d schedule events, want %d: %+v", what, len(got), events, got)
	}
}

// A schedule fires once at its time (not again at the next check), skips
// a run while a job of the type is still queued and says so, fires once
// after a long outage however many times passed, and a second engine (a
// new coordinator) continues from the persisted record.
func TestScheduleFires(t *testing.T) {
	f := newSchedFixture(t, "2025-01-15T10:00:00Z")
	e1 := f.engine("n1")

	v := f.scanView(e1)
	if v.Schedule != "0 2 1 * *" || v.DefaultSchedule != "0 2 1 * *" || !v.NextRun.Equal(mustTime(t, "2025-02-01T02:00:00Z")) {
		t.Fatalf("fresh cluster: schedule %q (default %q), next run %s", v.Schedule, v.DefaultSchedule, v.NextRun)
	}
	f.check(e1, "2025-01-15T10:00:00Z") // arms it: nothing due
	f.want(e1, "armed", nil, 0)
	f.check(e1, "2025-02-01T01:59:50Z")
	f.want(e1, "just before", nil, 0)

	f.check(e1, "2025-02-01T02:00:10Z")
	f.want(e1, "at the time", []JobID{1}, 1)
	ev := f.events(e1)[0]
	if ev.Job != 1 || ev.Subject != "type scan" || ev.Outcome != "started scan job 1" || !strings.Contains(ev.Detail, `schedule "0 2 1 * *" due 2025-02-01 02:00 UTC`) {
		t.Fatalf("event %+v", ev)
	}
	if j, err := e1.Get(f.ctx, 1); err != nil || j.State != Queued || j.Priority != 5 || j.Policy != "low" {
		t.Fatalf("job 1: %+v %v, want queued with the type's settings", j, err)
	}
	f.check(e1, "2025-02-01T02:00:30Z")
	f.check(e1, "2025-02-20T00:00:00Z")
	f.want(e1, "next checks", []JobID{1}, 1)
	v = f.scanView(e1)
	if !v.LastRun.Equal(mustTime(t, "2025-02-01T02:00:10Z")) || v.LastJob != 1 || !v.NextRun.Equal(mustTime(t, "2025-03-01T02:00:00Z")) {
		t.Fatalf("after a run: last %s job %d, next %s", v.LastRun, v.LastJob, v.NextRun)
	}

	// Job 1 still queued a month later: the run is skipped, once.
	f.check(e1, "2025-03-01T02:00:05Z")
	f.check(e1, "2025-03-01T02:00:25Z")
	f.want(e1, "busy", []JobID{1}, 2)
	ev = f.events(e1)[1]
	if ev.Job != 1 || ev.Outcome != "scan job 1 already queued: this run skipped" {
		t.Fatalf("skip event %+v", ev)
	}
	f.end(e1, 1)

	// Down from March to mid-July: April to July's runs make one job.
	f.check(e1, "2025-07-15T08:00:00Z")
	f.want(e1, "after an outage", []JobID{1, 2}, 3)
	if d := f.events(e1)[2].Detail; !strings.Contains(d, "due 2025-04-01 02:00 UTC; 3 later time(s) passed too") {
		t.Fatalf("outage detail %q", d)
	}
	f.check(e1, "2025-07-15T08:00:20Z")
	f.want(e1, "after an outage, next check", []JobID{1, 2}, 3)
	f.end(e1, 2)

	// A new coordinator reads the record: nothing repeats, and the next
	// run fires once, wherever it is checked first.
	e2 := f.engine("n2")
	f.check(e2, "2025-07-15T08:01:00Z")
	f.want(e2, "new coordinator", []JobID{1, 2}, 3)
	f.check(e2, "2025-08-01T02:00:15Z")
	f.check(e1, "2025-08-01T02:00:15Z") // the old one, late: the record has moved on
	f.want(e2, "new coordinator fires", []JobID{1, 2, 3}, 4)
}

// Engines that check at the same moment (a coordinator change as it
// happens) submit one job between them.
func TestScheduleFiresOnceUnderRace(t *testing.T) {
	f := newSchedFixture(t, "2025-01-15T10:00:00Z")
	var engines []*Engine
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		engines = append(engines, f.engine(n))
	}
	f.check(engines[0], "2025-01-15T10:00:00Z")
	f.clock.set(mustTime(t, "2025-02-01T02:00:10Z"))
	var wg sync.WaitGroup
	for _, e := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.fireSchedules(f.ctx, f.clock.Now(), nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	f.want(engines[0], "four at once", []JobID{1}, 1)
}

// A deposed coordinator (its fence fails) writes nothing.
func TestScheduleFenced(t *testing.T) {
	f := newSchedFixture(t, "2025-01-15T10:00:00Z")
	e := f.engine("n1")
	f.check(e, "2025-01-15T10:00:00Z")
	fence := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(electionPrefix+"/gone"), "=", 7)}
	if err := e.fireSchedules(f.ctx, mustTime(t, "2025-02-01T02:00:10Z"), fence); !errors.Is(err, errFenced) {
		t.Fatalf("fenced check: %v, want errFenced", err)
	}
	f.want(e, "fenced", nil, 0)
}

// A disabled type's runs pass without a job or an event; enabling it
// again does not run the passed time.
func TestScheduleDisabled(t *testing.T) {
	f := newSchedFixture(t, "2025-01-15T10:00:00Z")
	e := f.engine("n1")
	f.check(e, "2025-01-15T10:00:00Z")
	ts := f.scanView(e).TypeSettings
	ts.Enabled = false
	if err := e.ModifyType(f.ctx, "scan", ts); err != nil {
		t.Fatal(err)
	}
	if v := f.scanView(e); !v.NextRun.IsZero() {
		t.Fatalf("disabled: next run %s, want none", v.NextRun)
	}
	f.check(e, "2025-02-01T02:00:10Z")
	f.want(e, "disabled", nil, 0)
	ts.Enabled = true
	if err := e.ModifyType(f.ctx, "scan", ts); err != nil {
		t.Fatal(err)
	}
	f.check(e, "2025-02-01T03:00:00Z")
	f.want(e, "enabled after the time", nil, 0)
	f.check(e, "2025-03-01T02:00:00Z")
	f.want(e, "next time", []JobID{1}, 1)
}

// ModifyType validates, stores, clears and restores schedules; a new
// schedule counts from when it was set; records written before schedules
// existed read as the type's default.
func TestModifyTypeSchedule(t *testing.T) {
	f := newSchedFixture(t, "2025-01-15T10:03:00Z")
	e := f.engine("n1")
	ts := f.scanView(e).TypeSettings

	ts.Schedule = "0 0 * * mon-xyz"
	err := e.ModifyType(f.ctx, "scan", ts)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `day-of-week field "mon-xyz"`) {
		t.Fatalf("bad schedule: %v", err)
	}
	ts.Schedule = "*/10 * * * *"
	if err := e.ModifyType(f.ctx, "scan", ts); err != nil {
		t.Fatal(err)
	}
	if v := f.scanView(e); v.Schedule != "*/10 * * * *" || !v.NextRun.Equal(mustTime(t, "2025-01-15T10:10:00Z")) {
		t.Fatalf("modified: %q next %s", v.Schedule, v.NextRun)
	}
	f.check(e, "2025-01-15T10:10:05Z")
	f.want(e, "new schedule", []JobID{1}, 1)
	f.end(e, 1)

	// Cleared: shown as none, nothing fires, the record is gone.
	ts.Schedule = ""
	if err := e.ModifyType(f.ctx, "scan", ts); err != nil {
		t.Fatal(err)
	}
	if v := f.scanView(e); v.Schedule != "" || !v.NextRun.IsZero() || !v.LastRun.IsZero() {
		t.Fatalf("cleared: %+v", v)
	}
	f.check(e, "2025-02-01T02:00:10Z")
	f.want(e, "cleared", []JobID{1}, 1)

	// Back to the default: stored as "follow the default" (no field), and
	// armed from now: February's time passed before it was set.
	ts.Schedule = "0 2 1 * *"
	if err := e.ModifyType(f.ctx, "scan", ts); err != nil {
		t.Fatal(err)
	}
	resp, err := f.cli.Get(f.ctx, typeKey("scan"))
	if err != nil || len(resp.Kvs) != 1 || strings.Contains(string(resp.Kvs[0].Value), "schedule") || !strings.Contains(string(resp.Kvs[0].Value), `"v":1`) {
		t.Fatalf("type record %v %v: want version 1 without a schedule", resp, err)
	}
	f.check(e, "2025-02-01T02:01:00Z")
	f.want(e, "default again", []JobID{1}, 1)
	f.check(e, "2025-03-01T02:01:00Z")
	f.want(e, "default again, next time", []JobID{1, 2}, 2)

	// A record from before schedules: the default applies.
	if _, err := f.cli.Put(f.ctx, typeKey("scan"), `{"v":1,"priority":3}`); err != nil {
		t.Fatal(err)
	}
	if v := f.scanView(e); v.Schedule != "0 2 1 * *" || v.Priority != 3 {
		t.Fatalf("old record: %+v", v.TypeSettings)
	}
	// A type without a default has none, and cannot get a bad one.
	types, err := e.Types(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range types {
		if v.Name == "other" && (v.Schedule != "" || !v.NextRun.IsZero()) {
			t.Fatalf("other: %+v", v)
		}
	}
}

// Register refuses a type whose default schedule does not parse.
func TestRegisterBadDefaultSchedule(t *testing.T) {
	e := newStoreEngine(t, etcdtest.New(t), 10)
	err := e.Register(scheduledType{newFakeType("bad", SetNone, 1), "0 0 30 2 *"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "default schedule of job type bad") {
		t.Fatalf("Register: %v", err)
	}
}

// The coordinator of a running cluster checks schedules by itself, on
// Config.Now's clock.
func TestCoordinatorFiresSchedule(t *testing.T) {
	clock := newFakeClock(mustTime(t, "2025-01-31T23:59:00Z"))
	typ := scheduledType{newFakeType("scan", SetRestripe, 4), "@monthly"}
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.Now, cfg.ScheduleInterval = clock.Now, time.Second }, typ)
	e := c.engines[0]
	c.waitFor("the schedule to be armed", func() bool {
		st, err := e.scheduleRecord(context.Background(), "scan")
		return err == nil && st.modRev != 0
	})
	clock.set(mustTime(t, "2025-02-01T00:00:30Z"))
	c.waitFor("the scheduled job", func() bool {
		v, err := e.Get(context.Background(), 1)
		return err == nil && v.Type == "scan"
	})
	c.waitState(e, 1, Succeeded)
}
