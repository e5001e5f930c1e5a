package placement

import "errors"

// Sentinel errors of the package; returned errors wrap them with the
// details, check them with errors.Is.
var (
	// ErrNotEnoughDrives is returned when fewer drives are eligible (up,
	// ready, with room for a unit, not excluded) than the request's
	// minimum. The message says how many are usable and how many needed.
	ErrNotEnoughDrives = errors.New("placement: not enough drives")

	// ErrBadRequest is returned for a malformed request (counts out of
	// range, no random source, a drive listed twice): a caller bug.
	ErrBadRequest = errors.New("placement: bad request")
)
