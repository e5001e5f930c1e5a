package drive

import (
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix starts the name of every temporary file the drive creates; Open
// removes leftovers with this prefix (from writes interrupted by a crash).
const tempPrefix = ".tmp-"

// isTemp reports whether a file name is one of the drive's temp files.
func isTemp(name string) bool { return strings.HasPrefix(name, tempPrefix) }

// syncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable.
func syncDir(dir string) error {
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

// writeFileDurable writes dir/name atomically and durably: temp file in dir,
// fsync, rename over name, fsync dir. A crash leaves either the old file or
// the new one, plus possibly a temp file that Open removes.
func writeFileDurable(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, tempPrefix+name+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := f.Write(data); err != nil {
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
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}
