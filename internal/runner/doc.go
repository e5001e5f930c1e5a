// Package runner runs a process's node-local background workers: each
// worker does one step of work per call and says what it wants next (more
// steps, a rest, a pause); the runner owns the pacing — idle waits, wake-ups,
// tranquility, back-off after errors — the status, and shutdown with a
// deadline.
//
// It is not the job engine: cluster-wide work, split into tasks, claimed,
// checkpointed and failed over between nodes, is a job (package job).
package runner
