package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/weftfs/weft/internal/durable"
)

// Added-drives file, format version 1: DATA_DIR/added-drives.json lists the
// drives added to this node at run time (weft drive add), so that the node
// opens them again at startup, after the configured drives (a drive both
// configured and listed is opened once, as configured).
//
//	{"v": 1,
//	 "drives": [{"path": "/mnt/d9", "class": "hdd", "pool": "default",
//	             "capacity": 1073741824, "id": "d9", "added": "2026-…Z"}, …]}
//
// path is absolute; capacity is in bytes (0: the whole file system); id is
// informational (the drive's identity file is the authority). The file is
// rewritten whole, atomically and durably (temp file, fsync, rename, fsync
// of the directory), so a crash leaves the old list or the new one. A file
// of a newer version is refused (ErrAddedDrivesVersion): an older weft would
// otherwise drop entries it does not understand when it rewrites the file.
// Migration: none yet; a version 2 reader must read version 1.
const AddedDrivesVersion = 1

// AddedDrivesFile is the file's name in the node's data directory.
const AddedDrivesFile = "added-drives.json"

// ErrAddedDrivesVersion is returned for an added-drives file written by a
// newer weft.
var ErrAddedDrivesVersion = errors.New("server: added-drives file of a newer format")

// AddedDrive is one entry of the added-drives file.
type AddedDrive struct {
	Path     string    `json:"path"`
	Class    string    `json:"class"`
	Pool     string    `json:"pool"`
	Capacity int64     `json:"capacity,omitempty"`
	ID       string    `json:"id,omitempty"`
	Added    time.Time `json:"added"`
}

// Spec returns the entry as a drive specification.
func (a AddedDrive) Spec() DriveSpec {
	return DriveSpec{Path: a.Path, Class: a.Class, Pool: a.Pool, Capacity: Size(a.Capacity)}
}

type addedDrivesFile struct {
	V      int          `json:"v"`
	Drives []AddedDrive `json:"drives"`
}

// ReadAddedDrives reads the added-drives file of data directory dir; a
// missing file is an empty list. It refuses a file of a newer version
// (ErrAddedDrivesVersion) and an unparsable or incomplete one (ErrConfig),
// naming the file and the fix.
func ReadAddedDrives(dir string) ([]AddedDrive, error) {
	path := filepath.Join(dir, AddedDrivesFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("server: reading the drives added at run time: %w", err)
	}
	var f addedDrivesFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v; repair it (it lists the drives added with weft drive add) or move it away to drop them", ErrConfig, path, err)
	}
	if f.V > AddedDrivesVersion {
		return nil, fmt.Errorf("%w: %s has version %d, this weft reads up to %d: run the newer weft that wrote it",
			ErrAddedDrivesVersion, path, f.V, AddedDrivesVersion)
	}
	if f.V < 1 {
		return nil, fmt.Errorf("%w: %s has no version (\"v\"); repair it or move it away", ErrConfig, path)
	}
	for i, d := range f.Drives {
		if !filepath.IsAbs(d.Path) || d.Class == "" || d.Pool == "" || d.Capacity < 0 {
			return nil, fmt.Errorf("%w: %s: entry %d (%q) needs an absolute path, a class, a pool and a capacity ≥ 0; repair it or move the file away",
				ErrConfig, path, i+1, d.Path)
		}
	}
	return f.Drives, nil
}

// WriteAddedDrives replaces the added-drives file of data directory dir
// with drives, atomically and durably.
func WriteAddedDrives(dir string, drives []AddedDrive) error {
	if drives == nil {
		drives = []AddedDrive{}
	}
	b, err := json.MarshalIndent(addedDrivesFile{V: AddedDrivesVersion, Drives: drives}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("server: data directory %s: %w", dir, err)
	}
	if err := durable.WriteFile(filepath.Join(dir, AddedDrivesFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("server: recording the drives added at run time in %s: %w", filepath.Join(dir, AddedDrivesFile), err)
	}
	return nil
}
