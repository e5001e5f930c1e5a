package vfs

import (
	"errors"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/meta"
)

// Errors returned by FS and Handle, one per class a gateway turns into a
// code of its protocol (the errno FUSE uses is noted). Every error a vfs
// method returns that belongs to a class satisfies errors.Is(err, ErrX)
// for it, whether vfs made it or translated it from meta or client (see
// classify); an error of no class (an unreachable node, a corrupt record,
// a timeout) is an I/O error to the gateway. Errors keep their message and
// chain: errors.Is also finds context.Canceled and the lower layers'
// sentinels in them.
var (
	// ErrNotFound: the inode, entry or parent does not exist (ENOENT).
	ErrNotFound = errors.New("vfs: not found")
	// ErrExists: the name is taken, or the xattr exists with XattrCreate
	// (EEXIST).
	ErrExists = errors.New("vfs: already exists")
	// ErrNotDir: a directory was required (ENOTDIR).
	ErrNotDir = errors.New("vfs: not a directory")
	// ErrIsDir: the operation does not apply to a directory (EISDIR).
	ErrIsDir = errors.New("vfs: is a directory")
	// ErrNotEmpty: the directory has entries (ENOTEMPTY).
	ErrNotEmpty = errors.New("vfs: directory not empty")
	// ErrNameTooLong: a name over MaxNameLen bytes, or a symlink target
	// over its limit (ENAMETOOLONG).
	ErrNameTooLong = errors.New("vfs: name too long")
	// ErrPerm: the operation needs ownership or privilege, or is never
	// allowed (a hard link to a directory) (EPERM).
	ErrPerm = errors.New("vfs: operation not permitted")
	// ErrAccess: the caller lacks permission (EACCES).
	ErrAccess = errors.New("vfs: permission denied")
	// ErrTooManyLinks: the inode already has MaxLinks links (EMLINK).
	ErrTooManyLinks = errors.New("vfs: too many links")
	// ErrInvalid: a bad argument — a bad name, unknown flags, opening
	// something that is not a regular file, moving a directory into itself
	// (EINVAL).
	ErrInvalid = errors.New("vfs: invalid argument")
	// ErrNoXattr: the extended attribute does not exist (ENODATA).
	ErrNoXattr = errors.New("vfs: no such extended attribute")
	// ErrXattrTooLarge: an xattr name, value or list of names is over its
	// limit (E2BIG).
	ErrXattrTooLarge = errors.New("vfs: extended attribute too large")
	// ErrLocked: another owner, on this client or another, holds a
	// conflicting file lock (EAGAIN).
	ErrLocked = errors.New("vfs: file is locked")
	// ErrNoLocks: this client can take no more locks: its session ended
	// (cut off from the cluster longer than its TTL), and the locks it
	// held are gone (ENOLCK).
	ErrNoLocks = errors.New("vfs: no locks available")
	// ErrBusy: the inode is in use (EBUSY).
	ErrBusy = errors.New("vfs: busy")
	// ErrBadHandle: the handle is closed or not open for this access
	// (EBADF).
	ErrBadHandle = errors.New("vfs: bad file handle")
	// ErrNoSpace: the drives have no room for the data (ENOSPC).
	ErrNoSpace = errors.New("vfs: no space left")
	// ErrFileTooLarge: the change is larger than one metadata transaction
	// takes (EFBIG).
	ErrFileTooLarge = errors.New("vfs: file too large")
	// ErrNotSupported: the operation or mode is not implemented, such as
	// an fallocate mode other than Handle.Allocate's (EOPNOTSUPP).
	ErrNotSupported = errors.New("vfs: operation not supported")
	// ErrNoData: a seek for data or a hole from at or past the end of the
	// file, or for data where only holes follow (ENXIO).
	ErrNoData = errors.New("vfs: no data or hole past the offset")
	// ErrUnavailable: the metadata store or too many drives did not
	// answer, or the operation kept conflicting with concurrent ones; it
	// may succeed if retried (EIO; NFS's JUKEBOX).
	ErrUnavailable = errors.New("vfs: temporarily unavailable")
)

// classes translates the errors of meta and client into vfs's classes:
// the first entry the error matches (errors.Is) gives its class. The order
// is the one the FUSE errno table had before vfs owned the classes, so an
// error matching several gets the same class it had then; the retryable
// class comes last.
//
// client.ErrInvalid, ErrReadOnly, ErrClosed and ErrCorrupt, and meta's
// ErrCorrupt, ErrNotFormatted and ErrStripeConflict have no class (I/O
// errors): vfs checks a handle's access and a file's type before calling
// the client, the client retries stripe conflicts itself, and the rest are
// faults.
var classes = [...]struct{ from, class error }{
	{meta.ErrNotFound, ErrNotFound},
	{meta.ErrExists, ErrExists},
	{meta.ErrNotDir, ErrNotDir},
	{meta.ErrIsDir, ErrIsDir},
	{meta.ErrNotEmpty, ErrNotEmpty},
	{meta.ErrNameTooLong, ErrNameTooLong},
	{meta.ErrNotPermitted, ErrPerm},
	{meta.ErrTooManyLinks, ErrTooManyLinks},
	{meta.ErrRenameLoop, ErrInvalid},
	{meta.ErrNoXattr, ErrNoXattr},
	{meta.ErrXattrTooLarge, ErrXattrTooLarge},
	{meta.ErrBusy, ErrBusy},
	{meta.ErrLocked, ErrLocked},
	{meta.ErrLocksLost, ErrNoLocks},
	{meta.ErrInvalid, ErrInvalid},
	{client.ErrNoSpace, ErrNoSpace},
	{client.ErrNoData, ErrNoData},
	{meta.ErrTooLarge, ErrFileTooLarge},
	{meta.ErrUnavailable, ErrUnavailable},
	{meta.ErrConflict, ErrUnavailable},
	{client.ErrUnavailable, ErrUnavailable},
	{client.ErrConflict, ErrUnavailable},
}

// classify gives an error of meta or client its vfs class: it returns err
// with its message and chain unchanged, answering errors.Is for the class
// too. Errors vfs made, errors already classified and errors of no class
// are returned as they are; nil stays nil. Every exported method of FS and
// Handle returns its errors through it.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ce *classError
	if errors.As(err, &ce) {
		return err
	}
	for _, c := range classes {
		if errors.Is(err, c.from) {
			return &classError{class: c.class, err: err}
		}
	}
	return err
}

// classError is an error of a lower layer with its vfs class: its message
// is the original's (no doubled prefixes), errors.Is reports the class,
// and Unwrap gives the original.
type classError struct {
	class error
	err   error
}

func (e *classError) Error() string { return e.err.Error() }

func (e *classError) Unwrap() error { return e.err }

func (e *classError) Is(target error) bool { return target == e.class }
