package job

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/failpoint"
)

// Task claiming, stealing and checkpointing: the transactions of schema.go
// that let directors share a phase's tasks without the coordinator.

// taskEntry is a task record as read, with its key's ModRevision.
type taskEntry struct {
	rec    taskRecord
	modRev int64
}

// phaseView is a phase's tasks and their owners read at one revision.
type phaseView struct {
	tasks  []taskEntry
	owners map[string]ownerEntry // by task suffix
}

type ownerEntry struct {
	node      string
	lease     clientv3.LeaseID
	createRev int64
}

// listPhase reads a phase's tasks and owners in one snapshot.
func (e *Engine) listPhase(ctx context.Context, id JobID, phase int) (phaseView, error) {
	sfx := phaseSuffix(id, phase)
	resp, err := e.cfg.Client.Txn(ctx).Then(
		clientv3.OpGet(prefixTasks+sfx, clientv3.WithPrefix()),
		clientv3.OpGet(prefixOwners+sfx, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return phaseView{}, fmt.Errorf("job: list tasks of job %d phase %d: %w", id, phase, err)
	}
	v := phaseView{owners: map[string]ownerEntry{}}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var t taskRecord
		if err := decode(string(kv.Key), kv.Value, &t); err != nil {
			return phaseView{}, err
		}
		v.tasks = append(v.tasks, taskEntry{t, kv.ModRevision})
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var o ownerRecord
		if err := decode(string(kv.Key), kv.Value, &o); err != nil {
			return phaseView{}, err
		}
		v.owners[string(kv.Key[len(prefixOwners):])] = ownerEntry{o.Node, clientv3.LeaseID(kv.Lease), kv.CreateRevision}
	}
	return v, nil
}

// heldTask is a task this node holds: the record as it will be
// checkpointed, and the revisions its writes are fenced on.
type heldTask struct {
	rec      taskRecord
	key      string
	ownerKey string
	modRev   int64 // the task key's ModRevision as last written or read
	ownerRev int64 // the owner key's CreateRevision: our claim
}

func newHeld(rec taskRecord, modRev, ownerRev int64) *heldTask {
	sfx := rec.suffix()
	return &heldTask{rec: rec, key: prefixTasks + sfx, ownerKey: prefixOwners + sfx, modRev: modRev, ownerRev: ownerRev}
}

func (e *Engine) ownerValue() string {
	return encode(&ownerRecord{Node: e.cfg.Node, Claimed: time.Now().UTC()})
}

// claimContext is the context of a claim or steal: not cancelled when the
// manager stops, so that the claim's outcome is known (a claim committed
// but unanswered would hold the task until the lease ends; acquire adopts
// such a claim if it happens anyway).
func (e *Engine) claimContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), e.cfg.LeaseTTL)
}

// claim binds an unowned task to lease. It returns nil, nil when another
// node changed or claimed the task first.
func (e *Engine) claim(ctx context.Context, lease clientv3.LeaseID, t taskEntry) (*heldTask, error) {
	ctx, cancel := e.claimContext(ctx)
	defer cancel()
	h := newHeld(t.rec, t.modRev, 0)
	resp, err := e.cfg.Client.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(h.key), "=", t.modRev),
		clientv3.Compare(clientv3.CreateRevision(h.ownerKey), "=", 0),
	).Then(clientv3.OpPut(h.ownerKey, e.ownerValue(), clientv3.WithLease(lease))).Commit()
	if err != nil {
		return nil, fmt.Errorf("job: claim task %s: %w", h.key, err)
	}
	if !resp.Succeeded {
		e.m.claimConflicts.Add(1)
		return nil, nil
	}
	h.ownerRev = resp.Header.Revision
	e.m.tasksClaimed.Add(1)
	return h, nil
}

// stealPoint returns where a steal would split t — half of what remains,
// but never inside the holder's reservation (the items it has listed and
// may be processing) — or false when either half would be narrower than
// minSteal.
func stealPoint(t taskRecord, minSteal uint64) (uint64, bool) {
	rem := t.remaining()
	if rem < 2*minSteal {
		return 0, false
	}
	mid := max(t.Cursor+rem/2, t.Reserved)
	if mid >= t.To || t.To-mid < minSteal {
		return 0, false
	}
	return mid, true
}

