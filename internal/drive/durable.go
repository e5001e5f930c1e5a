package drive

import (
	"github.com/weftfs/weft/internal/durable"
)

// tempPrefix starts the name of every temporary file the drive creates
// (block files being written or staged, the identity file being replaced);
// Open removes leftovers with this prefix (from writes interrupted by a
// crash). It is durable's prefix, so that the identity file's temporary
// files are removed too.
const tempPrefix = durable.TempPrefix

// isTemp reports whether a file name is one of the drive's temp files.
func isTemp(name string) bool { return durable.IsTemp(name) }

// syncDir fsyncs a directory so that entries created, renamed or removed in
// it are durable.
func syncDir(dir string) error { return durable.SyncDir(dir) }
