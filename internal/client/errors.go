package client

import "errors"

// Errors returned by the client, wrapped with %w and the details (file,
// stripe, drives); check them with errors.Is. The POSIX code the FUSE edge
// maps each to is noted; this package never returns an errno. Errors of
// meta (meta.ErrNotFound, ...) and context errors pass through wrapped.
var (
	// ErrUnavailable: data cannot be read or written now — fewer units of
	// a stripe are reachable than needed to read it, or fewer drives are
	// up than a write needs (K+1 for ec:K+M, 2 for mirrors) (EIO). It is
	// retryable once drives or nodes come back.
	ErrUnavailable = errors.New("client: data unavailable")
	// ErrNoSpace: enough drives are up, but too few have room for a unit
	// (ENOSPC).
	ErrNoSpace = errors.New("client: no space")
	// ErrConflict: a stripe kept changing under a read-modify-write (other
	// writers or restripers) and the client gave up after several retries
	// (EIO); nothing was committed, and retrying may succeed.
	ErrConflict = errors.New("client: stripe changed concurrently")
	// ErrCorrupt: a stripe map is inconsistent (no placed unit, unit
	// lengths that do not match its protection) (EIO). Block-level
	// corruption is not reported with it: reads reconstruct around a
	// corrupt unit, and report ErrUnavailable if they cannot.
	ErrCorrupt = errors.New("client: corrupt stripe map")
	// ErrInvalid: a bad argument — negative offset or size, a LIN that is
	// not a regular file, a bad configuration (EINVAL).
	ErrInvalid = errors.New("client: invalid argument")
	// ErrReadOnly: a write or truncate through a handle opened read-only
	// (EBADF).
	ErrReadOnly = errors.New("client: file not open for writing")
	// ErrClosed: the File or the Client was closed (EBADF).
	ErrClosed = errors.New("client: closed")
	// ErrNoData: SeekData or SeekHole from an offset at or past the end
	// of the file, or SeekData from an offset with only holes after it
	// (ENXIO).
	ErrNoData = errors.New("client: no data at or after the offset")
)