// steal splits an owned task at mid (stealSplit: past the holder's
// reservation): the victim keeps [From, mid) (its owner sees the lower To
// at its next checkpoint, and never processes an item at or past mid: it
// reserves items before processing them, and mid is past the
// reservation) and this node claims the new task [mid, To). nil, nil when
// the victim changed first.
func (e *Engine) steal(ctx context.Context, lease clientv3.LeaseID, victim taskEntry, owner ownerEntry, mid uint64) (*heldTask, error) {
	if victim.rec.Serial || mid < max(victim.rec.Cursor, victim.rec.Reserved) || mid >= victim.rec.To || !victim.rec.claimableBy(e.cfg.Node) {
		return nil, nil
	}
	ctx, cancel := e.claimContext(ctx)
	defer cancel()
	vh := newHeld(victim.rec, victim.modRev, owner.createRev)
	shrunk := victim.rec
	shrunk.To = mid
	nrec := taskRecord{Job: victim.rec.Job, Phase: victim.rec.Phase, Scope: victim.rec.Scope,
		From: mid, To: victim.rec.To, Cursor: mid, Node: e.cfg.Node, Updated: time.Now().UTC(),
		Affinity: victim.rec.Affinity}
	h := newHeld(nrec, 0, 0)
	resp, err := e.cfg.Client.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(vh.key), "=", victim.modRev),
		clientv3.Compare(clientv3.CreateRevision(vh.ownerKey), "=", owner.createRev),
		clientv3.Compare(clientv3.CreateRevision(h.key), "=", 0),
	).Then(
		clientv3.OpPut(vh.key, encode(&shrunk)),
		clientv3.OpPut(h.key, encode(&nrec)),
		clientv3.OpPut(h.ownerKey, e.ownerValue(), clientv3.WithLease(lease)),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("job: steal from task %s: %w", vh.key, err)
	}
	if !resp.Succeeded {
		e.m.claimConflicts.Add(1)
		return nil, nil
	}
	h.modRev, h.ownerRev = resp.Header.Revision, resp.Header.Revision
	e.m.tasksStolen.Add(1)
	return h, nil
}

// checkpoint writes h's cursor and counters. A task whose cursor reached
// its end is written done; a done, failed or released (release) task's
// owner key is deleted in the same transaction. When a steal lowered the
// task's end meanwhile, checkpoint adopts it and writes again. It returns
// errLost when the claim is gone (expired lease, job ended): the caller
// drops the task without another write.
func (e *Engine) checkpoint(ctx context.Context, h *heldTask, release bool) error {
	for range 16 {
		rec := h.rec
		if rec.Cursor >= rec.To {
			rec.Cursor, rec.Done = rec.To, true
		}
		rec.Node, rec.Updated = e.cfg.Node, time.Now().UTC()
		ops := []clientv3.Op{clientv3.OpPut(h.key, encode(&rec))}
		if release || rec.Done || rec.Failed != "" {
			ops = append(ops, clientv3.OpDelete(h.ownerKey))
		}
		// Failpoint job/before-checkpoint: a crash loses the progress
		// since the last checkpoint; the task is claimed again once the
		// node's lease expires and redone from that checkpoint. Its error
		// is a write that failed: the worker carries on and retries.
		if err := failpoint.Eval("job/before-checkpoint"); err != nil {
			return fmt.Errorf("job: checkpoint task %s: %w", h.key, err)
		}
		resp, err := e.cfg.Client.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(h.key), "=", h.modRev),
			clientv3.Compare(clientv3.CreateRevision(h.ownerKey), "=", h.ownerRev),
		).Then(ops...).Else(clientv3.OpGet(h.key), clientv3.OpGet(h.ownerKey)).Commit()
		if err != nil {
			return fmt.Errorf("job: checkpoint task %s: %w", h.key, err)
		}
		if resp.Succeeded {
			// Failpoint job/after-checkpoint: the checkpoint is written; a
			// crash leaves it for whoever claims the task next (the items
			// it covers are not redone). Its error is a reply lost after
			// the write: the next checkpoint finds the record changed
			// under it and adopts it, or finds the claim gone.
			if err := failpoint.Eval("job/after-checkpoint"); err != nil {
				return fmt.Errorf("job: checkpoint task %s: %w", h.key, err)
			}
			h.rec, h.modRev = rec, resp.Header.Revision
			e.m.checkpoints.Add(1)
			return nil
		}
		tk := resp.Responses[0].GetResponseRange().Kvs
		ok := resp.Responses[1].GetResponseRange().Kvs
		if len(tk) == 0 || len(ok) == 0 || ok[0].CreateRevision != h.ownerRev {
			return errLost
		}
		e.m.checkpointConflicts.Add(1)
		if err := h.adopt(tk[0]); err != nil {
			return err
		}
	}
	return fmt.Errorf("job: checkpoint task %s: too many conflicting writes", h.key)
}

// adopt takes what others may change in a held task's record (a lower end,
// from a steal) from its current value.
func (h *heldTask) adopt(kv *mvccpb.KeyValue) error {
	var cur taskRecord
	if err := decode(string(kv.Key), kv.Value, &cur); err != nil {
		return err
	}
	h.modRev = kv.ModRevision
	if cur.To < h.rec.To {
		h.rec.To = cur.To
	}
	return nil
}
