package job

import "errors"

// Sentinel errors. Callers test them with errors.Is; returned errors wrap
// them with the input that was wrong and what to do about it.
var (
	// ErrUnknownType: no job type of that name is registered.
	ErrUnknownType = errors.New("job: unknown job type")
	// ErrTypeDisabled: the job type is disabled (ModifyType) and refuses new jobs.
	ErrTypeDisabled = errors.New("job: job type disabled")
	// ErrBadPriority: a priority outside 1 (highest) to 10.
	ErrBadPriority = errors.New("job: bad priority")
	// ErrUnknownPolicy: the throttle does not know the impact policy.
	ErrUnknownPolicy = errors.New("job: unknown impact policy")
	// ErrNotFound: no job, event or callback of that id or name (a job or
	// event may have aged out of retention).
	ErrNotFound = errors.New("job: not found")
	// ErrBadTransition: the job's state does not allow the requested change.
	ErrBadTransition = errors.New("job: bad state transition")
	// ErrNewerFormat: a record written by a newer weft; upgrade this node.
	ErrNewerFormat = errors.New("job: record of a newer format")
	// ErrCorrupt: a record that does not decode.
	ErrCorrupt = errors.New("job: corrupt record")
	// ErrInvalid: an argument that is malformed (settings, params, names).
	ErrInvalid = errors.New("job: invalid argument")
	// ErrExists: a name already taken: a job type registered twice, a
	// callback added under a name in use.
	ErrExists = errors.New("job: already exists")
	// ErrStopped: the engine is not running (Start not called, or stopped).
	ErrStopped = errors.New("job: engine not running")
)

// errLost reports that a task this node held was taken from it (its claim
// expired, or the task was deleted because the job ended): the holder drops
// it without writing.
var errLost = errors.New("job: task claim lost")

// errFenced reports that this node is no longer the coordinator.
var errFenced = errors.New("job: not the coordinator")
