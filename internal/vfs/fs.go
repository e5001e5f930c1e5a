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

// Capacity reports the bytes of the cluster's drives, for statfs.
type Capacity func(ctx context.Context) (total, free int64, err error)

// Config wires an FS. It is the one place that names the layers below;
// gateways get an *FS and never see them.
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
	// Placer places new regular files (the pool policy's SET POOL
	// rules); nil: a new file takes its parent directory's pool and
	// protection.
	Placer Placer
}

// FS is a mounted namespace: what a gateway serves. It is safe for
// concurrent use. Its methods take and return vfs's own types, and every
// error they return is classified (errors.go).
type FS struct {
	cfg Config
	m   *meta.Meta
	c   *client.Client
	log *slog.Logger

	opens   *opens
	atimes  *atimes
	lockers lockers

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
		opens:  newOpens(cfg.Meta, cfg.Session, cfg.Log, cfg.Runner),
		atimes: newAtimes(cfg.Meta, cfg.Log, cfg.Runner)}
}

// Lookup returns the attributes of name in directory parent ("." is parent
// itself, ".." its parent). The caller needs search (x) permission on
// parent. Errors: ErrNotFound, ErrNotDir, ErrInvalid, ErrNameTooLong,
// ErrAccess.
func (fs *FS) Lookup(ctx context.Context, parent LIN, name string) (Attr, error) {
	if err := fs.checkLIN(ctx, meta.LIN(parent), MayExec); err != nil {
		return Attr{}, classify(err)
	}
	a, err := fs.m.Lookup(ctx, meta.LIN(parent), name)
	if err != nil {
		return Attr{}, classify(err)
	}
	return fs.withOpenSize(a), nil
}

// GetAttr returns lin's attributes; the size of a file with buffered writes
// in this mount includes them. Errors: ErrNotFound.
func (fs *FS) GetAttr(ctx context.Context, lin LIN) (Attr, error) {
	a, err := fs.m.GetAttr(ctx, meta.LIN(lin))
	if err != nil {
		return Attr{}, classify(err)
	}
	return fs.withOpenSize(a), nil
}

// Parent returns the LIN of directory dir's parent, for a listing's ".."
// entry (the root's parent is the root). Unlike Lookup(dir, ".."), it
// checks no permission: a gateway calls it for a directory the caller
// already opened. Errors: ErrNotFound, ErrNotDir.
func (fs *FS) Parent(ctx context.Context, dir LIN) (LIN, error) {
	in, err := fs.m.GetInode(ctx, meta.LIN(dir))
	if err != nil {
		return 0, classify(err)
	}
	if in.Type != meta.TypeDir {
		return 0, fmt.Errorf("%w: LIN %d is a %s", ErrNotDir, dir, in.Type)
	}
	if len(in.Links) == 0 { // the root
		return dir, nil
	}
	return LIN(in.Links[0].Parent), nil
}

// withOpenSize converts a, with the size of this mount's buffered writes
// of a regular file and the access time its reads noted (atimes).
func (fs *FS) withOpenSize(a meta.Attr) Attr {
	if a.Type == meta.TypeFile {
		if size, ok := fs.c.Size(a.LIN); ok {
			a.Size = uint64(size)
		}
		fs.atimes.overlay(&a)
	}
	return attrFromMeta(a)
}

// SetAttr changes the attributes mask selects to in's and returns the new
// ones. A size change goes through the data path (buffered writes are
// flushed first, so a shrink cuts them too). POSIX rules: only the owner
// (or root) changes mode and times other than to "now"; only root changes
// the owner; the owner may change the group to one of its groups; a chown
// or a write-free mode change by a non-root caller clears setgid when the
// caller is not in the file's group; chown clears setuid and setgid of a
// regular file. Errors: ErrNotFound, ErrPerm, ErrAccess, ErrIsDir (size of
// a directory), ErrInvalid, ErrNoSpace.
func (fs *FS) SetAttr(ctx context.Context, lin LIN, mask SetAttrMask, in Attr) (Attr, error) {
	a, err := fs.setAttr(ctx, meta.LIN(lin), mask, in)
	return a, classify(err)
}

