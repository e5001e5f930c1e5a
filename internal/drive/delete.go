package drive

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Delete removes block id and fsyncs its directory (with SyncAlways). It is
// idempotent in effect: deleting a missing block returns an error wrapping
// ErrNotFound, which callers emptying a delete queue may ignore. Deleting a
// block that a Get is reading is safe: the reader keeps its open file.
func (d *Drive) Delete(id BlockID) error {
	if d.readOnly {
		return fmt.Errorf("%w: drive %v (%s)", ErrReadOnly, d.ident.DriveID, d.path)
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	dir, path := d.blockPath(id)
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: drive %v block %v", ErrNotFound, d.ID(), id)
	}
	if err != nil {
		return fmt.Errorf("drive %v: delete block %v: %w", d.ID(), id, err)
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) { // a concurrent Delete won
			return fmt.Errorf("%w: drive %v block %v", ErrNotFound, d.ID(), id)
		}
		return fmt.Errorf("drive %v: delete block %v: %w", d.ID(), id, err)
	}
	d.used.Add(-info.Size())
	d.blocks.Add(-1)
	if d.sync == SyncAlways {
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("drive %v: delete block %v: syncing directory: %w", d.ID(), id, err)
		}
	}
	return nil
}
