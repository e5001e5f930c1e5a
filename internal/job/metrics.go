package job

import "sync/atomic"

// Metrics are an engine's counters since New, for a Prometheus collector
// (added by the server) and for tests. All are monotonic.
type Metrics struct {
	// ItemsProcessed counts items processed successfully on this node;
	// ItemRetries failed attempts that were retried; ItemFailures items
	// that failed their task.
	ItemsProcessed uint64
	ItemRetries    uint64
	ItemFailures   uint64
	// Bytes sums ItemResult.Bytes.
	Bytes uint64
	// TasksClaimed counts unowned tasks this node claimed; TasksStolen the
	// tasks it created by splitting another's range; TasksDone tasks it
	// finished; TasksReleased tasks it checkpointed and gave back (pause,
	// stop, fewer workers); TasksLost tasks taken from it (claim expired,
	// job ended).
	TasksClaimed  uint64
	TasksStolen   uint64
	TasksDone     uint64
	TasksReleased uint64
	TasksLost     uint64
	// TasksPassed counts the times this node's workers passed over an
	// unfinished task pinned to another node (TaskSpec.Node): a steady
	// rise while a phase does not end means the task waits for its node.
	TasksPassed uint64
	// Checkpoints counts checkpoint writes; CheckpointConflicts those that
	// had to re-read the task (a steal lowered its end); ClaimConflicts
	// claims or steals another node won.
	Checkpoints         uint64
	CheckpointConflicts uint64
	ClaimConflicts      uint64
	// PhasesSplit counts phases this node split as coordinator, and
	// CoordinatorTerms how many times it was elected.
	PhasesSplit      uint64
	CoordinatorTerms uint64
}

// counters is the live form of Metrics.
type counters struct {
	itemsProcessed, itemRetries, itemFailures, bytes               atomic.Uint64
	tasksClaimed, tasksStolen, tasksDone, tasksReleased, tasksLost atomic.Uint64
	tasksPassed                                                    atomic.Uint64
	checkpoints, checkpointConflicts, claimConflicts               atomic.Uint64
	phasesSplit, coordinatorTerms                                  atomic.Uint64
}

// Metrics returns a snapshot of the engine's counters.
func (e *Engine) Metrics() Metrics {
	c := &e.m
	return Metrics{
		ItemsProcessed: c.itemsProcessed.Load(), ItemRetries: c.itemRetries.Load(),
		ItemFailures: c.itemFailures.Load(), Bytes: c.bytes.Load(),
		TasksClaimed: c.tasksClaimed.Load(), TasksStolen: c.tasksStolen.Load(),
		TasksDone: c.tasksDone.Load(), TasksReleased: c.tasksReleased.Load(), TasksLost: c.tasksLost.Load(),
		TasksPassed: c.tasksPassed.Load(),
		Checkpoints: c.checkpoints.Load(), CheckpointConflicts: c.checkpointConflicts.Load(),
		ClaimConflicts: c.claimConflicts.Load(),
		PhasesSplit:    c.phasesSplit.Load(), CoordinatorTerms: c.coordinatorTerms.Load(),
	}
}
