// Package jobs holds weft's job types — repair, drain, integrityscan — as
// phases the job engine (package job) splits, distributes, checkpoints and
// throttles.
//
// It holds no scheduling: each type only says how to split its work, list
// its items and process one item, idempotently.
package jobs
