package job

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/runner"
)

// manager runs one job on one node: the runner, which asks the Throttle
// for an Allowance and keeps that many workers going at that duty cycle,
// and the workers, each holding at most one task. Workers do one unit per
// step (one item, one listing, one claim); the runner, not the worker,
// rests between steps (duty cycle, idle back-off) and stops them.
//
// Locking: mu guards job and alive; acquireMu serializes the node's claims
// for the job so that its own workers do not race each other.
type manager struct {
	e      *Engine
	id     JobID
	typ    Type
	phases []Phase
	lease  clientv3.LeaseID

	mu    sync.Mutex
	job   jobRecord      // the latest record the director saw
	alive []bool         // worker goroutines running, by index
	holds map[int64]bool // claims (owner CreateRevisions) workers hold
	// dropped are claims workers gave up, until the listing no longer shows
	// them (a listing can predate the write that ended the claim).
	dropped map[int64]bool

	acquireMu sync.Mutex
	// wake is closed (and replaced) when the job's record changes: idle
	// workers rest until then or their backoff ends (woken).
	wake chan struct{}
	// barren are tasks a steal found nothing to take from, by task suffix,
	// at the ModRevision of the record it listed (under acquireMu).
	barren map[string]int64

	target   atomic.Int64    // workers allowed
	dutyBits atomic.Uint64   // math.Float64bits(duty)
	rate     *runner.Limiter // the allowance's byte rate, shared by the workers
	items    atomic.Uint64   // items processed, for items/s
	poke     chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

func newManager(e *Engine, typ Type, rec jobRecord, lease clientv3.LeaseID) *manager {
	m := &manager{e: e, id: rec.ID, typ: typ, phases: typ.Phases(), lease: lease, job: rec,
		holds: map[int64]bool{}, dropped: map[int64]bool{}, barren: map[string]int64{}, wake: make(chan struct{}), poke: make(chan struct{}, 1), done: make(chan struct{}),
		rate: runner.NewLimiter(nil)}
	m.dutyBits.Store(math.Float64bits(1))
	return m
}

// start runs the manager until stop.
func (m *manager) start(ctx context.Context) {
	ctx, m.cancel = context.WithCancel(WithJobID(ctx, m.id))
	go m.run(ctx)
}

// stop asks the workers to stop at their next step, checkpoint and release
// their tasks; wait waits for them.
func (m *manager) stop()         { m.cancel() }
func (m *manager) wait()         { <-m.done }
func (m *manager) kick()         { trySend(m.poke) }
func (m *manager) duty() float64 { return math.Float64frombits(m.dutyBits.Load()) }

func trySend(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// update hands the manager the job's latest record (policy, priority,
// phase): a policy change reaches the Throttle at the next allowance.
func (m *manager) update(rec jobRecord) {
	m.mu.Lock()
	changed := rec.Policy != m.job.Policy || rec.Phase != m.job.Phase || rec.PhaseSplit != m.job.PhaseSplit
	m.job = rec
	if changed {
		close(m.wake) // idle workers look for tasks at once
		m.wake = make(chan struct{})
	}
	m.mu.Unlock()
	if changed {
		m.kick()
	}
}

// woken returns a channel closed when the job's record next changes in a
// way that may give idle workers something to do (a phase split).
func (m *manager) woken() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wake
}

func (m *manager) snapshot() jobRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.job
}

// run is the runner: it applies the Throttle's allowance every
// AllowanceInterval (or when kicked) by starting workers; workers beyond
// the allowance stop themselves at their next step.
func (m *manager) run(ctx context.Context) {
	defer close(m.done)
	var wg sync.WaitGroup
	t := time.NewTicker(m.e.cfg.AllowanceInterval)
	defer t.Stop()
	for {
		job := m.snapshot()
		a := m.e.cfg.Throttle.Allowance(m.id.String(), job.Policy).normalize()
		m.target.Store(int64(a.Workers))
		m.dutyBits.Store(math.Float64bits(a.Duty))
		m.rate.SetRate(a.BytesPerSec)
		m.mu.Lock()
		for i := range a.Workers {
			if i >= len(m.alive) {
				m.alive = append(m.alive, false)
			}
			if !m.alive[i] {
				m.alive[i] = true
				wg.Add(1)
				go func() {
					defer wg.Done()
					m.work(ctx, i)
				}()
			}
		}
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			wg.Wait()
			if f, ok := m.e.cfg.Throttle.(Forgetter); ok {
				f.Forget(m.id.String())
			}
			return
		case <-t.C:
		case <-m.poke:
		}
	}
}

// tasks returns how many tasks the workers hold.
func (m *manager) tasks() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.holds)
}

// workers returns how many worker goroutines run now.
func (m *manager) workers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, a := range m.alive {
		if a {
			n++
		}
	}
	return n
}

// work runs worker i's steps until the manager stops or the allowance
// drops below i+1, then releases its task.
func (m *manager) work(ctx context.Context, i int) {
	w := &worker{m: m}
	defer func() {
		w.release(ctx)
		m.mu.Lock()
		m.alive[i] = false
		m.mu.Unlock()
	}()
	idleMin, idleMax := 10*time.Millisecond, max(m.e.cfg.Tick, 10*time.Millisecond)
	idle := idleMin
	// The duty cycle: rest after each step, or inside a long one that
	// calls runner.Rest between its parts (the stripes of a file), for
	// (1-duty)/duty of the time worked; and the byte rate, if any, that
	// the step's transfers spend through (runner.Spend).
	pacer := runner.NewPacer(m.duty, m.rate, nil)
	pctx := runner.WithPacer(ctx, pacer)
	for ctx.Err() == nil && int64(i) < m.target.Load() {
		woken := m.woken() // before the step: a change during it ends the rest
		var rest time.Duration
		pacer.Start()
		switch w.step(pctx) {
		case stepBusy:
			idle = idleMin
			woken = nil // a duty cycle's rest is not cut short
			rest = pacer.Owed()
		case stepIdle:
			rest = idle
			idle = min(2*idle, idleMax)
		}
		if rest > 0 {
			t := time.NewTimer(rest)
			select {
			case <-ctx.Done():
			case <-t.C:
			case <-woken:
				idle = idleMin
			}
			t.Stop()
		}
	}
}