func (fs *FS) setAttr(ctx context.Context, lin meta.LIN, mask SetAttrMask, in Attr) (Attr, error) {
	mcur, err := fs.m.GetAttr(ctx, lin)
	if err != nil {
		return Attr{}, err
	}
	cur := attrFromMeta(mcur)
	if fs.cfg.CheckPermissions {
		if mask, in, err = checkSetAttr(CallerFrom(ctx), cur, mask, in); err != nil {
			return cur, err
		}
	}
	if mask&(SetUID|SetGID) != 0 && cur.Type == TypeFile && cur.Mode&(modeSetuid|modeSetgid) != 0 {
		// chown clears setuid/setgid of a regular file (as Linux does),
		// unless the same call sets the mode explicitly.
		if mask&SetMode == 0 {
			mask |= SetMode
			in.Mode = cur.Mode
		}
		in.Mode &^= modeSetuid
		if in.Mode&0o010 != 0 { // setgid without group-exec is mandatory locking: keep it
			in.Mode &^= modeSetgid
		}
	}
	if mask&(SetMtime|SetMtimeNow) != 0 && cur.Type == TypeFile {
		// Writes buffered before the change commit first: their commit
		// sets mtime, which must not undo the change (tar sets mtime on
		// the open file after writing it, before close).
		if err := fs.c.Flush(ctx, lin); err != nil {
			return cur, err
		}
	}
	if mask&SetSize != 0 {
		if cur.Type == TypeDir {
			return cur, fmt.Errorf("%w: truncate of a directory", ErrIsDir)
		}
		f, err := fs.c.Open(ctx, lin, true)
		if err != nil {
			return cur, err
		}
		err = f.Truncate(ctx, int64(in.Size))
		if cerr := f.Close(ctx); err == nil {
			err = cerr
		}
		if err == nil {
			_, err = fs.killPrivileges(ctx, lin, CallerFrom(ctx).UID != 0)
		}
		if err != nil {
			return cur, err
		}
		mask &^= SetSize
		if mask == 0 {
			return fs.GetAttr(ctx, LIN(lin))
		}
	}
	var a meta.Attr
	set := func() (err error) {
		a, err = fs.m.SetAttr(ctx, lin, maskToMeta(mask), attrToMeta(in))
		return err
	}
	if mask&(SetAtime|SetAtimeNow) != 0 {
		err = fs.atimes.explicit(lin, set)
	} else {
		err = set()
	}
	if err != nil {
		return attrFromMeta(a), err
	}
	return fs.withOpenSize(a), nil
}

// Mode bits.
const (
	modeSetuid = 0o4000
	modeSetgid = 0o2000
	modeSticky = 0o1000
)

// Create makes a file, device, FIFO or socket in parent. With exclusive
// (OExcl in flags) it fails with ErrExists if the name is taken; without,
// an existing regular file is opened instead (as open(O_CREAT) does) when
// open is set. When open is set it returns a handle opened with flags.
// Errors: those of Lookup and Open, ErrExists, ErrAccess, ErrNoSpace.
func (fs *FS) Create(ctx context.Context, parent LIN, name string, ca CreateArgs, open bool, flags int) (Attr, *Handle, error) {
	a, h, err := fs.create(ctx, meta.LIN(parent), name, ca, open, flags)
	return a, h, classify(err)
}

