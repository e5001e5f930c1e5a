package events

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/job"
)

func pool(name string, drives ...cluster.DriveUsage) cluster.PoolUsage {
	p := cluster.PoolUsage{Pool: name, Drives: drives}
	for _, d := range drives {
		p.TotalBytes += d.TotalBytes
		p.FreeBytes += d.FreeBytes
	}
	return p
}

// du is a drive of 1000 bytes with used bytes used and free bytes free.
func du(id cluster.DriveID, used, free int64) cluster.DriveUsage {
	return cluster.DriveUsage{ID: id, TotalBytes: 1000, UsedBytes: used, FreeBytes: free}
}

func TestSpaceVerdict(t *testing.T) {
	fast40 := pool("fast", du(1, 600, 400))              // 40% free
	cap31 := pool("cap", du(2, 969, 31))                 // 3.1% free
	cap55 := pool("cap", du(2, 945, 55))                 // 5.5% free: between threshold and threshold+1
	cap60 := pool("cap", du(2, 940, 60), du(3, 940, 60)) // 6.0% free: at threshold+1
	for _, c := range []struct {
		name      string
		pools     []cluster.PoolUsage
		threshold int
		on        bool
		want      bool
		reason    string // substring of the reason, when the mode changes
	}{
		{"all roomy, off", []cluster.PoolUsage{fast40}, 5, false, false, ""},
		{"one pool low turns it on", []cluster.PoolUsage{cap31, fast40}, 5, false, true, "pool cap: 3.1% free, below the 5% threshold"},
		{"still low stays on", []cluster.PoolUsage{cap31, fast40}, 5, true, true, ""},
		{"above threshold, below +1: stays on", []cluster.PoolUsage{cap55, fast40}, 5, true, true, ""},
		{"above threshold, below +1: stays off", []cluster.PoolUsage{cap55, fast40}, 5, false, false, ""},
		{"at threshold+1 turns it off", []cluster.PoolUsage{cap60, fast40}, 5, true, false, "every pool at 6% free or more (threshold 5% + 1 point); the lowest, cap, has 6.0%"},
		{"threshold 0 turns it off", []cluster.PoolUsage{cap31}, 0, true, false, "low_space_threshold is 0"},
		{"threshold 0 never turns it on", []cluster.PoolUsage{cap31}, 0, false, false, ""},
		{"threshold 50 on a roomy pool", []cluster.PoolUsage{fast40}, 50, false, true, "pool fast: 40.0% free, below the 50% threshold"},
		{"no pool in service ends the mode", nil, 5, true, false, "no pool has a drive in service"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := spaceVerdict(c.pools, c.threshold, c.on)
			if v.On != c.want {
				t.Fatalf("on = %v, want %v (%+v)", v.On, c.want, v)
			}
			if v.On != c.on && (!strings.Contains(v.Reason, c.reason) || v.Subject == "") {
				t.Fatalf("reason %q subject %q, want %q", v.Reason, v.Subject, c.reason)
			}
		})
	}
}

func TestImbalances(t *testing.T) {
	even := pool("even", du(1, 300, 700), du(2, 340, 660))                  // 4 points
	edge := pool("edge", du(3, 300, 700), du(4, 350, 650))                  // exactly 5 points: not beyond
	skew := pool("skew", du(5, 710, 290), du(6, 125, 875), du(7, 400, 600)) // 58.5 points
	alone := pool("alone", du(8, 990, 10))
	got := imbalances([]cluster.PoolUsage{alone, edge, even, skew}, 5)
	if len(got) != 1 || got[0].Pool != "skew" || got[0].Fullest.ID != 5 || got[0].Emptiest.ID != 6 {
		t.Fatalf("imbalances = %+v, want only skew (d5 fullest, d6 emptiest)", got)
	}
	if d := got[0].detail(5); d != "d5 71.0% used, d6 12.5% used: 58.5 points apart (rebalance_threshold 5)" {
		t.Fatalf("detail %q", d)
	}
	if got := imbalances([]cluster.PoolUsage{skew, even}, 3); len(got) != 2 {
		t.Fatalf("threshold 3: %+v, want even and skew", got)
	}
	if got := imbalances([]cluster.PoolUsage{skew}, 0); got != nil {
		t.Fatalf("threshold 0 (off): %+v", got)
	}
}

