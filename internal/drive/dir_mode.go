package drive

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"syscall"
)

// DirMode is the mode of a drive directory: the server's user alone may
// list it, read its blocks or write into it. Other local users reach the
// blocks only through the block service, which authenticates them (a
// mount on the node's machine that reads and writes the directory itself
// runs as root, or as the server's user).
const DirMode fs.FileMode = 0o700

// secureDir makes dir the server's user's alone (DirMode, owned by the
// effective user), saying so in the log when it was not: a directory
// created by an older weft (0755), or by hand. It cannot take over a
// directory another user owns unless it runs as root; it then refuses,
// saying what to do.
func secureDir(dir string, log *slog.Logger) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("drive: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	euid := os.Geteuid()
	if ok && int(sys.Uid) != euid {
		if euid != 0 {
			return fmt.Errorf("%w: drive directory %s is owned by uid %d, not by this server's user (uid %d): chown it to that user", ErrInvalid, dir, sys.Uid, euid)
		}
		if err := os.Chown(dir, 0, 0); err != nil {
			return fmt.Errorf("drive: taking ownership of %s: %w", dir, err)
		}
		log.Warn("drive directory was owned by another user; it is the server's now", "path", dir, "was_uid", sys.Uid, "uid", euid)
	}
	if st.Mode().Perm() != DirMode {
		if err := os.Chmod(dir, DirMode); err != nil {
			return fmt.Errorf("drive: restricting %s to its owner: %w", dir, err)
		}
		log.Warn("drive directory was open to other users; restricted to the server's user", "path", dir,
			"was", st.Mode().Perm().String(), "now", DirMode.String())
	}
	return nil
}
