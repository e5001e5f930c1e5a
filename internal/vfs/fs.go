package vfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/runner"
)

// Errors of vfs itself (meta's and client's pass through wrapped).
var (
	// ErrAccess: the caller lacks permission (EACCES).
	ErrAccess = errors.New("vfs: permission denied")
	// ErrPerm: the operation needs ownership or privilege (EPERM).
	ErrPerm = errors.New("vfs: operation not permitted")
	// ErrBadHandle: the handle is closed or not open for this access (EBADF).
	ErrBadHandle = errors.New("vfs: bad file handle")
)

// Capacity reports the bytes of the cluster's drives, for statfs.
type Capacity func(ctx context.Context) (total, free int64, err error)

// Config wires an FS.
type Config struct {
	Meta   *meta.Meta
	Client *client.Client
	// Session identifies this mount's open files in meta (deferred delete).
	Session  meta.SessionID
	Capacity Capacity
	Log      *slog.Logger
	// CheckPermissions makes vfs check POSIX permissions itself. A FUSE
	// mount with default_permissions leaves that to the kernel; NFS needs it.
	CheckPermissions bool
	// Runner runs the FS's worker ("opens", see RegisterDelay); nil: a
	// runner of its own, stopped by Close.
	Runner *runner.Runner
}

// FS is a mounted namespace. It is safe for concurrent use.
type FS struct {
	cfg Config
	m   *meta.Meta
	c   *client.Client
	log *slog.Logger

	opens *opens

	mu      sync.Mutex
	handles map[uint64]*Handle
	nextFH  uint64
}

// New returns an FS over cfg.
func New(cfg Config) *FS {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &FS{cfg: cfg, m: cfg.Meta, c: cfg.Client, log: cfg.Log, handles: map[uint64]*Handle{}, nextFH: 1,
		opens: newOpens(cfg.Meta, cfg.Session, cfg.Log, cfg.Runner)}
}

// Meta returns the namespace the FS serves.
func (fs *FS) Meta() *meta.Meta { return fs.m }

// Client returns the data path the FS uses.
func (fs *FS) Client() *client.Client { return fs.c }

// Lookup returns the attributes of name in directory parent. The caller
// needs search (x) permission on parent.
func (fs *FS) Lookup(ctx context.Context, parent meta.LIN, name string) (meta.Attr, error) {
	if err := fs.checkLIN(ctx, parent, MayExec); err != nil {
		return meta.Attr{}, err
	}
	a, err := fs.m.Lookup(ctx, parent, name)
	if err != nil {
		return a, err
	}
	return fs.withOpenSize(a), nil
}

// GetAttr returns lin's attributes; the size of a file with buffered writes
// in this mount includes them.
func (fs *FS) GetAttr(ctx context.Context, lin meta.LIN) (meta.Attr, error) {
	a, err := fs.m.GetAttr(ctx, lin)
	if err != nil {
		return a, err
	}
	return fs.withOpenSize(a), nil
}

func (fs *FS) withOpenSize(a meta.Attr) meta.Attr {
	if a.Type == meta.TypeFile {
		if size, ok := fs.c.Size(a.LIN); ok {
			a.Size = uint64(size)
		}
	}
	return a
}

