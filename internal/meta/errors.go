package meta

import (
	"errors"
	"fmt"
)

// Errors returned by Meta, wrapped with %w and detail; check with errors.Is.
// The POSIX code each maps to at the edge is noted; meta never returns errno.
var (
	// ErrNotFound: the inode, entry or parent does not exist (ENOENT).
	ErrNotFound = errors.New("meta: not found")
	// ErrExists: the name is taken, or the xattr exists with XattrCreate (EEXIST).
	ErrExists = errors.New("meta: already exists")
	// ErrNotDir: a directory was required (ENOTDIR).
	ErrNotDir = errors.New("meta: not a directory")
	// ErrIsDir: the operation does not apply to a directory (EISDIR).
	ErrIsDir = errors.New("meta: is a directory")
	// ErrNotEmpty: the directory has entries (ENOTEMPTY).
	ErrNotEmpty = errors.New("meta: directory not empty")
	// ErrInvalid: a bad argument — a bad name ("", ".", "..", "/" or NUL in
	// it), a bad pool name or protection, a malformed stripe (EINVAL).
	ErrInvalid = errors.New("meta: invalid argument")
	// ErrNameTooLong: a name over MaxNameLen bytes or a symlink target over
	// MaxSymlinkLen bytes (ENAMETOOLONG).
	ErrNameTooLong = errors.New("meta: name too long")
	// ErrNotPermitted: a hard link to a directory (EPERM).
	ErrNotPermitted = errors.New("meta: operation not permitted")
	// ErrTooManyLinks: the inode already has MaxLinks links (EMLINK).
	ErrTooManyLinks = errors.New("meta: too many links")
	// ErrRenameLoop: a directory would move into itself or below itself (EINVAL).
	ErrRenameLoop = errors.New("meta: cannot move a directory into itself")
	// ErrNoXattr: the extended attribute does not exist (ENODATA).
	ErrNoXattr = errors.New("meta: no such extended attribute")
	// ErrXattrTooLarge: an xattr name, value or the inode's list of names is
	// over its limit (E2BIG / ERANGE).
	ErrXattrTooLarge = errors.New("meta: extended attribute too large")
	// ErrBusy: the inode is still open and cannot be purged (EBUSY).
	ErrBusy = errors.New("meta: inode is open")
	// ErrStripeConflict: a stripe's generation is not the expected one; the
	// caller re-reads the stripe map and retries (see StripeConflictError).
	ErrStripeConflict = errors.New("meta: stripe generation conflict")
	// ErrNotFormatted: the store holds no weft namespace.
	ErrNotFormatted = errors.New("meta: not formatted")
	// ErrNewerFormat: the namespace was written by a newer weft.
	ErrNewerFormat = errors.New("meta: newer format")
	// ErrCorrupt: a stored record does not decode. It is never retryable;
	// fsck reports and repairs it.
	ErrCorrupt = errors.New("meta: corrupt record")
)

// StripeConflictError reports which stripe failed its compare-and-swap.
// errors.Is(err, ErrStripeConflict) holds for it.
type StripeConflictError struct {
	LIN   LIN
	Index uint64
	// Want is the generation the caller expected, Have the stored one
	// (0: the stripe does not exist).
	Want, Have uint64
}

// Error says which stripe moved and what to do.
func (e *StripeConflictError) Error() string {
	return fmt.Sprintf("%v: LIN %d stripe %d is at generation %d, expected %d: re-read the stripe map and retry",
		ErrStripeConflict, e.LIN, e.Index, e.Have, e.Want)
}

// Unwrap makes errors.Is(err, ErrStripeConflict) true.
func (e *StripeConflictError) Unwrap() error { return ErrStripeConflict }
