package impact

import "errors"

// Sentinel errors. Callers test them with errors.Is; returned errors wrap
// them with the policy, window or record that was wrong.
var (
	// ErrInvalid: a policy, window, level or law that does not validate.
	ErrInvalid = errors.New("impact: invalid argument")
	// ErrUnknownPolicy: no impact policy of that name.
	ErrUnknownPolicy = errors.New("impact: unknown impact policy")
	// ErrPolicyExists: Create of a policy name already taken.
	ErrPolicyExists = errors.New("impact: impact policy already exists")
	// ErrPolicyBuiltin: an attempt to create, modify or delete a built-in.
	ErrPolicyBuiltin = errors.New("impact: built-in impact policy cannot be changed")
	// ErrNewerFormat: a policy record written by a newer weft; upgrade
	// this node.
	ErrNewerFormat = errors.New("impact: record of a newer format")
	// ErrCorrupt: a policy record that does not decode.
	ErrCorrupt = errors.New("impact: corrupt record")
)
