package vfs

import (
	"context"
	"fmt"
	"slices"

	"github.com/weftfs/weft/internal/meta"
)

// Access bits, as access(2) takes them.
const (
	MayExec  uint32 = 1
	MayWrite uint32 = 2
	MayRead  uint32 = 4
)

// Allowed reports whether caller c may access an inode with attributes a
// for every bit of want, by POSIX mode bits: owner class if c owns it,
// else group class if c is in its group, else other. Root may read and
// write anything, and execute anything with an x bit (or a directory).
func Allowed(c Caller, a Attr, want uint32) bool {
	if c.UID == 0 {
		if want&MayExec == 0 || a.Type == TypeDir {
			return true
		}
		return a.Mode&0o111 != 0
	}
	var bits uint32
	switch {
	case c.UID == a.UID:
		bits = (a.Mode >> 6) & 7
	case c.GID == a.GID || slices.Contains(c.Groups, a.GID):
		bits = (a.Mode >> 3) & 7
	default:
		bits = a.Mode & 7
	}
	return bits&want == want
}

// Access checks want (MayRead, MayWrite, MayExec) against lin for the
// caller in ctx (access(2)). Errors: ErrAccess, ErrNotFound.
func (fs *FS) Access(ctx context.Context, lin LIN, want uint32) error {
	return classify(fs.access(ctx, meta.LIN(lin), want))
}

func (fs *FS) access(ctx context.Context, lin meta.LIN, want uint32) error {
	a, err := fs.m.GetAttr(ctx, lin)
	if err != nil {
		return err
	}
	if !Allowed(CallerFrom(ctx), attrFromMeta(a), want) {
		return fmt.Errorf("%w: LIN %d", ErrAccess, lin)
	}
	return nil
}

// checkLIN applies access when the FS checks permissions itself.
func (fs *FS) checkLIN(ctx context.Context, lin meta.LIN, want uint32) error {
	if !fs.cfg.CheckPermissions {
		return nil
	}
	return fs.access(ctx, lin, want)
}

// checkRemove checks that the caller may remove name from dir: write and
// search permission on dir, and, in a sticky directory, ownership of dir or
// of the entry (or root).
func (fs *FS) checkRemove(ctx context.Context, dir meta.LIN, name string) error {
	if !fs.cfg.CheckPermissions {
		return nil
	}
	c := CallerFrom(ctx)
	d, err := fs.m.GetAttr(ctx, dir)
	if err != nil {
		return err
	}
	if !Allowed(c, attrFromMeta(d), MayWrite|MayExec) {
		return fmt.Errorf("%w: remove %q from LIN %d", ErrAccess, name, dir)
	}
	if d.Mode&modeSticky == 0 || c.UID == 0 || c.UID == d.UID {
		return nil
	}
	e, err := fs.m.Lookup(ctx, dir, name)
	if err != nil {
		return err
	}
	if c.UID != e.UID {
		return fmt.Errorf("%w: %q in sticky directory LIN %d belongs to uid %d", ErrPerm, name, dir, e.UID)
	}
	return nil
}

// checkSetAttr applies POSIX's rules for chmod, chown and utimes by a
// caller, returning the (possibly adjusted) mask and attributes.
func checkSetAttr(c Caller, cur Attr, mask SetAttrMask, in Attr) (SetAttrMask, Attr, error) {
	owner := c.UID == 0 || c.UID == cur.UID
	inGroup := func(g uint32) bool { return c.GID == g || slices.Contains(c.Groups, g) }
	if mask&SetUID != 0 && in.UID != cur.UID && c.UID != 0 {
		return mask, in, fmt.Errorf("%w: only root changes a file's owner", ErrPerm)
	}
	if mask&SetGID != 0 && in.GID != cur.GID && c.UID != 0 && (!owner || !inGroup(in.GID)) {
		return mask, in, fmt.Errorf("%w: change group to %d: not the owner or not a member", ErrPerm, in.GID)
	}
	if mask&SetMode != 0 {
		if !owner {
			return mask, in, fmt.Errorf("%w: only the owner changes the mode", ErrPerm)
		}
		gid := cur.GID
		if mask&SetGID != 0 {
			gid = in.GID
		}
		if c.UID != 0 && cur.Type != TypeDir && !inGroup(gid) {
			in.Mode &^= modeSetgid
		}
	}
	if mask&(SetAtime|SetMtime) != 0 && !owner {
		return mask, in, fmt.Errorf("%w: only the owner sets explicit times", ErrPerm)
	}
	if mask&(SetAtimeNow|SetMtimeNow) != 0 && !owner && !Allowed(c, cur, MayWrite) {
		return mask, in, fmt.Errorf("%w: set times to now needs ownership or write permission", ErrAccess)
	}
	if mask&SetSize != 0 && !Allowed(c, cur, MayWrite) {
		return mask, in, fmt.Errorf("%w: truncate needs write permission", ErrAccess)
	}
	return mask, in, nil
}