func (fs *FS) create(ctx context.Context, parent meta.LIN, name string, ca CreateArgs, open bool, flags int) (Attr, *Handle, error) {
	if err := fs.checkLIN(ctx, parent, MayWrite|MayExec); err != nil {
		return Attr{}, nil, err
	}
	ni := createToMeta(ca)
	var a meta.Attr
	err := fs.placeNew(ctx, parent, name, &ni)
	if err == nil {
		a, err = fs.m.Create(ctx, parent, name, ni)
	} else if _, lerr := fs.m.Lookup(ctx, parent, name); lerr == nil {
		// A placement that fails (a pool without drives) concerns new
		// files only: open(O_CREAT) of an existing one opens it, and
		// O_EXCL says it exists.
		err = fmt.Errorf("%w: %q in directory LIN %d", meta.ErrExists, name, parent)
	}
	if errors.Is(err, meta.ErrExists) && open && flags&OExcl == 0 {
		if a, err = fs.m.Lookup(ctx, parent, name); err != nil {
			return Attr{}, nil, err
		}
		h, err := fs.Open(ctx, LIN(a.LIN), flags)
		return fs.withOpenSize(a), h, err
	}
	if err != nil || !open {
		return attrFromMeta(a), nil, err
	}
	h, err := fs.open(ctx, a, flags, false)
	return attrFromMeta(a), h, err
}

// Mkdir makes a directory. Errors: ErrExists, ErrNotFound, ErrNotDir,
// ErrInvalid, ErrNameTooLong, ErrAccess.
func (fs *FS) Mkdir(ctx context.Context, parent LIN, name string, mode uint32) (Attr, error) {
	if err := fs.checkLIN(ctx, meta.LIN(parent), MayWrite|MayExec); err != nil {
		return Attr{}, classify(err)
	}
	a, err := fs.m.Mkdir(ctx, meta.LIN(parent), name, mode)
	return attrFromMeta(a), classify(err)
}

// Symlink makes a symbolic link to target. Errors: those of Mkdir;
// ErrNameTooLong also for a target over its limit.
func (fs *FS) Symlink(ctx context.Context, parent LIN, name, target string) (Attr, error) {
	if err := fs.checkLIN(ctx, meta.LIN(parent), MayWrite|MayExec); err != nil {
		return Attr{}, classify(err)
	}
	a, err := fs.m.Symlink(ctx, meta.LIN(parent), name, target)
	return attrFromMeta(a), classify(err)
}

// Readlink returns a symlink's target. Errors: ErrNotFound, ErrInvalid
// (not a symlink).
func (fs *FS) Readlink(ctx context.Context, lin LIN) (string, error) {
	t, err := fs.m.Readlink(ctx, meta.LIN(lin))
	return t, classify(err)
}

// Link makes a hard link to lin named name in parent. Errors: those of
// Mkdir, ErrPerm (a directory), ErrTooManyLinks.
func (fs *FS) Link(ctx context.Context, lin, parent LIN, name string) (Attr, error) {
	if err := fs.checkLIN(ctx, meta.LIN(parent), MayWrite|MayExec); err != nil {
		return Attr{}, classify(err)
	}
	a, err := fs.m.Link(ctx, meta.LIN(lin), meta.LIN(parent), name)
	return fs.withOpenSize(a), classify(err)
}

