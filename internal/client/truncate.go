package client

import (
	"context"
	"fmt"

	"github.com/weftfs/weft/internal/meta"
)

// Truncate sets the file's size. Shrinking drops buffered writes past the
// new end and has meta drop the stripes past it (their blocks go to the
// delete queue) and shorten the stripe holding the new end, whose bytes
// past it then read as zeros — also after the file grows again, since a
// stripe is read and rewritten only up to its recorded data length.
// Growing only sets the size: the new bytes are a hole and read as zeros.
// The vfs layer calls it for SetAttr(size) too.
//
// Write-outs in progress finish first (a commit after the trim would bring
// back data past the new end), and writes wait while it runs. Errors:
// ErrReadOnly, ErrClosed, ErrInvalid (negative size), meta's errors.
func (f *File) Truncate(ctx context.Context, size int64) error {
	if err := f.check(true); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("%w: truncate LIN %d to %d bytes", ErrInvalid, f.ino.lin, size)
	}
	ino := f.ino
	done, err := ino.exclusive(ctx)
	if err != nil {
		return err
	}
	for idx, d := range ino.dirty {
		start := idx * ino.ss
		if start+int64(d.ext.end()) <= size {
			continue
		}
		if d.ext = d.ext.clip(int(max(0, size-start))); len(d.ext) == 0 {
			ino.dropLocked(d)
			delete(ino.dirty, idx)
		}
	}
	ino.mu.Unlock()
	_, err = ino.c.meta.SetAttr(ctx, ino.lin, meta.SetSize, meta.Attr{Size: uint64(size)})
	ino.mu.Lock()
	if err == nil {
		ino.size = size
	}
	// Either way the maps may have changed (a long truncate commits in
	// several transactions).
	ino.clearMapsLocked()
	ino.cache.clearLocked()
	done()
	if err != nil {
		return fmt.Errorf("client: truncate LIN %d to %d bytes: %w", ino.lin, size, err)
	}
	return nil
}

// exclusive waits for the file's truncate or punch in progress to end,
// holds writes and write-outs off (truncating), and waits for the
// write-outs in progress: it returns with ino.mu held and done, which
// ends the exclusion and unlocks.
func (ino *inode) exclusive(ctx context.Context) (done func(), err error) {
	ino.mu.Lock()
	for ino.truncating {
		if err := ino.waitLocked(ctx); err != nil {
			ino.mu.Unlock()
			return nil, err
		}
	}
	ino.truncating = true
	done = func() {
		ino.truncating = false
		ino.signalLocked()
		ino.mu.Unlock()
	}
	for len(ino.inflight) > 0 {
		if err := ino.waitLocked(ctx); err != nil {
			done()
			return nil, err
		}
	}
	return done, nil
}
