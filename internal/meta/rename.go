package meta

import (
	"context"
	"fmt"
)

// RenameFlags modify Rename, like renameat2(2)'s.
type RenameFlags uint8

// Rename flags.
const (
	// RenameNoReplace fails with ErrExists if the destination exists.
	RenameNoReplace RenameFlags = 1 << iota
	// RenameExchange swaps source and destination, which must both exist.
	RenameExchange
)

// maxDepth bounds the ancestor walk of a directory rename; deeper means the
// tree has a cycle.
const maxDepth = 4096

// Rename moves entry srcName of srcParent to dstName of dstParent in one
// transaction, with POSIX semantics: an existing destination is replaced
// (a file by a non-directory, an empty directory by a directory); renaming
// an entry onto itself, or onto another link of the same inode, does
// nothing; a directory cannot move into itself or below itself. The moved
// inode's back-pointer follows it, and directory link counts follow moved
// directories. A replaced inode loses its link as in Unlink or Rmdir.
//
// Errors: ErrNotFound (source, or destination with RenameExchange),
// ErrExists (RenameNoReplace), ErrNotDir (a parent; or a directory onto a
// non-directory), ErrIsDir (a non-directory onto a directory), ErrNotEmpty,
// ErrRenameLoop, ErrInvalid and ErrNameTooLong (bad names or flags).
//
// A directory move reads every ancestor of the destination (to refuse
// loops, and to conflict with a concurrent move of an ancestor), so its
// transaction grows with the depth of the tree.
func (m *Meta) Rename(ctx context.Context, srcParent LIN, srcName string, dstParent LIN, dstName string, flags RenameFlags) error {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return fmt.Errorf("%w: rename flags %#x", ErrInvalid, flags)
	}
	if err := ValidName(srcName); err != nil {
		return err
	}
	if err := ValidName(dstName); err != nil {
		return err
	}
	var later LIN
	err := m.update(ctx, func(o *op) error {
		later = 0
		o.withUsage()
		sk, dk := keyEntry(srcParent, srcName), keyEntry(dstParent, dstName)
		vals, err := o.loadDirs(uniq(srcParent, dstParent), nil, sk, dk)
		if err != nil {
			return err
		}
		sp, err := o.dir(srcParent)
		if err != nil {
			return err
		}
		dp, err := o.dir(dstParent)
		if err != nil {
			return err
		}
		_, slin, ok, err := entryOf(sk, vals[0])
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %q in directory LIN %d", ErrNotFound, srcName, srcParent)
		}
		if srcParent == dstParent && srcName == dstName {
			return nil
		}
		_, dlin, dok, err := entryOf(dk, vals[1])
		if err != nil {
			return err
		}
		switch {
		case dok && flags&RenameNoReplace != 0:
			return fmt.Errorf("%w: %q in directory LIN %d", ErrExists, dstName, dstParent)
		case !dok && flags&RenameExchange != 0:
			return fmt.Errorf("%w: %q in directory LIN %d (exchange needs both)", ErrNotFound, dstName, dstParent)
		case dok && dlin == slin:
			return nil // two links of one inode: POSIX says do nothing
		}
		// Both may be reached under their new names by others now.
		o.m.wb.forget(slin, dlin)
		src, err := o.inode(slin)
		if err != nil {
			return err
		}
		var dst *inode
		if dok {
			if dst, _, err = o.inodeOpen(dlin); err != nil {
				return err
			}
		}
		if flags&RenameExchange != 0 {
			return o.exchange(sp, srcName, src, dp, dstName, dst)
		}
		if dst != nil {
			switch {
			case src.typ == TypeDir && dst.typ != TypeDir:
				return fmt.Errorf("%w: cannot replace %s %q with a directory", ErrNotDir, dst.typ, dstName)
			case src.typ != TypeDir && dst.typ == TypeDir:
				return fmt.Errorf("%w: cannot replace directory %q with a %s", ErrIsDir, dstName, src.typ)
			case dst.typ == TypeDir:
				if err := o.checkEmpty(dst); err != nil {
					return err
				}
			}
		}
		if src.typ == TypeDir && srcParent != dstParent {
			if err := o.checkNotAncestor(slin, dstParent); err != nil {
				return err
			}
		}
		if dst != nil {
			purge, err := o.unlinkReplaced(dp, dstName, dst)
			if err != nil {
				return err
			}
			if purge {
				later = dst.lin
			}
		}
		o.del(sk)
		o.put(dk, encodeEntry(src.typ, slin))
		o.moveLink(src, srcParent, srcName, dstParent, dstName)
		if src.typ == TypeDir && srcParent != dstParent {
			sp.nlink--
			dp.nlink++
			o.change(sp)
			o.change(dp)
		}
		o.touchDir(srcParent)
		o.touchDir(dstParent)
		return nil
	})
	if err == nil && later != 0 {
		_ = m.purge(ctx, later)
	}
	return err
}

