package vfs

import (
	"context"
	"fmt"
	"os"
)

// AllocMode is an fallocate(2) mode: Linux's FALLOC_FL_* bits.
type AllocMode uint32

// The fallocate modes Allocate takes (Linux's values).
const (
	// AllocKeepSize (FALLOC_FL_KEEP_SIZE) leaves the size as it is.
	AllocKeepSize AllocMode = 0x01
	// AllocPunchHole (FALLOC_FL_PUNCH_HOLE, with AllocKeepSize only)
	// makes the range a hole.
	AllocPunchHole AllocMode = 0x02
	// AllocZeroRange (FALLOC_FL_ZERO_RANGE) makes the range read as
	// zeros, growing the file unless AllocKeepSize.
	AllocZeroRange AllocMode = 0x10
)

// Allocate is fallocate(2) on the handle's file for the n bytes at off:
//
//   - 0 grows the file to off+n bytes if it is shorter; AllocKeepSize
//     alone does nothing. Neither reserves space: weft has no
//     reservations, so a later write of the range can fail with
//     ErrNoSpace as any write can (as before fallocate was supported),
//     and the range stores nothing until written.
//   - AllocPunchHole|AllocKeepSize makes the range read as zeros and
//     frees what it stored: stripes wholly inside it are dropped at once,
//     their blocks freed through the delete queue, and the bytes of the
//     stripes at its edges are overwritten with zeros.
//   - AllocZeroRange, with or without AllocKeepSize: the same, then grows
//     the file to off+n bytes unless AllocKeepSize.
//
// Size changes and dropped stripes are committed when Allocate returns;
// the zeros written at the edges are durable after Fsync, like writes.
// Errors: ErrBadHandle (not open for writing), ErrInvalid (offset below
// 0, length below 1), ErrNotSupported for any other mode (collapse,
// insert, unshare, a punch without AllocKeepSize), those of Write.
func (h *Handle) Allocate(ctx context.Context, off, n int64, mode AllocMode) error {
	if h.Flags&OAccMode == os.O_RDONLY {
		return fmt.Errorf("%w: fallocate through a handle not open for writing", ErrBadHandle)
	}
	if off < 0 || n <= 0 || off+n < off {
		return fmt.Errorf("%w: fallocate of %d bytes at offset %d: want an offset of 0 or more and a length of 1 or more", ErrInvalid, n, off)
	}
	keep := mode&AllocKeepSize != 0
	var err error
	switch mode &^ AllocKeepSize {
	case 0:
		return classify(h.file.Allocate(ctx, off, n, keep))
	case AllocPunchHole:
		if !keep {
			return fmt.Errorf("%w: fallocate mode %#x: a hole is punched with FALLOC_FL_KEEP_SIZE only", ErrNotSupported, uint32(mode))
		}
	case AllocZeroRange:
	default:
		return fmt.Errorf("%w: fallocate mode %#x: weft supports 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE and ZERO_RANGE (with or without KEEP_SIZE)", ErrNotSupported, uint32(mode))
	}
	if _, err := h.KillPrivileges(ctx, false); err != nil {
		return err
	}
	err = h.file.Zero(ctx, off, n, keep)
	return classify(err)
}

// SeekData returns the first offset at or after off holding data, as
// lseek(SEEK_DATA): holes are found at stripe granularity (and within a
// stripe after its last stored byte), with the buffered writes of this
// mount. Errors: ErrNoData (off at or past the end of file, or only holes
// after it), ErrInvalid (off below 0).
func (h *Handle) SeekData(ctx context.Context, off int64) (int64, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: SEEK_DATA from offset %d", ErrInvalid, off)
	}
	o, err := h.file.SeekData(ctx, off)
	return o, classify(err)
}

// SeekHole returns the first offset at or after off in a hole, as
// lseek(SEEK_HOLE); the end of file is one. Errors: ErrNoData (off at or
// past the end of file), ErrInvalid (off below 0).
func (h *Handle) SeekHole(ctx context.Context, off int64) (int64, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: SEEK_HOLE from offset %d", ErrInvalid, off)
	}
	o, err := h.file.SeekHole(ctx, off)
	return o, classify(err)
}