// A job type that does nothing, registered under the names the watcher
// submits.
type nopType struct{ name string }

func (t nopType) Name() string          { return t.name }
func (t nopType) Set() job.ExclusionSet { return job.SetRestripe }
func (t nopType) Phases() []job.Phase   { return []job.Phase{nopPhase{}} }

type nopPhase struct{}

func (nopPhase) Name() string { return "nop" }
func (nopPhase) Split(context.Context, job.Env, *job.Job) ([]job.TaskSpec, error) {
	return nil, nil
}
func (nopPhase) Items(context.Context, job.Env, string, uint64, uint64, int) ([]uint64, error) {
	return nil, nil
}
func (nopPhase) Process(context.Context, job.Env, *job.Job, string, uint64) (job.ItemResult, error) {
	return job.ItemResult{}, nil
}

type nopEnv struct{ log *slog.Logger }

func (e nopEnv) Node() string      { return "n1" }
func (e nopEnv) Log() *slog.Logger { return e.log }

// watchFixture is a control plane with a job engine that is never started
// (jobs stay queued), and a watcher driven with a fake clock.
type watchFixture struct {
	t    *testing.T
	ctx  context.Context
	cfg  Config
	sess map[string]*cluster.Session
	now  time.Time
	seen uint64 // events already checked
}

