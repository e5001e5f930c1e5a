package drive

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error returned by this package wraps one of them
// (check with errors.Is); the wrapping text names the drive, the path or the
// block and says what to do.
var (
	// ErrNotFound: the block does not exist on this drive.
	ErrNotFound = errors.New("drive: block not found")
	// ErrExists: a block with this id already exists with different content.
	ErrExists = errors.New("drive: block exists")
	// ErrNoSpace: the drive has not enough free space (after its reserve).
	ErrNoSpace = errors.New("drive: no space")
	// ErrCorrupt: stored bytes fail their checksum or the file is malformed.
	// The concrete error is a *CorruptError.
	ErrCorrupt = errors.New("drive: corrupt block")
	// ErrInvalid: a bad argument (block id, range, length, option).
	ErrInvalid = errors.New("drive: invalid argument")
	// ErrOtherCluster: the directory holds a drive of another cluster.
	ErrOtherCluster = errors.New("drive: belongs to another cluster")
	// ErrOtherNode: the directory holds a drive of another node.
	ErrOtherNode = errors.New("drive: belongs to another node")
	// ErrNewerFormat: the identity or a block was written by a newer weft.
	ErrNewerFormat = errors.New("drive: newer format")
	// ErrBadIdentity: the identity file cannot be parsed or is incomplete.
	ErrBadIdentity = errors.New("drive: bad identity")
	// ErrNotEmpty: the directory has files but no identity file.
	ErrNotEmpty = errors.New("drive: not empty and not a weft drive")
	// ErrLocked: another process (or Drive value) has the drive open.
	ErrLocked = errors.New("drive: in use")
	// ErrClosed: the Drive was closed.
	ErrClosed = errors.New("drive: closed")
)

// HeaderSegment is the CorruptError.Segment value that designates the block
// header rather than a data segment.
const HeaderSegment = -1

// CorruptError reports a block whose stored bytes do not match their
// checksums, or whose file is malformed or truncated. errors.Is(err,
// ErrCorrupt) holds for it. Segment is the index of the first bad 64 KiB data
// segment, or HeaderSegment when the header itself is bad.
type CorruptError struct {
	Drive   ID
	Block   BlockID
	Segment int
	Reason  string
}

// Error names the drive, the block and the segment.
func (e *CorruptError) Error() string {
	where := "header"
	if e.Segment != HeaderSegment {
		where = fmt.Sprintf("segment %d", e.Segment)
	}
	return fmt.Sprintf("%v: drive %v block %v %s: %s", ErrCorrupt, e.Drive, e.Block, where, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// tornReason begins the Reason of a block that was never written to the
// disk: its file is empty or its header all zeros.
const tornReason = "never written to the disk (empty, or zeros where the header goes)"

// Torn reports whether the block was never written to the disk — empty,
// or zeros where its header goes — rather than damaged: what a machine
// crash leaves of a block whose bytes were still in the page cache (a
// client's unsynced write, drive.Drive.StageUnsynced, before its sync).
// Nothing committed names such a block, and its bytes are gone either
// way; the collect job removes it.
func (e *CorruptError) Torn() bool {
	return e.Segment == HeaderSegment && strings.HasPrefix(e.Reason, tornReason)
}
