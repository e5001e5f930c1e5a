package job

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// pinnedPhase pins one scope per node: scope nI holds items
// [I*1000, I*1000+perNode) and may run only on node nI. Each item counts
// itself under "seen".
type pinnedPhase struct {
	idx     int
	nodes   int
	perNode uint64
}

func (p *pinnedPhase) Name() string { return "pinned" }

func (p *pinnedPhase) Split(context.Context, Env, *Job) ([]TaskSpec, error) {
	var out []TaskSpec
	for i := 1; i <= p.nodes; i++ {
		node := fmt.Sprintf("n%d", i)
		base := uint64(i) * 1000
		for _, s := range SplitRange(node, base, base+p.perNode, 2) {
			s.Node = node
			out = append(out, s)
		}
	}
	return out, nil
}

func (p *pinnedPhase) Items(_ context.Context, _ Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	var out []uint64
	for k := from; k < to && len(out) < limit; k++ {
		out = append(out, k)
	}
	return out, nil
}

func (p *pinnedPhase) Process(ctx context.Context, env Env, job *Job, scope string, item uint64) (ItemResult, error) {
	fe := env.(*fakeEnv)
	if want := fmt.Sprintf("n%d", item/1000); scope != want {
		return ItemResult{}, fmt.Errorf("item %d in scope %q, want %q", item, scope, want)
	}
	if err := fe.d.process(ctx, fe.node, job.ID, p.idx, item); err != nil {
		return ItemResult{}, err
	}
	return ItemResult{Items: 1, Counts: map[string]int64{"seen": 1}}, nil
}

// reportPhase is one item that writes a summary of the previous phase's
// per-scope report, as a drive scan's summary phase does.
type reportPhase struct{}

func (reportPhase) Name() string { return "report" }
func (reportPhase) Split(context.Context, Env, *Job) ([]TaskSpec, error) {
	return []TaskSpec{{From: 0, To: 1}}, nil
}
func (reportPhase) Items(_ context.Context, _ Env, _ string, from, to uint64, _ int) ([]uint64, error) {
	if from == 0 && to > 0 {
		return []uint64{0}, nil
	}
	return nil, nil
}
func (reportPhase) Process(_ context.Context, _ Env, job *Job, _ string, _ uint64) (ItemResult, error) {
	if len(job.Reports) != 1 {
		return ItemResult{}, fmt.Errorf("got %d earlier reports, want 1", len(job.Reports))
	}
	var b strings.Builder
	for _, s := range job.Reports[0].Scopes {
		fmt.Fprintf(&b, "%s on %s: %d seen\n", s.Scope, strings.Join(s.Nodes, ","), s.Counts["seen"])
	}
	return ItemResult{Items: 1, Summary: b.String()}, nil
}

// Tasks pinned to a node run only there: while n1 stalls on its tasks,
// n2 and n3, idle after their own, pass over n1's tasks instead of
// stealing them; the per-scope report says where each scope ran, and a
// later phase reads it.
func TestAffinity(t *testing.T) {
	const per = 600
	typ := &fakeType{name: "pinned", set: SetNone, phases: []Phase{&pinnedPhase{idx: 0, nodes: 3, perNode: per}, reportPhase{}}}
	c := newTestCluster(t, 3, nil, typ)
	g := newGate()
	t.Cleanup(g.open)
	c.d.setHook(func(ctx context.Context, node string, _ JobID, phase int, _ uint64) error {
		if node == "n1" && phase == 0 {
			return g.wait(ctx)
		}
		return nil
	})
	id, err := c.engines[1].Submit(bg, "pinned", Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := func(scope int) bool {
		cov := coverage(c.d.snapshot(), id, 0, 0)
		for k := range uint64(per) {
			if cov[uint64(scope)*1000+k] == 0 {
				return false
			}
		}
		return true
	}
	c.waitFor("n2 and n3 to finish their scopes", func() bool { return done(2) && done(3) })
	// Idle, n2 and n3 keep looking for work: they must pass n1's tasks by.
	p2, p3 := c.engines[1].Metrics().TasksPassed, c.engines[2].Metrics().TasksPassed
	c.waitFor("n2 and n3 to pass over n1's pinned tasks", func() bool {
		return c.engines[1].Metrics().TasksPassed >= p2+10 && c.engines[2].Metrics().TasksPassed >= p3+10
	})
	g.open()
	v := c.waitState(c.engines[0], id, Succeeded)
	evs := c.d.snapshot()
	for _, ev := range evs {
		if ev.job == id && ev.phase == 0 && ev.node != fmt.Sprintf("n%d", ev.item/1000) {
			t.Fatalf("item %d of scope n%d ran on %s", ev.item, ev.item/1000, ev.node)
		}
	}
	if done(1) == false {
		t.Fatal("n1's scope was not covered")
	}
	var scopes []string
	for _, s := range v.Phases[0].Scopes {
		if s.Affinity != s.Scope || !reflect.DeepEqual(s.Nodes, []string{s.Scope}) || s.Counts["seen"] < per || s.Items < per {
			t.Fatalf("scope report %+v: want scope %s run on itself with %d seen", s, s.Scope, per)
		}
		scopes = append(scopes, s.Scope)
	}
	if !reflect.DeepEqual(scopes, []string{"n1", "n2", "n3"}) {
		t.Fatalf("scope reports %v, want n1..n3", scopes)
	}
	if sum := v.Phases[1].Summary; !strings.Contains(sum, "n1 on n1: ") || !strings.Contains(sum, "n3 on n3: ") {
		t.Fatalf("report phase summary %q", sum)
	}
	t.Logf("passed over: n2 %d, n3 %d; summary:\n%s", c.engines[1].Metrics().TasksPassed, c.engines[2].Metrics().TasksPassed, v.Phases[1].Summary)
}

// A task record is written as version 2 only when it uses a version-2
// field (a version-1 binary must not claim a pinned task), and every
// other record stays version 1.
func TestTaskRecordVersion(t *testing.T) {
	for _, tc := range []struct {
		rec  taskRecord
		want string
	}{
		{taskRecord{Job: 1, To: 9}, `"v":1`},
		{taskRecord{Job: 1, To: 9, Affinity: "n2"}, `"v":2`},
		{taskRecord{Job: 1, To: 9, Counts: map[string]int64{"bad": 1}}, `"v":2`},
		{taskRecord{Job: 1, To: 9, Summary: "table"}, `"v":2`},
	} {
		s := encode(&tc.rec)
		if !strings.Contains(s, tc.want) {
			t.Fatalf("encode(%+v) = %s, want %s", tc.rec, s, tc.want)
		}
		var out taskRecord
		if err := decode("k", []byte(s), &out); err != nil || !reflect.DeepEqual(out, tc.rec) {
			t.Fatalf("round trip of %s: %+v, %v", s, out, err)
		}
	}
	if s := encode(&jobRecord{State: Running}); !strings.Contains(s, `"v":1`) {
		t.Fatalf("job record written as %s, want version 1", s)
	}
}
