package job

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

var bg = context.Background()

// Every item of every phase is processed, the phases run strictly in
// order, and the report sums the items; nothing of the job is left in
// etcd but its record.
func TestJobRunsAllPhasesInOrder(t *testing.T) {
	typ := newFakeType("scan", SetMark, 500, 300, 0, 200)
	c := newTestCluster(t, 2, nil, typ)
	e := c.engines[0]
	id, err := e.Submit(bg, "scan", Options{Params: map[string]string{"path": "/x"}})
	if err != nil {
		t.Fatal(err)
	}
	v := c.waitState(e, id, Succeeded)
	evs := c.d.snapshot()
	sizes := []uint64{500, 300, 0, 200}
	for i, n := range sizes {
		requireAll(t, evs, id, i, n)
		p := v.Phases[i]
		if p.State != PhaseSucceeded || p.Items < int64(n) || p.Bytes != 100*p.Items || p.Ended.Before(p.Started) {
			t.Errorf("phase %d report: %+v", i, p)
		}
	}
	// Phase i's last processing precedes phase i+1's first.
	last := map[int]uint64{}
	first := map[int]uint64{}
	for _, ev := range evs {
		last[ev.phase] = max(last[ev.phase], ev.seq)
		if first[ev.phase] == 0 {
			first[ev.phase] = ev.seq
		}
	}
	if !(last[0] < first[1] && last[1] < first[3]) {
		t.Fatalf("phases overlap: first %v last %v", first, last)
	}
	if v.Priority != 5 || v.Policy != "low" || v.Params["path"] != "/x" || v.Started.IsZero() || v.Ended.IsZero() || v.Progress != nil {
		t.Fatalf("view: %+v", v)
	}
	resp, err := c.clients[0].Get(bg, Prefix+"task/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("%d task records left (%v)", resp.Count, err)
	}
}

// An item that keeps failing fails its phase and the job, with the item
// and the error in the report; later phases never start.
func TestItemErrorFailsJob(t *testing.T) {
	typ := newFakeType("check", SetNone, 400, 400, 400)
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.ItemRetries = 2 }, typ)
	c.d.setHook(func(_ context.Context, _ string, _ JobID, phase int, item uint64) error {
		if phase == 1 && item == 277 {
			return errors.New("boom: checksum of block 9 unreadable")
		}
		return nil
	})
	e := c.engines[0]
	id, err := e.Submit(bg, "check", Options{Priority: 3})
	if err != nil {
		t.Fatal(err)
	}
	v := c.waitState(e, id, Failed)
	for _, want := range []string{"phase p1", "item 277", "boom"} {
		if !strings.Contains(v.Reason, want) || !strings.Contains(v.Phases[1].Error, want) {
			t.Fatalf("reason %q / phase error %q lacks %q", v.Reason, v.Phases[1].Error, want)
		}
	}
	if v.Phases[0].State != PhaseSucceeded || v.Phases[1].State != PhaseFailed || v.Phases[2].State != PhasePending {
		t.Fatalf("phase states: %+v", v.Phases)
	}
	if len(coverage(c.d.snapshot(), id, 2, 0)) != 0 {
		t.Fatal("phase 2 ran after phase 1 failed")
	}
	if m := e.Metrics(); m.ItemRetries < 2 || m.ItemFailures < 1 {
		t.Fatalf("metrics: %+v", m)
	}
}