func newWatchFixture(t *testing.T, grace time.Duration, types ...string) *watchFixture {
	ctx := context.Background()
	cli := etcdtest.New(t)
	store, err := cluster.Open(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	// As in a cluster created before the watcher's record existed: its
	// first look learns the membership. (TestWatcherNewClusterStartsNoMultiscan
	// puts the record back, as a new cluster's bootstrap writes it.)
	if _, err := cli.Delete(ctx, cluster.Prefix+"watch"); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := job.New(job.Config{Client: cli, Node: "n1", Env: nopEnv{log}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range types {
		if err := eng.Register(nopType{name}); err != nil {
			t.Fatal(err)
		}
	}
	f := &watchFixture{t: t, ctx: ctx, sess: map[string]*cluster.Session{}, now: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC),
		cfg: Config{RepairGrace: grace, Log: log, Store: store, Jobs: eng}}
	t.Cleanup(func() {
		for _, s := range f.sess {
			s.Close()
		}
	})
	return f
}

func (f *watchFixture) node(name string) {
	f.t.Helper()
	s, err := f.cfg.Store.RegisterNode(f.ctx, cluster.NodeRecord{Name: name, GRPCAddr: name + ":1"}, cluster.NodeLive{PID: 1}, 10*time.Second, f.cfg.Log)
	if err != nil {
		f.t.Fatal(err)
	}
	f.sess[name] = s
}

// drive registers (or re-publishes) drive id on node with used and free
// bytes of 1000 and blocks; errMsg non-empty marks it down.
func (f *watchFixture) drive(node string, id cluster.DriveID, used, free, blocks int64, errMsg string) {
	f.t.Helper()
	f.register(cluster.DriveRecord{ID: id, Node: node, Class: "ssd", Pool: "default"}, used, free, blocks, errMsg)
}

// register is drive with the record rec (its path made up).
func (f *watchFixture) register(rec cluster.DriveRecord, used, free, blocks int64, errMsg string) {
	f.t.Helper()
	node, id := rec.Node, rec.ID
	rec.Path = fmt.Sprintf("/%s/%s", node, id)
	if _, err := f.cfg.Store.RegisterDrive(f.ctx, rec); err != nil {
		f.t.Fatal(err)
	}
	if err := f.sess[node].PublishDrive(f.ctx, id, cluster.DriveLive{TotalBytes: 1000, UsedBytes: used, FreeBytes: free, Blocks: blocks, Error: errMsg}); err != nil {
		f.t.Fatal(err)
	}
}

// check runs one check of w at the fixture's clock plus d.
func (f *watchFixture) check(w *Watcher, d time.Duration) {
	f.t.Helper()
	f.now = f.now.Add(d)
	if err := w.check(f.ctx, f.now); err != nil {
		f.t.Fatalf("check: %v", err)
	}
}

// newEvents returns the events recorded since the last call, as
// "kind subject job outcome" lines.
func (f *watchFixture) newEvents() []string {
	f.t.Helper()
	evs, err := f.cfg.Jobs.Events(f.ctx, job.DefaultKeepEvents)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if ev.ID > f.seen {
			out = append(out, fmt.Sprintf("%s %s %d %s", ev.Kind, ev.Subject, ev.Job, ev.Outcome))
			f.seen = ev.ID
		}
	}
	return out
}

func (f *watchFixture) expect(what string, want ...string) {
	f.t.Helper()
	got := f.newEvents()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		f.t.Fatalf("%s: events\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func (f *watchFixture) settings(lowSpace, rebalance int) {
	f.t.Helper()
	st, err := f.cfg.Jobs.Settings(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	st.LowSpaceThreshold, st.RebalanceThreshold = lowSpace, rebalance
	if err := f.cfg.Jobs.SetSettings(f.ctx, st); err != nil {
		f.t.Fatal(err)
	}
}

// Additions: the first watch only learns the cluster; a node and drive
// added later start one multiscan, named by every event; more drives while
// it is queued name it again; a cluster without blocks starts none.
func TestWatcherAdditions(t *testing.T) {
	f := newWatchFixture(t, time.Minute, "multiscan", "rebalance", "repair")
	f.node("n1")
	f.drive("n1", 1, 100, 900, 5, "")
	f.drive("n1", 2, 100, 900, 5, "")
	w := New(f.cfg)
	f.check(w, 0)
	f.expect("first watch")

	f.node("n2")
	f.drive("n2", 3, 0, 1000, 0, "")
	f.drive("n2", 4, 0, 1000, 0, "")
	f.check(w, 5*time.Second)
	// The new drives are empty: the pool is out of balance too, and the
	// queued multiscan covers it.
	f.expect("node with two drives added",
		"node-added node n2 1 started multiscan job 1",
		"drive-added d3 1 started multiscan job 1",
		"drive-added d4 1 started multiscan job 1",
		"pool-unbalanced pool default 1 multiscan job 1 already queued")
	f.check(w, 5*time.Second)
	f.expect("nothing new")

	// A coordinator change keeps what was seen.
	w = New(f.cfg)
	f.drive("n2", 5, 0, 1000, 0, "")
	f.check(w, 5*time.Second)
	f.expect("drive added while the multiscan is queued, after a coordinator change",
		"drive-added d5 1 multiscan job 1 already queued",
		"pool-unbalanced pool default 1 multiscan job 1 already queued")
}

func TestWatcherNewClusterStartsNoMultiscan(t *testing.T) {
	f := newWatchFixture(t, time.Minute, "multiscan")
	if _, err := f.cfg.Store.SaveWatch(f.ctx, cluster.WatchRecord{}, 0); err != nil { // as bootstrap writes it
		t.Fatal(err)
	}
	f.node("n1")
	f.drive("n1", 1, 0, 1000, 0, "")
	w := New(f.cfg)
	f.check(w, 0)
	f.expect("the first node of a new cluster",
		"node-added node n1 0 no job: the cluster stores no blocks yet, so there is nothing to spread",
		"drive-added d1 0 no job: the cluster stores no blocks yet, so there is nothing to spread")
	f.node("n2") // joins a second later, before anything was written
	f.drive("n2", 2, 0, 1000, 0, "")
	f.check(w, 5*time.Second)
	f.expect("late node of a new cluster",
		"node-added node n2 0 no job: the cluster stores no blocks yet, so there is nothing to spread",
		"drive-added d2 0 no job: the cluster stores no blocks yet, so there is nothing to spread")
	if jobs, err := f.cfg.Jobs.List(f.ctx); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs %+v, %v; want none", jobs, err)
	}
}

// The drives of a new cluster written to before the watcher's first look
// (as a benchmark does, the moment the mount is up) joined before it
// stored data: every file was placed with them, and no multiscan starts.
// A drive that joins afterwards starts one, and records that once
// registered keep what they said at their first registration.
func TestWatcherDrivesThatJoinedEmpty(t *testing.T) {
	f := newWatchFixture(t, time.Minute, "multiscan")
	if _, err := f.cfg.Store.SaveWatch(f.ctx, cluster.WatchRecord{}, 0); err != nil { // as bootstrap writes it
		t.Fatal(err)
	}
	f.node("n1")
	f.node("n2")
	f.register(cluster.DriveRecord{ID: 1, Node: "n1", Class: "ssd", Pool: "default", JoinedEmpty: true}, 400, 600, 9, "")
	f.register(cluster.DriveRecord{ID: 2, Node: "n2", Class: "ssd", Pool: "default", JoinedEmpty: true}, 400, 600, 9, "")
	w := New(f.cfg)
	f.check(w, 0)
	f.expect("a new cluster's drives, data written before the first look",
		"node-added node n1 0 no job: joined before any data was written, so every file was placed with them",
		"node-added node n2 0 no job: joined before any data was written, so every file was placed with them",
		"drive-added d1 0 no job: joined before any data was written, so every file was placed with them",
		"drive-added d2 0 no job: joined before any data was written, so every file was placed with them")

	f.node("n3") // a node alone has nothing to spread onto
	f.check(w, 5*time.Second)
	f.expect("a node without drives",
		"node-added node n3 0 no job: joined before any data was written, so every file was placed with them")

	// Registered again (a restart) saying otherwise: the first word stands.
	f.register(cluster.DriveRecord{ID: 1, Node: "n1", Class: "ssd", Pool: "default"}, 400, 600, 9, "")
	if d, err := f.cfg.Store.GetDrive(f.ctx, 1); err != nil || !d.JoinedEmpty {
		t.Fatalf("drive 1 after a second registration: %+v, %v; want it to have joined empty still", d, err)
	}
	f.register(cluster.DriveRecord{ID: 3, Node: "n3", Class: "ssd", Pool: "default"}, 0, 1000, 0, "")
	f.register(cluster.DriveRecord{ID: 4, Node: "n3", Class: "ssd", Pool: "default", JoinedEmpty: true}, 0, 1000, 0, "")
	f.check(w, 5*time.Second)
	f.expect("a drive added to a cluster storing data",
		"drive-added d3 1 started multiscan job 1",
		"drive-added d4 1 started multiscan job 1",
		"pool-unbalanced pool default 1 multiscan job 1 already queued")
}

// Balance: an unbalanced pool starts one rebalance (pool=NAME), recorded
// once while it runs; it is checked every 30 s, not at every check; the
// rebalance_threshold setting governs; without the job type the event
// says why no job started.
func TestWatcherBalance(t *testing.T) {
	f := newWatchFixture(t, time.Minute, "rebalance")
	f.node("n1")
	f.drive("n1", 1, 400, 600, 9, "")
	f.drive("n1", 2, 380, 620, 9, "")
	w := New(f.cfg)
	f.check(w, 0)
	f.expect("balanced")
	f.drive("n1", 2, 300, 700, 9, "") // 10 points apart
	f.check(w, 5*time.Second)
	f.expect("before the balance interval")
	f.check(w, balanceInterval)
	f.expect("unbalanced", "pool-unbalanced pool default 1 started rebalance job 1")
	j, err := f.cfg.Jobs.Get(f.ctx, 1)
	if err != nil || j.Type != "rebalance" || j.Params["pool"] != "default" {
		t.Fatalf("job 1 = %+v, %v", j, err)
	}
	f.check(w, balanceInterval)
	f.expect("still unbalanced, job queued")
	f.settings(5, 20)
	if err := f.cfg.Jobs.Cancel(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.check(w, balanceInterval)
	f.expect("under a raised threshold")
	f.settings(5, 5)
	f.check(w, balanceInterval)
	f.expect("again beyond the threshold, previous job cancelled", "pool-unbalanced pool default 2 started rebalance job 2")

	g := newWatchFixture(t, time.Minute) // no rebalance type registered
	g.node("n1")
	g.drive("n1", 1, 900, 100, 9, "")
	g.drive("n1", 2, 100, 900, 9, "")
	w = New(g.cfg)
	g.check(w, 0)
	evs := g.newEvents()
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "pool-unbalanced pool default 0 no job: job: unknown job type: \"rebalance\"") {
		t.Fatalf("events %q", evs)
	}
	g.check(w, balanceInterval)
	g.expect("the same failure again is not recorded")
}

// Low-space mode follows the pools' free space with hysteresis; each
// change is one event; weft status's mode shows it.
func TestWatcherLowSpace(t *testing.T) {
	f := newWatchFixture(t, time.Minute)
	f.node("n1")
	f.drive("n1", 1, 900, 100, 9, "")
	f.drive("n1", 2, 900, 100, 9, "")
	w := New(f.cfg)
	f.check(w, 0)
	f.expect("10% free")
	mode := func() job.Mode {
		t.Helper()
		m, err := f.cfg.Jobs.Mode(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	f.drive("n1", 2, 970, 30, 9, "") // pool at 6.5% free
	f.settings(7, 5)
	f.check(w, time.Second)
	f.expect("below 7%", "low-space pool default 0 low-space mode on: jobs that do not free space pause")
	if m := mode(); m.Mode != job.ModeLowSpace || m.Reason != "pool default: 6.5% free, below the 7% threshold" {
		t.Fatalf("mode %+v", m)
	}
	f.drive("n1", 2, 950, 50, 9, "") // 7.5%: above the threshold, below +1
	f.check(w, time.Second)
	f.expect("between threshold and threshold+1")
	if mode().Mode != job.ModeLowSpace {
		t.Fatal("mode ended before threshold+1")
	}
	f.drive("n1", 2, 940, 60, 9, "") // 8%
	f.check(w, time.Second)
	f.expect("at threshold+1", "space-recovered pool default 0 low-space mode off: jobs paused for it resume")
	if mode().Mode != job.ModeNormal {
		t.Fatal("mode still on")
	}
	f.settings(50, 5)
	f.check(w, time.Second)
	f.expect("threshold 50", "low-space pool default 0 low-space mode on: jobs that do not free space pause")
	f.settings(0, 5)
	f.check(w, time.Second)
	f.expect("threshold 0", "space-recovered cluster 0 low-space mode off: jobs paused for it resume")
}

// Down drives: recorded when first seen down, a repair after the grace
// period (recorded once while it is queued), and the grace period is not
// restarted by a coordinator change.
func TestWatcherDownDrive(t *testing.T) {
	f := newWatchFixture(t, time.Minute, "repair")
	f.node("n1")
	f.drive("n1", 1, 100, 900, 9, "")
	f.drive("n1", 2, 100, 900, 9, "")
	w := New(f.cfg)
	f.check(w, 0)
	f.drive("n1", 2, 100, 900, 9, "read-only file system")
	f.check(w, time.Second)
	f.expect("down", "drive-down d2 0 repair due at 2026-03-02T10:01:01Z (grace 1m0s) unless it returns")
	w = New(f.cfg) // coordinator change: the grace period runs on
	f.check(w, 40*time.Second)
	f.expect("within the grace period")
	f.check(w, 20*time.Second)
	f.expect("past the grace period", "drive-down d2 1 started repair job 1")
	j, err := f.cfg.Jobs.Get(f.ctx, 1)
	if err != nil || j.Priority != 1 || !strings.Contains(j.Params["reason"], "d2") {
		t.Fatalf("repair job = %+v, %v", j, err)
	}
	f.check(w, time.Minute)
	f.expect("a grace period later, the repair still queued")
	f.drive("n1", 2, 100, 900, 9, "") // back
	f.check(w, time.Second)
	f.drive("n1", 2, 100, 900, 9, "gone again")
	f.check(w, time.Second)
	f.expect("down again", "drive-down d2 0 repair due at 2026-03-02T10:03:03Z (grace 1m0s) unless it returns")
}

// Under-protected stripes: an index that fills while every drive is up
// starts one repair (recorded once while it is queued); new stripes after
// the repair was cancelled start another; a drive coming back with the
// index not empty starts one at once; an empty index records nothing,
// and the next shortfall is a new event. (The cooldown after a repair
// ended needs a running engine: the cluster tests exercise it.)
func TestWatcherProtection(t *testing.T) {
	f := newWatchFixture(t, time.Minute, "repair")
	var p Protection
	f.cfg.Protection = func(context.Context) (Protection, error) { return p, nil }
	f.node("n1")
	f.drive("n1", 1, 100, 900, 9, "")
	f.drive("n1", 2, 100, 900, 9, "")
	w := New(f.cfg)
	f.check(w, 0)
	f.expect("empty index")

	p = Protection{Files: 1, Stripes: 3, Bytes: 300, Newest: time.Now()}
	f.check(w, time.Second)
	f.expect("stripes below their protection, every drive up",
		"under-protected protection index 1 started repair job 1")
	j, err := f.cfg.Jobs.Get(f.ctx, 1)
	if err != nil || j.Type != "repair" || !strings.Contains(j.Params["reason"], "under-protected stripes") {
		t.Fatalf("job 1 = %+v, %v", j, err)
	}
	p.Newest = time.Now()
	f.check(w, time.Second)
	f.expect("more stripes while the repair is queued: it covers them")

	cancel := func(id job.JobID) {
		t.Helper()
		if err := f.cfg.Jobs.Cancel(f.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	cancel(1)
	p.Newest = time.Now()
	f.check(w, time.Second)
	f.expect("new stripes, the repair cancelled", "under-protected protection index 2 started repair job 2")

	cancel(2)
	f.drive("n1", 2, 100, 900, 9, "gone")
	f.check(w, time.Second)
	f.expect("drive down: not every drive is up", "drive-down d2 0 repair due at 2026-03-02T10:01:04Z (grace 1m0s) unless it returns")
	f.drive("n1", 2, 100, 900, 9, "")
	f.check(w, time.Second)
	f.expect("drive back with the index not empty", "under-protected protection index 3 started repair job 3")
	f.check(w, time.Second)
	f.expect("nothing new")

	p = Protection{}
	f.check(w, time.Second)
	f.expect("index empty")
	p = Protection{Incomplete: true, IncompleteSince: time.Now()}
	f.check(w, time.Second)
	f.expect("an index marked incomplete after the last repair was submitted",
		"under-protected protection index 3 repair job 3 already queued")
}

// TestReturnedDrivesNeedAFreshRepair: drives coming back are covered only by
// a repair that has not started (or that a user paused): one running may
// have passed their stripes while they were down.
func TestReturnedDrivesNeedAFreshRepair(t *testing.T) {
	for _, tc := range []struct {
		typ   string
		state job.State
		want  bool
	}{
		{"repair", job.Queued, true},
		{"repair", job.Paused, true},
		{"repair", job.Running, false},
		{"repair", job.SystemPaused, false},
		{"repair", job.Succeeded, false},
		{"drain", job.Queued, false},
	} {
		if got := notStartedRepair(job.JobView{Type: tc.typ, State: tc.state}); got != tc.want {
			t.Errorf("%s %s covers returned drives: %v, want %v", tc.typ, tc.state, got, tc.want)
		}
	}
}