// moveLink replaces n's back-pointer (fromParent, fromName) with (toParent,
// toName).
func (o *op) moveLink(n *inode, fromParent LIN, fromName string, toParent LIN, toName string) {
	for i, l := range n.links {
		if l.Parent == fromParent && l.Name == fromName {
			n.links[i] = Link{Parent: toParent, Name: toName}
			break
		}
	}
	o.change(n)
}

// unlinkReplaced drops the link (p, name) of dst, which a rename replaces;
// the entry itself is overwritten by the caller. It reports whether a purge
// must follow.
func (o *op) unlinkReplaced(p *inode, name string, dst *inode) (bool, error) {
	dst.removeLink(p.lin, name)
	if dst.typ == TypeDir {
		p.nlink--
		o.change(p)
		dst.nlink = 0
		return o.destroy(dst)
	}
	dst.nlink--
	o.change(dst)
	if dst.nlink > 0 {
		return false, nil
	}
	return o.release(dst)
}

// exchange swaps entries (sp, sname) → src and (dp, dname) → dst.
func (o *op) exchange(sp *inode, sname string, src *inode, dp *inode, dname string, dst *inode) error {
	if sp.lin != dp.lin {
		if src.typ == TypeDir {
			if err := o.checkNotAncestor(src.lin, dp.lin); err != nil {
				return err
			}
		}
		if dst.typ == TypeDir {
			if err := o.checkNotAncestor(dst.lin, sp.lin); err != nil {
				return err
			}
		}
	}
	o.put(keyEntry(sp.lin, sname), encodeEntry(dst.typ, dst.lin))
	o.put(keyEntry(dp.lin, dname), encodeEntry(src.typ, src.lin))
	o.moveLink(src, sp.lin, sname, dp.lin, dname)
	o.moveLink(dst, dp.lin, dname, sp.lin, sname)
	if sp.lin != dp.lin {
		if src.typ == TypeDir {
			sp.nlink--
			dp.nlink++
		}
		if dst.typ == TypeDir {
			dp.nlink--
			sp.nlink++
		}
		o.change(sp)
		o.change(dp)
	}
	o.touchDir(sp.lin)
	o.touchDir(dp.lin)
	return nil
}

// checkNotAncestor returns ErrRenameLoop if directory dir is start or one
// of start's ancestors. Every ancestor read joins the read set, so a
// concurrent rename that would close a loop conflicts with this one.
func (o *op) checkNotAncestor(dir, start LIN) error {
	cur := start
	for depth := 0; ; depth++ {
		if cur == dir {
			return fmt.Errorf("%w: directory LIN %d would move below itself (under LIN %d)", ErrRenameLoop, dir, start)
		}
		if cur == RootLIN {
			return nil
		}
		if depth > maxDepth {
			return fmt.Errorf("%w: more than %d ancestors above LIN %d: the tree has a cycle", ErrCorrupt, maxDepth, start)
		}
		n, err := o.inode(cur)
		if err != nil {
			return err
		}
		if len(n.links) == 0 {
			return fmt.Errorf("%w: directory LIN %d has no back-pointer", ErrCorrupt, cur)
		}
		cur = n.links[0].Parent
	}
}