// Unlink removes a non-directory entry. The file's data is freed when its
// last link is gone and no mount has it open. Errors: ErrNotFound,
// ErrNotDir, ErrIsDir, ErrAccess, ErrPerm (sticky directory).
func (fs *FS) Unlink(ctx context.Context, parent LIN, name string) error {
	if err := fs.checkRemove(ctx, meta.LIN(parent), name); err != nil {
		return classify(err)
	}
	if err := fs.recordOpenVictim(ctx, meta.LIN(parent), name); err != nil {
		return classify(err)
	}
	return classify(fs.m.Unlink(ctx, meta.LIN(parent), name))
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

// Rmdir removes an empty directory. Errors: those of Unlink, ErrNotEmpty.
func (fs *FS) Rmdir(ctx context.Context, parent LIN, name string) error {
	if err := fs.checkRemove(ctx, meta.LIN(parent), name); err != nil {
		return classify(err)
	}
	return classify(fs.m.Rmdir(ctx, meta.LIN(parent), name))
}

// Rename renames atomically, with POSIX replace semantics (flags may ask
// for no-replace or exchange). Errors: ErrNotFound, ErrExists, ErrNotDir,
// ErrIsDir, ErrNotEmpty, ErrInvalid (unknown flags, a directory moved into
// itself), ErrAccess, ErrPerm.
func (fs *FS) Rename(ctx context.Context, sp LIN, sn string, dp LIN, dn string, flags RenameFlags) error {
	return classify(fs.rename(ctx, meta.LIN(sp), sn, meta.LIN(dp), dn, flags))
}

func (fs *FS) rename(ctx context.Context, sp meta.LIN, sn string, dp meta.LIN, dn string, flags RenameFlags) error {
	if flags&^(RenameNoReplace|RenameExchange) != 0 {
		return fmt.Errorf("%w: rename flags %#x", ErrInvalid, uint8(flags))
	}
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
	return fs.m.Rename(ctx, sp, sn, dp, dn, renameToMeta(flags))
}

// ReadDir lists up to limit entries of dir after the name cursor (""
// starts at the beginning), in byte order of name; next is "" at the end.
// "." and ".." are not listed (see Parent). Errors: ErrNotFound, ErrNotDir.
func (fs *FS) ReadDir(ctx context.Context, dir LIN, after string, limit int) ([]DirEntry, string, error) {
	es, next, err := fs.m.ReadDir(ctx, meta.LIN(dir), after, limit)
	return entriesFromMeta(es), next, classify(err)
}

// GetXattr returns the value of extended attribute name of lin. Errors:
// ErrNotFound, ErrNoXattr, ErrInvalid, ErrXattrTooLarge (bad name).
func (fs *FS) GetXattr(ctx context.Context, lin LIN, name string) ([]byte, error) {
	v, err := fs.m.GetXattr(ctx, meta.LIN(lin), name)
	return v, classify(err)
}

// ListXattr lists lin's extended attribute names. Errors: ErrNotFound.
func (fs *FS) ListXattr(ctx context.Context, lin LIN) ([]string, error) {
	names, err := fs.m.ListXattr(ctx, meta.LIN(lin))
	return names, classify(err)
}

// SetXattr sets an extended attribute; the caller must be allowed to write
// the file. Errors: ErrNotFound, ErrExists (XattrCreate), ErrNoXattr
// (XattrReplace), ErrInvalid (bad name, unknown flags), ErrXattrTooLarge,
// ErrAccess.
func (fs *FS) SetXattr(ctx context.Context, lin LIN, name string, value []byte, flags XattrFlags) error {
	if flags&^(XattrCreate|XattrReplace) != 0 {
		return fmt.Errorf("%w: setxattr flags %#x", ErrInvalid, uint8(flags))
	}
	if err := fs.checkLIN(ctx, meta.LIN(lin), MayWrite); err != nil {
		return classify(err)
	}
	return classify(fs.m.SetXattr(ctx, meta.LIN(lin), name, value, xattrToMeta(flags)))
}

// RemoveXattr removes an extended attribute. Errors: ErrNotFound,
// ErrNoXattr, ErrInvalid, ErrAccess.
func (fs *FS) RemoveXattr(ctx context.Context, lin LIN, name string) error {
	if err := fs.checkLIN(ctx, meta.LIN(lin), MayWrite); err != nil {
		return classify(err)
	}
	return classify(fs.m.RemoveXattr(ctx, meta.LIN(lin), name))
}

// StatFS returns capacity (from the drives) and the inode count.
func (fs *FS) StatFS(ctx context.Context) (StatFS, error) {
	var st StatFS
	u, err := fs.m.StatFS(ctx)
	if err != nil {
		return st, classify(err)
	}
	st.Files = u.Total.Inodes
	if fs.cfg.Capacity != nil {
		st.TotalBytes, st.FreeBytes, err = fs.cfg.Capacity(ctx)
	}
	return st, classify(err)
}

// relatime decides whether a read updates atime: when atime is not newer
// than mtime or ctime, or is a day old (Linux's relatime).
func relatime(a meta.Attr, now time.Time) bool {
	return !a.Atime.After(a.Mtime) || !a.Atime.After(a.Ctime) || now.Sub(a.Atime) > 24*time.Hour
}
