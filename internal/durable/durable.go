package durable

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix starts the name of every temporary file WriteFile creates. A
// crash between creating it and the rename leaves such a file beside the
// target; owners of a directory may remove names with this prefix when they
// open it (package drive does).
const TempPrefix = ".tmp-"

// IsTemp reports whether a file name (not a path) is one of WriteFile's
// temporary files.
func IsTemp(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// WriteFile replaces path with data, atomically and durably: it writes a
// temporary file in path's directory (which must exist), fsyncs it, gives it
// perm, renames it over path and fsyncs the directory. When WriteFile
// returns nil the new content is on stable storage; when it returns an error
// path holds its old content or the new one, and the temporary file is gone
// (unless the process died). Errors name path.
//
// Concurrent WriteFile calls on one path are safe (each has its own
// temporary file); the last rename wins.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := writeFile(path, data, perm); err != nil {
		return fmt.Errorf("durable: write %s: %w", path, err)
	}
	return nil
}

func writeFile(path string, data []byte, perm os.FileMode) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPrefix+name+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs directory dir, so that the entries created, renamed or
// removed in it are durable.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
