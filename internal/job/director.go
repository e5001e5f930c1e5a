package job

import (
	"context"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// director runs on every node for the life of one engine lease: it keeps a
// manager for each running job whose type this node knows, hands managers
// their job's latest record, stops those whose job stopped running, and
// publishes the node's status. It needs no coordinator: a coordinator
// change does not disturb running tasks.
//
// A job has at most one manager per node at a time: a job that runs again
// while its previous manager is still releasing its tasks gets a new one
// once that is done (the manager relies on it, see acquire).
//
// Locking: mu guards managers, stopping and rates.
type director struct {
	e    *Engine
	sess *concurrency.Session
	wake chan struct{}

	mu       sync.Mutex
	managers map[JobID]*manager
	stopping map[JobID]*manager
	rates    map[JobID]rateSample // items counter at the last status
	wg       sync.WaitGroup       // stopping managers
}

func newDirector(e *Engine, sess *concurrency.Session) *director {
	return &director{e: e, sess: sess, wake: make(chan struct{}, 1),
		managers: map[JobID]*manager{}, stopping: map[JobID]*manager{}, rates: map[JobID]rateSample{}}
}

// retire stops m and forgets it once its workers have released their
// tasks. d.mu must be held.
func (d *director) retire(id JobID, m *manager) {
	m.stop()
	delete(d.managers, id)
	delete(d.rates, id)
	d.stopping[id] = m
	d.wg.Go(func() {
		m.wait()
		d.mu.Lock()
		delete(d.stopping, id)
		d.mu.Unlock()
		trySend(d.wake)
	})
}

// run reconciles on every job-record change and every Tick until ctx ends,
// then stops every manager (each checkpoints and releases its tasks).
func (d *director) run(ctx context.Context) {
	defer func() {
		d.mu.Lock()
		for id, m := range d.managers {
			d.retire(id, m)
		}
		d.mu.Unlock()
		d.wg.Wait()
	}()
	var events clientv3.WatchChan
	tick := time.NewTicker(d.e.cfg.Tick)
	defer tick.Stop()
	status := time.NewTicker(d.e.cfg.StatusInterval)
	defer status.Stop()
	d.publish(ctx) // the coordinator counts published nodes to size splits
	for ctx.Err() == nil {
		if events == nil {
			events = d.e.cfg.Client.Watch(clientv3.WithRequireLeader(ctx), prefixJobs, clientv3.WithPrefix())
		}
		if err := d.reconcile(ctx); err != nil && ctx.Err() == nil {
			d.e.log.Warn("director", "err", err)
		}
		select {
		case <-ctx.Done():
		case _, ok := <-events:
			if !ok {
				events = nil
				select { // the watch broke (etcd away): retry at the next tick
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		case <-tick.C:
		case <-d.wake:
		case <-status.C:
			d.publish(ctx)
		}
	}
}

// reconcile starts, updates and stops managers to match the job records.
func (d *director) reconcile(ctx context.Context) error {
	jobs, err := d.e.listJobs(ctx)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[JobID]bool{}
	for _, j := range jobs {
		if j.rec.State != Running {
			continue
		}
		typ := d.e.typeOf(j.rec.Type)
		if typ == nil {
			continue // the coordinator fails it; another binary may know it
		}
		seen[j.rec.ID] = true
		if m := d.managers[j.rec.ID]; m != nil {
			m.update(j.rec)
			continue
		}
		if d.stopping[j.rec.ID] != nil {
			continue // started when the previous manager is gone
		}
		m := newManager(d.e, typ, j.rec, d.sess.Lease())
		m.start(ctx)
		d.managers[j.rec.ID] = m
	}
	for id, m := range d.managers {
		if !seen[id] {
			d.retire(id, m)
		}
	}
	return nil
}

// NodeStatus is what a node's director publishes about its managers.
type NodeStatus struct {
	Node    string          `json:"node"`
	Updated time.Time       `json:"updated"`
	Jobs    []ManagerStatus `json:"jobs,omitempty"`
}

// ManagerStatus is one running job's share of a node.
type ManagerStatus struct {
	Job    JobID  `json:"job"`
	Type   string `json:"type"`
	Phase  int    `json:"phase"`
	Policy string `json:"policy"`
	// Workers is the number of worker goroutines, Duty the fraction of
	// each second each may work, Tasks the tasks they hold.
	Workers int     `json:"workers"`
	Duty    float64 `json:"duty"`
	Tasks   int     `json:"tasks"`
	// BytesPerSec is the byte rate its transfers go through (0:
	// unlimited; Allowance.BytesPerSec).
	BytesPerSec float64 `json:"bytes_per_sec,omitempty"`
	// ItemsPerSec is the rate of items processed since the last status.
	ItemsPerSec float64 `json:"items_per_sec"`
}

// status describes the node's managers now.
func (d *director) status() NodeStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	st := NodeStatus{Node: d.e.cfg.Node, Updated: now.UTC()}
	for id, m := range d.managers {
		job := m.snapshot()
		items := m.items.Load()
		ms := ManagerStatus{Job: id, Type: job.Type, Phase: job.Phase, Policy: job.Policy,
			Workers: m.workers(), Duty: m.duty(), Tasks: m.tasks(), BytesPerSec: m.rate.Rate()}
		if last, ok := d.rates[id]; ok {
			if dt := now.Sub(last.at).Seconds(); dt > 0 {
				ms.ItemsPerSec = float64(items-last.done) / dt
			}
		}
		d.rates[id] = rateSample{now, items}
		st.Jobs = append(st.Jobs, ms)
	}
	sort.Slice(st.Jobs, func(i, j int) bool { return st.Jobs[i].Job < st.Jobs[j].Job })
	return st
}

// publish writes the node's status under its lease.
func (d *director) publish(ctx context.Context) {
	rec := nodeRecord{NodeStatus: d.status()}
	if _, err := d.e.cfg.Client.Put(ctx, nodeKey(d.e.cfg.Node), encode(&rec), clientv3.WithLease(d.sess.Lease())); err != nil && ctx.Err() == nil {
		d.e.log.Warn("publish job status", "err", err)
	}
}
