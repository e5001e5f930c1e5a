package erasure

import "errors"

// Sentinel errors of the package. Errors returned by its functions wrap one
// of these (or ErrBadProtection) with the offending values; check them with
// errors.Is.
var (
	// ErrBadGeometry is returned for a unit size that is not a positive
	// multiple of UnitAlign no larger than MaxUnitSize, or a geometry
	// whose protection is invalid.
	ErrBadGeometry = errors.New("erasure: bad geometry")

	// ErrBadShards is returned when the shards or data handed to a Codec
	// do not match the stripe layout (wrong count, wrong length). It is a
	// programming error in the caller, not a data loss.
	ErrBadShards = errors.New("erasure: bad shards")

	// ErrTooFewUnits is returned when fewer units are present than the
	// layout needs to recover its data (K for ec:K+M, 1 for mirrors). The
	// stripe's data cannot be read from the units given.
	ErrTooFewUnits = errors.New("erasure: too few units")
)
