package job

// Allowance is how much a job's manager may work on one node.
type Allowance struct {
	// Workers is the number of worker goroutines; 0 parks the manager
	// (its tasks are checkpointed and released for other nodes).
	Workers int
	// Duty is the fraction of each second a worker may work, 0 < Duty <= 1:
	// fractional workers. After a step that took d, a worker rests
	// d×(1-Duty)/Duty. Values outside (0, 1] are read as 1.
	Duty float64
	// BytesPerSec, if positive, is the byte rate the job's transfers on
	// this node go through, all its workers together, evenly
	// (runner.Spend): a job that the client latency control holds below
	// its level's floor. 0 is unlimited.
	BytesPerSec float64
}

// Throttle decides a manager's Allowance. The engine's runner asks it every
// Config.AllowanceInterval for each running job on the node, with the job's
// current policy, so a policy change or a change in load takes effect
// within seconds. Implementations (the impact policies and the load-driven
// control loop) live beside this file; they must be safe for concurrent use
// and must not block, beyond one bounded listing of policies when a job
// names one created since the last listing (Controller).
type Throttle interface {
	Allowance(jobID string, policy string) Allowance
}

// PolicyChecker is implemented by a Throttle that knows its policies:
// Submit and Modify refuse a policy name for which KnownPolicy is false
// (ErrUnknownPolicy). Without it any non-empty name is accepted.
type PolicyChecker interface {
	KnownPolicy(name string) bool
}

// FixedThrottle allows the same Allowance to every job whatever its policy:
// for tests and for a node without a control loop.
type FixedThrottle Allowance

var _ Throttle = FixedThrottle{}

// Allowance returns t.
func (t FixedThrottle) Allowance(string, string) Allowance { return Allowance(t) }

// normalize clamps an Allowance into its documented domain.
func (a Allowance) normalize() Allowance {
	if a.Workers < 0 {
		a.Workers = 0
	}
	if !(a.Duty > 0 && a.Duty <= 1) {
		a.Duty = 1
	}
	if !(a.BytesPerSec > 0) {
		a.BytesPerSec = 0
	}
	return a
}

// Forgetter is implemented by a Throttle that keeps per-job state: a
// manager calls Forget when its job stops running on the node (ended,
// paused, or the node stopping), so the state does not outlive the job.
type Forgetter interface {
	Forget(jobID string)
}
