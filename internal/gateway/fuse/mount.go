package fuse

import (
	"fmt"
	"log/slog"
	"os"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/weftfs/weft/internal/vfs"
)

// Options tune a mount.
type Options struct {
	// FsName is shown as the mount's source in /proc/mounts ("weft:<cluster>").
	FsName string
	// AllowOther lets every user use the mount (the default for weft: a
	// shared file system). Needs root or user_allow_other in /etc/fuse.conf.
	AllowOther bool
	// Debug logs every FUSE request.
	Debug bool
	Log   *slog.Logger
}

// Mount is a mounted weft namespace.
type Mount struct {
	srv *gofuse.Server
	dir string
}

// MaxWrite is the largest write the kernel sends in one request.
const MaxWrite = 1 << 20

// New mounts fs at dir and starts serving. The kernel checks POSIX
// permissions itself (default_permissions) against the attributes weft
// returns, for every uid and gid, including sticky directories; setuid and
// setgid are cleared on write by the kernel and by vfs. The page cache is
// used (no direct I/O), so shared mmap works; kernel passthrough is never
// enabled, so every byte goes through weft.
func New(fs *vfs.FS, dir string, o Options) (*Mount, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("fuse: mount point %s: not an existing directory (create it first)", dir)
	}
	mo := &gofuse.MountOptions{
		AllowOther:         o.AllowOther,
		Options:            []string{"default_permissions"},
		MaxWrite:           MaxWrite,
		MaxReadAhead:       MaxWrite,
		MaxBackground:      64,
		FsName:             o.FsName,
		Name:               "weft",
		DisableReadDirPlus: true,
		Debug:              o.Debug,
		DirectMount:        os.Geteuid() == 0,
		EnableLocks:        true, // flock and POSIX locks come to weft (locks.go)
		// weft removes setuid, setgid and capabilities itself when data
		// changes (vfs.KillPrivileges); the kernel then marks the mount
		// SB_NOSEC and stops asking for security.capability before
		// every write (a FUSE round trip per write).
		ExtraCapabilities: gofuse.CAP_HANDLE_KILLPRIV_V2,
	}
	srv, err := gofuse.NewServer(newRawFS(fs, o.Log), dir, mo)
	if err != nil {
		return nil, fmt.Errorf("fuse: mount %s: %w (is fuse3 installed and /dev/fuse present?)", dir, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		_ = srv.Unmount()
		return nil, fmt.Errorf("fuse: mount %s: %w", dir, err)
	}
	return &Mount{srv: srv, dir: dir}, nil
}

// Unmount unmounts (it fails with EBUSY while files are in use; the caller
// may retry) and waits for the server to finish.
func (m *Mount) Unmount() error {
	if err := m.srv.Unmount(); err != nil {
		return fmt.Errorf("fuse: unmount %s: %w", m.dir, err)
	}
	m.srv.Wait()
	return nil
}

// Wait blocks until the file system is unmounted (also from outside, with
// fusermount3 -u or umount).
func (m *Mount) Wait() { m.srv.Wait() }
