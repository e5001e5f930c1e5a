package drive

import (
	"fmt"
	"syscall"
)

// Usage is a drive's space usage.
type Usage struct {
	// TotalBytes is the size of the file system holding the drive.
	TotalBytes int64
	// FreeBytes is the space available to weft: the file system's free
	// space for unprivileged users minus the drive's Reserve, never below 0.
	FreeBytes int64
	// UsedBytes is the size of the drive's block files (headers included).
	UsedBytes int64
	// Blocks is the number of block files.
	Blocks int64
}

// Usage returns the drive's space usage. TotalBytes and FreeBytes come from
// statfs (one system call); UsedBytes and Blocks are kept in memory, counted
// at Open and updated by Put and Delete.
func (d *Drive) Usage() (Usage, error) {
	if err := d.checkOpen(); err != nil {
		return Usage{}, err
	}
	total, free, err := d.statfs()
	if err != nil {
		return Usage{}, err
	}
	return Usage{TotalBytes: total, FreeBytes: free, UsedBytes: d.used.Load(), Blocks: d.blocks.Load()}, nil
}

// statfs returns the file system's size and the free bytes after Reserve.
func (d *Drive) statfs() (total, free int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d.path, &st); err != nil {
		return 0, 0, fmt.Errorf("drive %v: statfs %s: %w", d.ident.DriveID, d.path, err)
	}
	total = int64(st.Blocks) * int64(st.Bsize)
	free = int64(st.Bavail)*int64(st.Bsize) - d.reserve
	return total, max(free, 0), nil
}

// checkSpace returns ErrNoSpace if fewer than need bytes are free.
func (d *Drive) checkSpace(need int64) error {
	_, free, err := d.statfs()
	if err != nil {
		return err
	}
	if free < need {
		return fmt.Errorf("%w: drive %v (%s) needs %d bytes for a block, %d free after a reserve of %d; free space or add drives",
			ErrNoSpace, d.ident.DriveID, d.path, need, free, d.reserve)
	}
	return nil
}
