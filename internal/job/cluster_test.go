package job

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Three nodes share a job's tasks; when one node stalls, the others, out
// of unclaimed tasks, steal the rest of its ranges, and the job finishes
// with every item processed.
func TestSpreadAndSteal(t *testing.T) {
	const n = 6000
	typ := newFakeType("balance", SetRestripe, n)
	c := newTestCluster(t, 3, nil, typ)
	stuck, g := newGate(), newGate()
	t.Cleanup(g.open)
	var stuckItem atomic.Int64
	stuckItem.Store(-1)
	c.d.setHook(func(ctx context.Context, node string, _ JobID, _ int, item uint64) error {
		if node == "n1" { // n1 stalls on its first item until the gate opens
			if stuckItem.CompareAndSwap(-1, int64(item)) {
				stuck.open()
			}
			return g.wait(ctx)
		}
		return stuck.wait(ctx) // the others start once n1 holds tasks
	})
	id, err := c.engines[1].Submit(bg, "balance", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := stuck.wait(bg); err != nil {
		t.Fatal(err)
	}
	// n1's task starts at the item it is stuck on and ends where Split
	// ended it; items in between processed by others were stolen.
	k := uint64(stuckItem.Load())
	var end uint64
	for _, s := range SplitRange("", 0, n, 3*4) {
		if s.From == k {
			end = s.To
		}
	}
	if end == 0 {
		t.Fatalf("n1 stuck on item %d, not the start of a task", k)
	}
	c.waitFor("another node to steal from n1's task", func() bool {
		for _, ev := range c.d.snapshot() {
			if ev.item > k && ev.item < end && ev.node != "n1" {
				return true
			}
		}
		return false
	})
	g.open()
	c.waitState(c.engines[0], id, Succeeded)
	evs := c.d.snapshot()
	// Steals split only past what a holder has reserved: no item twice.
	requireOnce(t, evs, id, 0, n)
	perNode := map[string]int{}
	for _, ev := range evs {
		perNode[ev.node]++
	}
	var stolen uint64
	for _, e := range c.engines {
		stolen += e.Metrics().TasksStolen
	}
	if len(perNode) != 3 || stolen == 0 {
		t.Fatalf("items per node %v, tasks stolen %d", perNode, stolen)
	}
	t.Logf("items per node %v, tasks stolen %d", perNode, stolen)
}

// crashScenario runs a two-phase job on three nodes, stops every Process
// call once 500 items are done, crashes the node victim picks (without
// any graceful step), lets the others continue, and checks that the job
// succeeds with every item processed, including every item the dead node
// had not checkpointed, processed again after the crash.
func crashScenario(t *testing.T, victim func(c *testCluster) int) (c *testCluster, dead int, killed time.Time) {
	const n = 3000
	typ := newFakeType("repair", SetRestripe, n, n)
	c = newTestCluster(t, 3, nil, typ)
	g := newGate()
	t.Cleanup(g.open)
	c.d.setHook(func(ctx context.Context, _ string, _ JobID, _ int, _ uint64) error {
		if c.d.now() >= 500 {
			return g.wait(ctx)
		}
		return nil
	})
	id, err := c.engines[0].Submit(bg, "repair", Options{Priority: 1})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("500 items", func() bool { return c.d.now() >= 500 })
	// Every worker (2 per node) ends up blocked holding a task.
	c.waitFor("every worker to hold a task", func() bool {
		n := ownerCount(t, c.clients[0], id)
		if n > 6 {
			t.Fatalf("%d claims for 6 workers", n)
		}
		return n == 6
	})
	dead = victim(c)
	node := c.engines[dead].Node()
	crashSeq := c.cut(dead)
	killed = time.Now()
	// The dead node's tasks as its last checkpoints left them: it can
	// write nothing more, and its claims last until its lease expires.
	live := c.clients[(dead+1)%3]
	owners, err := live.Get(bg, prefixOwners+jobSuffix(id), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, kv := range owners.Kvs {
		var o ownerRecord
		if err := decode(string(kv.Key), kv.Value, &o); err != nil {
			t.Fatal(err)
		}
		if o.Node == node {
			held[string(kv.Key[len(prefixOwners):])] = true
		}
	}
	var orphans []taskRecord
	for _, tk := range phaseTasks(t, live, id, 0) {
		if held[tk.suffix()] {
			orphans = append(orphans, tk)
		}
	}
	if len(orphans) == 0 {
		t.Fatalf("node %s held no task when it crashed", node)
	}
	go c.engines[dead].Stop(context.Background()) // its goroutines notice nothing works any more
	g.open()
	c.waitState(c.engines[(dead+1)%3], id, Succeeded)
	evs := c.d.snapshot()
	requireAll(t, evs, id, 0, n)
	requireAll(t, evs, id, 1, n)
	after := coverage(evs, id, 0, crashSeq)
	for _, tk := range orphans {
		for k := tk.Cursor; k < tk.To; k++ {
			if after[k] == 0 {
				t.Fatalf("item %d of dead node %s's task [%d,%d) (checkpoint %d) not processed after the crash", k, node, tk.From, tk.To, tk.Cursor)
			}
		}
	}
	for _, ev := range evs {
		if ev.node == node && ev.seq > crashSeq {
			t.Fatalf("dead node %s recorded item %d after its crash", node, ev.item)
		}
	}
	return c, dead, killed
}

// The coordinator's node dies mid-phase: another node becomes coordinator
// once its lease expires, the running tasks carry on meanwhile, and the job
// finishes from etcd state with no item skipped.
func TestCoordinatorFailover(t *testing.T) {
	var takeover time.Duration
	var mu sync.Mutex
	crashScenario(t, func(c *testCluster) int {
		var ci int
		c.waitFor("a coordinator", func() bool {
			for i, e := range c.engines {
				if e.IsCoordinator() {
					ci = i
					return true
				}
			}
			return false
		})
		go func() {
			start := time.Now()
			for time.Since(start) < 20*time.Second {
				for i, e := range c.engines {
					if i != ci && e.IsCoordinator() {
						mu.Lock()
						takeover = time.Since(start)
						mu.Unlock()
						return
					}
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		return ci
	})
	mu.Lock()
	defer mu.Unlock()
	// Another node took over (how soon is logged, not asserted: a unit
	// test asserts no timing; the lease TTL is 2 s, counted from the dead
	// node's last keep-alive).
	if takeover == 0 {
		t.Fatal("no other node became coordinator within 20s of the crash")
	}
	t.Logf("new coordinator after %v (lease TTL 2s)", takeover)
}

// A node holding tasks dies: its claims expire with its lease and the
// others reclaim its tasks from their checkpoints.
func TestNodeCrashReclaimsTasks(t *testing.T) {
	c, dead, _ := crashScenario(t, func(c *testCluster) int {
		for i, e := range c.engines {
			if !e.IsCoordinator() {
				return i
			}
		}
		t.Fatal("every node is coordinator")
		return 0
	})
	var claimed uint64
	for i, e := range c.engines {
		if i != dead {
			claimed += e.Metrics().TasksClaimed
		}
	}
	if claimed == 0 {
		t.Fatal("no task claimed by the survivors")
	}
}

// The scheduler against etcd: a higher-priority job preempts a lower one
// when slots are full, and the lower one resumes after; two mark jobs
// never run together while restripe jobs do, until the restripe setting
// says one at a time; low-space mode pauses jobs that do not free space.
func TestSchedulingInEtcd(t *testing.T) {
	low := newFakeType("low", SetNone, 400)
	urgent := newFakeType("urgent", SetNone, 200)
	mark := newFakeType("mark", SetMark, 200)
	restripe := newFakeType("restripe", SetRestripe, 200)
	collect := newFakeType("collect", SetMark, 200)
	collect.frees = true
	c := newTestCluster(t, 1, nil, low, urgent, mark, restripe, collect)
	e := c.engines[0]
	var mu sync.Mutex
	gates := map[JobID]*gate{}
	hold := func(id JobID) *gate {
		mu.Lock()
		defer mu.Unlock()
		if gates[id] == nil {
			gates[id] = newGate()
		}
		return gates[id]
	}
	c.d.setHook(func(ctx context.Context, _ string, id JobID, _ int, _ uint64) error {
		mu.Lock()
		g := gates[id]
		mu.Unlock()
		if g != nil {
			return g.wait(ctx)
		}
		return nil
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range gates {
			g.open()
		}
	})
	submit := func(typ string, prio int) JobID {
		t.Helper()
		id, err := e.Submit(bg, typ, Options{Priority: prio})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	settings := func(s Settings) {
		t.Helper()
		if err := e.SetSettings(bg, s); err != nil {
			t.Fatal(err)
		}
	}
	reason := func(id JobID, state State, want string) {
		t.Helper()
		c.waitFor("job reason "+want, func() bool {
			v, err := e.Get(bg, id)
			return err == nil && v.State == state && strings.Contains(v.Reason, want)
		})
	}

	// Job ids are allocated in order, so gates can be set up before the
	// jobs they hold are submitted.
	const a, b, m1, m2, r1, r2, cl JobID = 1, 2, 3, 4, 5, 6, 7
	for _, id := range []JobID{a, b, m1, m2, r1, r2, cl} {
		hold(id)
	}
	submitAs := func(want JobID, typ string, prio int) {
		t.Helper()
		if got := submit(typ, prio); got != want {
			t.Fatalf("submitted job %d, want id %d", got, want)
		}
	}

	// Preemption.
	settings(Settings{MaxRunning: 1, KeepJobs: 100})
	submitAs(a, "low", 8)
	c.waitState(e, a, Running)
	submitAs(b, "urgent", 2)
	reason(a, SystemPaused, "preempted by job 2 (priority 2)")
	hold(b).open() // held until then: it would end before the check could see a paused
	c.waitState(e, b, Succeeded)
	c.waitState(e, a, Running)
	hold(a).open()
	c.waitState(e, a, Succeeded)

	// Exclusion sets.
	settings(Settings{MaxRunning: 3, KeepJobs: 100})
	submitAs(m1, "mark", 5)
	c.waitState(e, m1, Running)
	submitAs(m2, "mark", 5)
	reason(m2, Queued, "exclusion set mark held by job 3")
	submitAs(r1, "restripe", 3)
	submitAs(r2, "restripe", 4)
	c.waitState(e, r1, Running)
	c.waitState(e, r2, Running)
	settings(Settings{MaxRunning: 3, KeepJobs: 100, RestripeExclusive: true})
	reason(r2, SystemPaused, "exclusion set restripe held by job 5")

	// Low-space mode: only the job that frees space runs.
	submitAs(cl, "collect", 1)
	if err := e.SetLowSpace(bg, true, "pool fast 97% full"); err != nil {
		t.Fatal(err)
	}
	reason(r1, SystemPaused, "low-space mode")
	reason(m1, SystemPaused, "low-space mode")
	c.waitState(e, cl, Running)
	if st, err := e.Status(bg); err != nil || !st.LowSpace || st.LowSpaceReason != "pool fast 97% full" {
		t.Fatalf("status in low-space mode: %+v, %v", st, err)
	}
	if err := e.SetLowSpace(bg, false, ""); err != nil {
		t.Fatal(err)
	}
	c.waitState(e, r1, Running)

	for _, id := range []JobID{m1, m2, r1, r2, cl} {
		hold(id).open()
	}
	for _, id := range []JobID{m1, m2, r1, r2, cl} {
		c.waitState(e, id, Succeeded)
	}
	requireAll(t, c.d.snapshot(), m2, 0, 200)
}

// A task of a few slow items with nearby keys (a handful of large files to
// repair, in one LIN range far narrower than a steal's minimum) is shared
// item by item: its holder reserves one item at a time while their pace
// is unknown, and idle workers steal the items past its reservation, so
// that four workers process four of the items at once. Before, the holder
// reserved the whole listing and worked through it alone.
// A serial task's items go through one worker in key order, however slow
// they are and however many workers idle beside it (the few slow items
// below are shared out; these are not), past its first batch too.
func TestSerialTaskIsNotStolen(t *testing.T) {
	keys := []uint64{1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009}
	typ := &fakeType{name: "rebalance", set: SetRestripe, phases: []Phase{
		&fakePhase{name: "settle", n: 1 << 20, tasks: 1, keys: keys, serial: true},
	}}
	// Two nodes of two workers; batches of four items.
	c := newTestCluster(t, 2, func(c *Config) { c.BatchSize = 4 }, typ)
	var mu sync.Mutex
	busy, most := 0, 0
	var order []uint64
	c.d.setHook(func(ctx context.Context, _ string, _ JobID, _ int, item uint64) error {
		mu.Lock()
		busy++
		most = max(most, busy)
		order = append(order, item)
		mu.Unlock()
		defer func() {
			mu.Lock()
			busy--
			mu.Unlock()
		}()
		// Slow enough for the three idle workers to look for work many
		// times (every tick, 50 ms) while it lasts.
		select {
		case <-time.After(200 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	id, err := c.engines[0].Submit(bg, "rebalance", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitState(c.engines[0], id, Succeeded)
	var stolen uint64
	for _, e := range c.engines {
		stolen += e.Metrics().TasksStolen
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 || stolen != 0 || !slices.Equal(order, keys) {
		t.Fatalf("%d items in progress at once at most, %d steals, items processed in the order %v; want 1, none, and %v", most, stolen, order, keys)
	}
}

// An allowance's byte rate reaches the job's manager on each node, which
// shows it in the status while the job runs (the workers' pacers spend
// through it: runner.Spend).
func TestAllowanceByteRate(t *testing.T) {
	typ := &fakeType{name: "repair", set: SetRestripe, phases: []Phase{&fakePhase{name: "p0", n: 4, tasks: 1}}}
	c := newTestCluster(t, 1, func(c *Config) { c.Throttle = FixedThrottle{Workers: 1, Duty: 1, BytesPerSec: 2e6} }, typ)
	running := newGate()
	t.Cleanup(running.open)
	c.d.setHook(func(ctx context.Context, _ string, _ JobID, _ int, _ uint64) error { return running.wait(ctx) })
	id, err := c.engines[0].Submit(bg, "repair", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("the job's byte rate in the status", func() bool {
		st, err := c.engines[0].Status(bg)
		if err != nil {
			return false
		}
		for _, n := range st.Nodes {
			for _, m := range n.Jobs {
				if m.Job == id && m.BytesPerSec == 2e6 {
					return true
				}
			}
		}
		return false
	})
	running.open()
	c.waitState(c.engines[0], id, Succeeded)
}

func TestStealSharesFewSlowItems(t *testing.T) {
	keys := []uint64{1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007}
	typ := &fakeType{name: "repair", set: SetRestripe, phases: []Phase{
		&fakePhase{name: "p0", n: 1 << 20, tasks: 1, keys: keys},
	}}
	c := newTestCluster(t, 2, nil, typ) // two nodes of two workers
	var mu sync.Mutex
	busy, most := 0, 0
	together := newGate()
	t.Cleanup(together.open)
	c.d.setHook(func(ctx context.Context, _ string, _ JobID, _ int, _ uint64) error {
		mu.Lock()
		busy++
		most = max(most, busy)
		if busy >= 4 {
			together.open()
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			busy--
			mu.Unlock()
		}()
		return together.wait(ctx) // each item lasts until four are in progress
	})
	id, err := c.engines[0].Submit(bg, "repair", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor("four of the items in progress at once", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return most >= 4
	})
	c.waitState(c.engines[0], id, Succeeded)
	seen := map[uint64]int{}
	for _, ev := range c.d.snapshot() {
		seen[ev.item]++
	}
	for _, k := range keys {
		if seen[k] != 1 {
			t.Fatalf("item %d processed %d times (every item: %v)", k, seen[k], seen)
		}
	}
	if len(seen) != len(keys) {
		t.Fatalf("items processed %v, want exactly %v", seen, keys)
	}
	var stolen uint64
	for _, e := range c.engines {
		stolen += e.Metrics().TasksStolen
	}
	t.Logf("tasks stolen %d", stolen)
}