// hold records that a worker holds the claim h (or, release, no longer).
func (m *manager) hold(h *heldTask, held bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if held {
		m.holds[h.ownerRev] = true
	} else {
		delete(m.holds, h.ownerRev)
		m.dropped[h.ownerRev] = true
	}
}

// orphan reports whether rev, a claim under this node's lease, is held by
// no worker and was never given up: a claim whose answer was lost. It
// forgets dropped claims the listing owners no longer shows.
func (m *manager) orphan(rev int64, owners map[string]ownerEntry) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.dropped) > 0 {
		live := map[int64]bool{}
		for _, o := range owners {
			live[o.createRev] = true
		}
		for r := range m.dropped {
			if !live[r] {
				delete(m.dropped, r)
			}
		}
	}
	return !m.holds[rev] && !m.dropped[rev]
}

// acquire gives a worker a task: a claim of this node's lease that no
// worker holds (a claim whose answer was lost), else an unowned task of
// the current phase (claimed in random order, so nodes rarely collide),
// else a steal of the largest remaining range owned by anyone. Tasks
// pinned to another node (affinity) are neither claimed nor stolen. nil, nil
// when there is nothing to take. The director runs one manager per job at
// a time, so a claim under this node's lease that no worker of this
// manager holds is nobody's.
func (m *manager) acquire(ctx context.Context, job jobRecord) (*heldTask, error) {
	m.acquireMu.Lock()
	defer m.acquireMu.Unlock()
	h, err := m.pick(ctx, job)
	if h != nil {
		m.hold(h, true)
	}
	return h, err
}

func (m *manager) pick(ctx context.Context, job jobRecord) (*heldTask, error) {
	v, err := m.e.listPhase(ctx, m.id, job.Phase)
	if err != nil {
		return nil, err
	}
	var free, owned []taskEntry
	for _, t := range v.tasks {
		if t.rec.Failed != "" {
			return nil, nil // the job is failing; the coordinator will end it
		}
		if t.rec.remaining() == 0 {
			continue
		}
		if !t.rec.claimableBy(m.e.cfg.Node) {
			m.e.m.tasksPassed.Add(1) // pinned to another node (TaskSpec.Node)
			continue
		}
		o, ok := v.owners[t.rec.suffix()]
		switch {
		case !ok:
			free = append(free, t)
		case o.lease == m.lease && m.orphan(o.createRev, v.owners):
			m.e.m.tasksClaimed.Add(1)
			return newHeld(t.rec, t.modRev, o.createRev), nil
		default:
			owned = append(owned, t)
		}
	}
	rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	for _, t := range free {
		h, err := m.e.claim(ctx, m.lease, t)
		if err != nil || h != nil {
			return h, err
		}
	}
	slices.SortFunc(owned, func(a, b taskEntry) int {
		ra, rb := a.rec.remaining(), b.rec.remaining()
		switch {
		case ra > rb:
			return -1
		case ra < rb:
			return 1
		}
		return 0
	})
	for _, t := range owned[:min(len(owned), 3)] {
		mid, ok := m.stealSplit(ctx, t)
		if !ok {
			continue
		}
		h, err := m.e.steal(ctx, m.lease, t, v.owners[t.rec.suffix()], mid)
		if err != nil || h != nil {
			return h, err
		}
	}
	return nil, nil
}

// stealSplit returns where a steal would split the owned task t, from the
// items that lie past its holder's reservation (listed, up to a batch):
// at the middle one when that is all of them — so that a task of a few
// slow items (large files to repair) is shared item by item whatever
// their keys, even one item — and, when more remain, at half the range
// (stealPoint), or at the middle listed item if the range is too narrow
// to halve. false when no item is left to take, the task is serial
// (TaskSpec.Serial), or the listing failed. A
// task found with nothing to take is not listed again until its record
// changes. Callers hold acquireMu.
func (m *manager) stealSplit(ctx context.Context, t taskEntry) (uint64, bool) {
	key := t.rec.suffix()
	if rev, ok := m.barren[key]; ok && rev == t.modRev {
		return 0, false
	}
	from := max(t.rec.Cursor, t.rec.Reserved)
	if t.rec.Serial || t.rec.remaining() == 0 || from >= t.rec.To || t.rec.Phase >= len(m.phases) {
		return 0, false
	}
	limit := m.e.cfg.BatchSize
	items, err := m.phases[t.rec.Phase].Items(ctx, m.e.cfg.Env, t.rec.Scope, from, t.rec.To, limit)
	if err == nil {
		err = checkItems(items, from, t.rec.To, limit)
	}
	if err != nil {
		if ctx.Err() == nil {
			m.e.log.Debug("list items to steal", "job", m.id, "task", key, "err", err)
		}
		return 0, false
	}
	if len(items) == 0 {
		m.barren[key] = t.modRev
		return 0, false
	}
	if len(items) == limit {
		if mid, ok := stealPoint(t.rec, m.e.cfg.MinSteal); ok {
			return mid, true
		}
	}
	return items[len(items)/2], true
}