// Pausing stops the workers and writes their checkpoints; the progress
// read from them is the truth; resuming continues from the checkpoints:
// nothing before a cursor is processed again and nothing after is skipped.
func TestPauseResumeKeepsProgress(t *testing.T) {
	const n = 2000
	typ := newFakeType("walk", SetRestripe, n)
	c := newTestCluster(t, 1, nil, typ)
	g := newGate()
	reached := make(chan struct{})
	var once atomic.Bool
	c.d.setHook(func(ctx context.Context, _ string, _ JobID, _ int, _ uint64) error {
		if c.d.now() >= 700 {
			if once.CompareAndSwap(false, true) {
				close(reached)
			}
			return g.wait(ctx)
		}
		return nil
	})
	e := c.engines[0]
	id, err := e.Submit(bg, "walk", Options{})
	if err != nil {
		t.Fatal(err)
	}
	<-reached
	if err := e.Pause(bg, id); err != nil {
		t.Fatal(err)
	}
	c.waitState(e, id, Paused)
	c.waitFor("tasks released", func() bool { return ownerCount(t, c.clients[0], id) == 0 })
	tasks := phaseTasks(t, c.clients[0], id, 0)
	pauseSeq := c.d.now()
	before := coverage(c.d.snapshot(), id, 0, 0)
	for _, tk := range tasks {
		for k := tk.From; k < tk.Cursor; k++ {
			if before[k] == 0 {
				t.Fatalf("task [%d,%d) checkpointed cursor %d but item %d was never processed", tk.From, tk.To, tk.Cursor, k)
			}
		}
	}
	v, err := e.Get(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	truth := 100 * float64(len(before)) / n
	if v.Progress == nil || math.Abs(v.Progress.Percent-truth) > 10 {
		t.Fatalf("progress %+v, truth %.1f%%", v.Progress, truth)
	}
	if v.Phases[0].Items < int64(len(before)) {
		t.Fatalf("live report counts %d items, %d were processed", v.Phases[0].Items, len(before))
	}
	if err := e.Pause(bg, id); err != nil {
		t.Fatalf("pausing a paused job: %v", err)
	}

	g.open()
	if err := e.Resume(bg, id); err != nil {
		t.Fatal(err)
	}
	c.waitState(e, id, Succeeded)
	evs := c.d.snapshot()
	requireAll(t, evs, id, 0, n)
	after := coverage(evs, id, 0, pauseSeq)
	for item := range after {
		if !inRemaining(tasks, item) {
			t.Fatalf("item %d processed again after resume, behind its task's checkpoint", item)
		}
	}
	for _, tk := range tasks {
		for k := tk.Cursor; k < tk.To; k++ {
			if after[k] == 0 {
				t.Fatalf("item %d after the checkpoint of [%d,%d) (cursor %d) not processed after resume", k, tk.From, tk.To, tk.Cursor)
			}
		}
	}
}

// Cancel ends a running job as cancelled, keeping the report of what was
// done, and deletes its tasks; an ended job cannot be cancelled again.
func TestCancel(t *testing.T) {
	typ := newFakeType("sweep", SetNone, 1000, 1000)
	c := newTestCluster(t, 1, nil, typ)
	g := newGate()
	t.Cleanup(g.open)
	c.d.setHook(func(ctx context.Context, _ string, _ JobID, _ int, _ uint64) error {
		if c.d.now() >= 300 {
			return g.wait(ctx)
		}
		return nil
	})
	e := c.engines[0]
	id, err := e.Submit(bg, "sweep", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("300 items", func() bool { return c.d.now() >= 300 })
	if err := e.Cancel(bg, id); err != nil {
		t.Fatal(err)
	}
	v := c.waitState(e, id, Cancelled)
	if p := v.Phases[0]; p.State != PhaseCancelled || p.Items < 300 || p.Items >= 1000 {
		t.Fatalf("report of the cancelled phase: %+v", p)
	}
	if v.Phases[1].State != PhasePending {
		t.Fatalf("phase 1: %+v", v.Phases[1])
	}
	if err := e.Cancel(bg, id); !errors.Is(err, ErrBadTransition) {
		t.Fatalf("cancel of a cancelled job: %v", err)
	}
	if n := len(phaseTasks(t, c.clients[0], id, 0)); n != 0 {
		t.Fatalf("%d tasks left", n)
	}
}

// policyThrottle gives each policy its own allowance and knows only those.
type policyThrottle map[string]Allowance

func (p policyThrottle) Allowance(_ string, policy string) Allowance { return p[policy] }
func (p policyThrottle) KnownPolicy(name string) bool                { _, ok := p[name]; return ok }

// The public calls refuse bad input with errors naming it, and a policy
// change reaches the running managers.
func TestAPI(t *testing.T) {
	typ := newFakeType("scan", SetMark, 100000)
	other := newFakeType("drain", SetRestripe, 10)
	thr := policyThrottle{"low": {Workers: 1, Duty: 1}, "high": {Workers: 3, Duty: 1}}
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.Throttle = thr }, typ, other)
	g := newGate()
	t.Cleanup(g.open)
	c.d.setHook(func(ctx context.Context, _ string, _ JobID, _ int, _ uint64) error { return g.wait(ctx) })
	e := c.engines[0]

	for _, tc := range []struct {
		typ  string
		o    Options
		want error
		msg  string
	}{
		{"scrub", Options{}, ErrUnknownType, `"scrub": known types are drain, scan`},
		{"scan", Options{Priority: 11}, ErrBadPriority, "11: use 1 (highest) to 10"},
		{"scan", Options{Priority: -1}, ErrBadPriority, "-1"},
		{"scan", Options{Policy: "turbo"}, ErrUnknownPolicy, `"turbo"`},
	} {
		if _, err := e.Submit(bg, tc.typ, tc.o); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Submit(%s, %+v) = %v, want %v with %q", tc.typ, tc.o, err, tc.want, tc.msg)
		}
	}
	if err := e.ModifyType(bg, "drain", TypeSettings{Priority: 2, Policy: "high", Enabled: false}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(bg, "drain", Options{}); !errors.Is(err, ErrTypeDisabled) {
		t.Fatalf("submit of a disabled type: %v", err)
	}
	if err := e.ModifyType(bg, "drain", TypeSettings{Priority: 0, Policy: "high", Enabled: true}); !errors.Is(err, ErrBadPriority) {
		t.Fatalf("ModifyType priority 0: %v", err)
	}
	types, err := e.Types(bg)
	if err != nil || len(types) != 2 || types[0].Name != "drain" || types[0].Enabled || types[0].Priority != 2 ||
		types[0].SetName != "restripe" || types[1].Policy != "low" || types[1].Phases[0] != "p0" {
		t.Fatalf("Types = %+v, %v", types, err)
	}

	id, err := e.Submit(bg, "scan", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitState(e, id, Running)
	if err := e.Resume(bg, id); err != nil {
		t.Fatalf("resume of a running job: %v", err)
	}
	if _, err := e.Get(bg, 999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(999): %v", err)
	}
	if err := e.Modify(bg, id, 0, "turbo"); !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("Modify policy turbo: %v", err)
	}
	workers := func(want int) func() bool {
		return func() bool {
			st, err := e.Status(bg)
			if err != nil {
				t.Fatal(err)
			}
			return st.Coordinator == "n1" && len(st.Nodes) == 1 && len(st.Nodes[0].Jobs) == 1 &&
				st.Nodes[0].Jobs[0].Workers == want && st.Nodes[0].Jobs[0].Policy == thrName(want)
		}
	}
	c.waitFor("1 worker at policy low", workers(1))
	if err := e.Modify(bg, id, 1, "high"); err != nil {
		t.Fatal(err)
	}
	c.waitFor("3 workers at policy high", workers(3))
	if v, _ := e.Get(bg, id); v.Priority != 1 || v.Policy != "high" {
		t.Fatalf("after Modify: %+v", v)
	}
	if err := e.Cancel(bg, id); err != nil {
		t.Fatal(err)
	}
	c.waitState(e, id, Cancelled)
	if err := e.Modify(bg, id, 2, ""); !errors.Is(err, ErrBadTransition) {
		t.Fatalf("Modify of an ended job: %v", err)
	}
	if err := e.Pause(bg, id); !errors.Is(err, ErrBadTransition) {
		t.Fatalf("Pause of an ended job: %v", err)
	}
	if err := e.SetSettings(bg, Settings{MaxRunning: 0, KeepJobs: 100}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SetSettings max 0: %v", err)
	}
}

