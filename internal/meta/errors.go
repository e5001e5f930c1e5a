package meta

import (
	"errors"
	"fmt"

	"github.com/weftfs/weft/internal/kv"
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

	// The store's error classes (package kv), as meta returns them: the
	// error keeps the store's message and chain (errors.Is(err,
	// kv.ErrTooLarge) holds too), so that callers above meta classify it
	// without importing kv. See storeErr.

	// ErrTooLarge: one operation would change more than the store takes in
	// one transaction (kv.ErrTooLarge) — too many stripes committed at once,
	// for example. Nothing was written; the same call fails the same way:
	// split the work (EFBIG).
	ErrTooLarge = errors.New("meta: transaction too large")
	// ErrUnavailable: the store did not answer (kv.ErrUnavailable). For a
	// change the outcome is unknown: it may have been applied. Retryable
	// after re-reading (EIO).
	ErrUnavailable = errors.New("meta: store unavailable")
	// ErrConflict: the operation kept conflicting with concurrent ones
	// until the store gave up (kv.ErrConflict). Nothing was written;
	// retryable (EIO).
	ErrConflict = errors.New("meta: transaction conflict")
)

// storeClasses maps the store's error classes to meta's, checked in order.
var storeClasses = [...]struct{ kv, meta error }{
	{kv.ErrTooLarge, ErrTooLarge},
	{kv.ErrUnavailable, ErrUnavailable},
	{kv.ErrConflict, ErrConflict},
}

// storeErr classes an error of the store as one of meta's errors: it
// returns err with its message and chain unchanged, but answering
// errors.Is for the meta class too. Other errors (meta's own, context
// errors, nil) are returned as they are. It is idempotent. Every exported
// path from the store out of meta goes through it (update, view, Format,
// Open, allocLIN, sync, Flush).
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	var se *storeError
	if errors.As(err, &se) {
		return err
	}
	for _, c := range storeClasses {
		if errors.Is(err, c.kv) {
			return &storeError{class: c.meta, err: err}
		}
	}
	return err
}

// storeError is an error of the store classed as a meta error: its
// message is the store's (no doubled prefixes), errors.Is reports the
// class, and Unwrap gives the store's error.
type storeError struct {
	class error
	err   error
}

func (e *storeError) Error() string { return e.err.Error() }

func (e *storeError) Unwrap() error { return e.err }

func (e *storeError) Is(target error) bool { return target == e.class }

// StripeConflictError reports which stripe failed its compare-and-swap.
// errors.Is(err, ErrStripeConflict) holds for it.
type StripeConflictError struct {
	LIN   LIN
	Index uint64
	// Want is the generation the caller expected, Have the stored one
	// (0: the stripe does not exist).
	Want, Have uint64
	// Pool, when set, is the file's pool, which is not the one the
	// update's units were placed in (StripeUpdate.Pool): the file moved
	// to it meanwhile (set-pool, a tier job), and the caller places the
	// stripe there instead.
	Pool string
}

// Error says which stripe moved and what to do.
func (e *StripeConflictError) Error() string {
	if e.Pool != "" {
		return fmt.Sprintf("%v: LIN %d is in pool %s now: place stripe %d there and retry", ErrStripeConflict, e.LIN, e.Pool, e.Index)
	}
	return fmt.Sprintf("%v: LIN %d stripe %d is at generation %d, expected %d: re-read the stripe map and retry",
		ErrStripeConflict, e.LIN, e.Index, e.Have, e.Want)
}

// Unwrap makes errors.Is(err, ErrStripeConflict) true.
func (e *StripeConflictError) Unwrap() error { return ErrStripeConflict }