// SetAttr changes attributes. A size change goes through the data path
// (buffered writes are flushed first, so a shrink cuts them too). POSIX
// rules: only the owner (or root) changes mode and times other than to
// "now"; only root changes the owner; the owner may change the group to
// one of its groups; a chown or a write-free mode change by a non-root
// caller clears setgid when the caller is not in the file's group; chown
// clears setuid and setgid of a regular file.
func (fs *FS) SetAttr(ctx context.Context, lin meta.LIN, mask meta.SetAttrMask, in meta.Attr) (meta.Attr, error) {
	cur, err := fs.m.GetAttr(ctx, lin)
	if err != nil {
		return cur, err
	}
	if fs.cfg.CheckPermissions {
		if mask, in, err = checkSetAttr(meta.CallerFrom(ctx), cur, mask, in); err != nil {
			return cur, err
		}
	}
	if mask&(meta.SetUID|meta.SetGID) != 0 && cur.Type == meta.TypeFile && cur.Mode&(modeSetuid|modeSetgid) != 0 {
		// chown clears setuid/setgid of a regular file (as Linux does),
		// unless the same call sets the mode explicitly.
		if mask&meta.SetMode == 0 {
			mask |= meta.SetMode
			in.Mode = cur.Mode
		}
		in.Mode &^= modeSetuid
		if in.Mode&0o010 != 0 { // setgid without group-exec is mandatory locking: keep it
			in.Mode &^= modeSetgid
		}
	}
	if mask&meta.SetSize != 0 {
		if cur.Type == meta.TypeDir {
			return cur, fmt.Errorf("%w: truncate of a directory", meta.ErrIsDir)
		}
		f, err := fs.c.Open(ctx, lin, true)
		if err != nil {
			return cur, err
		}
		err = f.Truncate(ctx, int64(in.Size))
		if cerr := f.Close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			return cur, err
		}
		mask &^= meta.SetSize
		if mask == 0 {
			return fs.GetAttr(ctx, lin)
		}
	}
	a, err := fs.m.SetAttr(ctx, lin, mask, in)
	if err != nil {
		return a, err
	}
	return fs.withOpenSize(a), nil
}

// Mode bits.
const (
	modeSetuid = 0o4000
	modeSetgid = 0o2000
	modeSticky = 0o1000
)

// Create makes a file, device, FIFO or socket in parent. With exclusive it
// fails (meta.ErrExists) if the name is taken; without, an existing
// regular file is opened instead (as open(O_CREAT) does) when open is set.
// When open is set it returns a handle opened with flags.
func (fs *FS) Create(ctx context.Context, parent meta.LIN, name string, ni meta.NewInode, open bool, flags int) (meta.Attr, *Handle, error) {
	if err := fs.checkLIN(ctx, parent, MayWrite|MayExec); err != nil {
		return meta.Attr{}, nil, err
	}
	a, err := fs.m.Create(ctx, parent, name, ni)
	if errors.Is(err, meta.ErrExists) && open && flags&OExcl == 0 {
		if a, err = fs.m.Lookup(ctx, parent, name); err != nil {
			return a, nil, err
		}
		h, err := fs.Open(ctx, a.LIN, flags)
		return fs.withOpenSize(a), h, err
	}
	if err != nil || !open {
		return a, nil, err
	}
	h, err := fs.open(ctx, a, flags, false)
	return a, h, err
}

// Mkdir makes a directory.
func (fs *FS) Mkdir(ctx context.Context, parent meta.LIN, name string, mode uint32) (meta.Attr, error) {
	if err := fs.checkLIN(ctx, parent, MayWrite|MayExec); err != nil {
		return meta.Attr{}, err
	}
	return fs.m.Mkdir(ctx, parent, name, mode)
}

// Symlink makes a symbolic link.
func (fs *FS) Symlink(ctx context.Context, parent meta.LIN, name, target string) (meta.Attr, error) {
	if err := fs.checkLIN(ctx, parent, MayWrite|MayExec); err != nil {
		return meta.Attr{}, err
	}
	return fs.m.Symlink(ctx, parent, name, target)
}

// Readlink returns a symlink's target.
func (fs *FS) Readlink(ctx context.Context, lin meta.LIN) (string, error) {
	return fs.m.Readlink(ctx, lin)
}

// Link makes a hard link to lin named name in parent.
func (fs *FS) Link(ctx context.Context, lin, parent meta.LIN, name string) (meta.Attr, error) {
	if err := fs.checkLIN(ctx, parent, MayWrite|MayExec); err != nil {
		return meta.Attr{}, err
	}
	a, err := fs.m.Link(ctx, lin, parent, name)
	return fs.withOpenSize(a), err
}

// Unlink removes a non-directory entry. The file's data is freed when its
// last link is gone and no mount has it open.
func (fs *FS) Unlink(ctx context.Context, parent meta.LIN, name string) error {
	if err := fs.checkRemove(ctx, parent, name); err != nil {
		return err
	}
	if err := fs.recordOpenVictim(ctx, parent, name); err != nil {
		return err
	}
	return fs.m.Unlink(ctx, parent, name)
}

