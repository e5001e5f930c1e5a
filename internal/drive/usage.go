package drive

import (
	"fmt"
	"syscall"
)

// Usage is a drive's space usage.
type Usage struct {
	// TotalBytes is the size of the file system holding the drive, or the
	// drive's Capacity if that is smaller.
	TotalBytes int64
	// FreeBytes is the space available to weft: the file system's free
	// space for unprivileged users minus the drive's Reserve, and with a
	// Capacity at most Capacity − UsedBytes; never below 0.
	FreeBytes int64
	// UsedBytes is the size of the drive's block files (headers included).
	UsedBytes int64
	// Blocks is the number of block files.
	Blocks int64
}

// Usage returns the drive's space usage. TotalBytes and FreeBytes come from
// statfs (one system call) and the Capacity; UsedBytes and Blocks are kept
// in memory, counted at Open and updated by Put and Delete.
func (d *Drive) Usage() (Usage, error) {
	if err := d.checkOpen(); err != nil {
		return Usage{}, err
	}
	total, free, err := d.statfs()
	if err != nil {
		return Usage{}, err
	}
	used := d.used.Load()
	if d.capacity > 0 {
		total = min(total, d.capacity)
		free = max(min(free, d.capacity-used), 0)
	}
	return Usage{TotalBytes: total, FreeBytes: free, UsedBytes: used, Blocks: d.blocks.Load()}, nil
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

// checkSpace returns ErrNoSpace if fewer than need bytes are free on the
// file system (after Reserve). It reserves nothing; see reserveCapacity.
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

// reserveCapacity sets need bytes aside for a Put against the drive's
// Capacity, or returns ErrNoSpace if the blocks stored and the Puts in
// flight leave less than need. With no Capacity it does nothing. Each
// successful call must be followed by exactly one releaseCapacity.
func (d *Drive) reserveCapacity(need int64) error {
	if d.capacity == 0 {
		return nil
	}
	d.capMu.Lock()
	defer d.capMu.Unlock()
	used := d.used.Load()
	if used+d.pending+need > d.capacity {
		return fmt.Errorf("%w: drive %v (%s) has a capacity of %d bytes (%s) and holds %d; a block of %d bytes does not fit; raise its capacity (the SIZE of --drive, or capacity: in the config), free space or add drives",
			ErrNoSpace, d.ident.DriveID, d.path, d.capacity, FormatSize(d.capacity), used+d.pending, need)
	}
	d.pending += need
	return nil
}

// releaseCapacity ends a reservation of need bytes; stored says the block
// was linked into place, and its bytes then move to used in the same
// critical section, so that no reader sees them in neither.
func (d *Drive) releaseCapacity(need int64, stored bool) {
	if d.capacity == 0 {
		if stored {
			d.used.Add(need)
		}
		return
	}
	d.capMu.Lock()
	if stored {
		d.used.Add(need)
	}
	d.pending -= need
	d.capMu.Unlock()
}
