// Package events turns what happens in the cluster into jobs: on the job
// engine's coordinator, a watcher compares the drives, nodes, pools and
// settings with what it saw before, starts the job each change calls for
// (repair, multiscan, rebalance), switches low-space mode, and records every
// event in the engine's event log.
//
// It is not the job engine (package job schedules and runs jobs) nor the
// job types (package jobs); it decides when a job is due, not how it runs.
package events