// recordOpenVictim records in meta the open of the file at parent/name
// before this mount unlinks or replaces it, if this mount has it open and
// has not recorded that yet (see RegisterDelay).
func (fs *FS) recordOpenVictim(ctx context.Context, parent meta.LIN, name string) error {
	if !fs.opens.anyPending() {
		return nil
	}
	a, err := fs.m.Lookup(ctx, parent, name)
	if err != nil {
		return nil // nothing there to protect; the operation reports its own error
	}
	return fs.opens.ensure(ctx, a.LIN)
}

// Rmdir removes an empty directory.
func (fs *FS) Rmdir(ctx context.Context, parent meta.LIN, name string) error {
	if err := fs.checkRemove(ctx, parent, name); err != nil {
		return err
	}
	return fs.m.Rmdir(ctx, parent, name)
}

// Rename renames atomically, with POSIX replace semantics (flags may ask
// for no-replace or exchange).
func (fs *FS) Rename(ctx context.Context, sp meta.LIN, sn string, dp meta.LIN, dn string, flags meta.RenameFlags) error {
	if err := fs.checkRemove(ctx, sp, sn); err != nil {
		return err
	}
	if err := fs.checkLIN(ctx, dp, MayWrite|MayExec); err != nil {
		return err
	}
	if fs.cfg.CheckPermissions {
		if err := fs.checkRemove(ctx, dp, dn); err != nil && !errors.Is(err, meta.ErrNotFound) {
			return err
		}
	}
	if err := fs.recordOpenVictim(ctx, dp, dn); err != nil {
		return err
	}
	return fs.m.Rename(ctx, sp, sn, dp, dn, flags)
}

// ReadDir lists up to limit entries of dir after the name cursor (""
// starts at the beginning); next is "" at the end.
func (fs *FS) ReadDir(ctx context.Context, dir meta.LIN, after string, limit int) ([]meta.DirEntry, string, error) {
	return fs.m.ReadDir(ctx, dir, after, limit)
}

// GetXattr, ListXattr, SetXattr and RemoveXattr pass through to meta.
func (fs *FS) GetXattr(ctx context.Context, lin meta.LIN, name string) ([]byte, error) {
	return fs.m.GetXattr(ctx, lin, name)
}

// ListXattr lists lin's extended attribute names.
func (fs *FS) ListXattr(ctx context.Context, lin meta.LIN) ([]string, error) {
	return fs.m.ListXattr(ctx, lin)
}

// SetXattr sets an extended attribute; the caller must own the file or be
// root for "trusted."/"security." names, and may write the file otherwise.
func (fs *FS) SetXattr(ctx context.Context, lin meta.LIN, name string, value []byte, flags meta.XattrFlags) error {
	if err := fs.checkLIN(ctx, lin, MayWrite); err != nil {
		return err
	}
	return fs.m.SetXattr(ctx, lin, name, value, flags)
}

// RemoveXattr removes an extended attribute.
func (fs *FS) RemoveXattr(ctx context.Context, lin meta.LIN, name string) error {
	if err := fs.checkLIN(ctx, lin, MayWrite); err != nil {
		return err
	}
	return fs.m.RemoveXattr(ctx, lin, name)
}

// StatFS is what statfs reports.
type StatFS struct {
	TotalBytes, FreeBytes int64
	Files                 int64
}

// StatFS returns capacity (from the drives) and the inode count.
func (fs *FS) StatFS(ctx context.Context) (StatFS, error) {
	var st StatFS
	u, err := fs.m.StatFS(ctx)
	if err != nil {
		return st, err
	}
	st.Files = u.Total.Inodes
	if fs.cfg.Capacity != nil {
		st.TotalBytes, st.FreeBytes, err = fs.cfg.Capacity(ctx)
	}
	return st, err
}

// relatime decides whether a read updates atime: when atime is not newer
// than mtime or ctime, or is a day old (Linux's relatime).
func relatime(a meta.Attr, now time.Time) bool {
	return !a.Atime.After(a.Mtime) || !a.Atime.After(a.Ctime) || now.Sub(a.Atime) > 24*time.Hour
}