func thrName(workers int) string {
	if workers == 3 {
		return "high"
	}
	return "low"
}

// ownerCount counts the claims held on a job's tasks.
func ownerCount(t *testing.T, cli *clientv3.Client, id JobID) int64 {
	resp, err := cli.Get(bg, prefixOwners+jobSuffix(id), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// phaseTasks reads a phase's task records.
func phaseTasks(t *testing.T, cli *clientv3.Client, id JobID, phase int) []taskRecord {
	resp, err := cli.Get(bg, prefixTasks+phaseSuffix(id, phase), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []taskRecord
	for _, kv := range resp.Kvs {
		var r taskRecord
		if err := decode(string(kv.Key), kv.Value, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// inRemaining reports whether item lies after the cursor of one of tasks.
func inRemaining(tasks []taskRecord, item uint64) bool {
	for _, tk := range tasks {
		if item >= tk.Cursor && item < tk.To {
			return true
		}
	}
	return false
}

var _ = fmt.Sprint

// A claim committed whose answer the manager never saw (a lost reply) is
// adopted by the node's next worker instead of holding the task forever.
func TestLostClaimIsAdopted(t *testing.T) {
	typ := newFakeType("scan", SetNone, 400)
	c := newTestCluster(t, 1, nil, typ)
	g := newGate()
	t.Cleanup(g.open)
	c.d.setHook(func(ctx context.Context, _ string, _ JobID, _ int, _ uint64) error { return g.wait(ctx) })
	e := c.engines[0]
	id, err := e.Submit(bg, "scan", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("both workers to hold a task", func() bool { return ownerCount(t, c.clients[0], id) == 2 })
	v, err := e.listPhase(bg, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	lease := e.dir.sess.Lease()
	e.mu.Unlock()
	var orphan *heldTask
	for _, tk := range v.tasks {
		if _, owned := v.owners[tk.rec.suffix()]; !owned {
			if orphan, err = e.claim(bg, lease, tk); err != nil || orphan == nil {
				t.Fatalf("claim: %v, %v", orphan, err)
			}
			break
		}
	}
	if orphan == nil {
		t.Fatal("no free task")
	}
	g.open()
	c.waitState(e, id, Succeeded)
	requireAll(t, c.d.snapshot(), id, 0, 400)
}

// Ended jobs beyond Settings.KeepJobs are deleted, oldest first; live jobs
// are never.
func TestRetention(t *testing.T) {
	typ := newFakeType("tiny", SetNone, 3)
	c := newTestCluster(t, 1, nil, typ)
	e := c.engines[0]
	if err := e.SetSettings(bg, Settings{MaxRunning: 3, KeepJobs: 2}); err != nil {
		t.Fatal(err)
	}
	var ids []JobID
	for range 4 {
		id, err := e.Submit(bg, "tiny", Options{})
		if err != nil {
			t.Fatal(err)
		}
		c.waitState(e, id, Succeeded)
		ids = append(ids, id)
	}
	c.waitFor("two jobs kept", func() bool {
		jobs, err := e.List(bg)
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs) == 2 && jobs[0].ID == ids[2] && jobs[1].ID == ids[3]
	})
	if _, err := e.Get(bg, ids[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a job beyond retention: %v", err)
	}
}
