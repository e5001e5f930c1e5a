package meta

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// NewInode describes an inode for Create.
type NewInode struct {
	// Type is the inode type; zero means TypeFile.
	Type FileType
	// Mode keeps the 07777 bits.
	Mode uint32
	// Rdev is the device number of a device node.
	Rdev uint32
	// Target is a symlink's target: 1 to MaxSymlinkLen bytes, no NUL.
	Target string
	// Pool and Protection default to the parent directory's.
	Pool       string
	Protection Protection
	// PoolDefault, with a zero Protection, gives the file its pool's
	// default protection (zero, resolved when data is written) instead
	// of the parent's: what a placement into another pool that names no
	// protection means.
	PoolDefault bool
}

// Create makes a new inode of any type named name in directory parent, owned
// by the Caller in ctx (the group is the parent's if the parent is setgid,
// and a new directory then inherits setgid), and returns its attributes.
//
// Errors: ErrExists (the name is taken, whatever its type), ErrNotFound
// (no parent), ErrNotDir (parent is not a directory), ErrInvalid and
// ErrNameTooLong (bad name, type, target, pool or protection). It is not
// idempotent: a retry after a lost reply fails with ErrExists.
//
// Concurrency: a create reads the parent inode and the entry, and writes the
// parent's times blind, so creates in one directory conflict only when they
// race on the same name (or with a mkdir, rmdir or rename changing the
// parent's inode).
func (m *Meta) Create(ctx context.Context, parent LIN, name string, ni NewInode) (Attr, error) {
	if ni.Type == 0 {
		ni.Type = TypeFile
	}
	if err := checkNew(name, ni); err != nil {
		return Attr{}, err
	}
	lin, err := m.allocLIN(ctx)
	if err != nil {
		return Attr{}, err
	}
	caller := CallerFrom(ctx)
	fault := evalCreateFault()
	body := func(o *op, mode opMode) (*inode, error) {
		o.withUsage()
		vals, err := o.loadDirs([]LIN{parent}, nil, keyEntry(parent, name))
		if err != nil {
			return nil, err
		}
		if mode == deferLocal && !o.mine(parent) {
			return nil, errNotMine
		}
		p, err := o.dir(parent)
		if err != nil {
			return nil, err
		}
		if vals[0] != nil {
			return nil, fmt.Errorf("%w: %q in directory LIN %d", ErrExists, name, parent)
		}
		n := newInode(p, lin, name, ni, caller, o.now)
		if fault.any() {
			o.createFaulty(p, n, name, fault)
			return n, nil
		}
		if n.typ == TypeDir {
			p.nlink++
			o.change(p)
		}
		o.inodes[lin] = n
		o.mark(n)
		o.put(keyEntry(parent, name), encodeEntry(n.typ, lin))
		o.touchDir(parent)
		o.addUsage(n.pool, Usage{Inodes: 1})
		switch {
		case mode == synchronous && n.typ != TypeDir:
			o.acquire(parent) // for the creates that follow
		case n.typ == TypeDir && (mode != synchronous || o.mine(parent)):
			// A directory made in one this client holds (an untar, a
			// build tree) is delegated from birth: the creates in it and
			// its own attribute changes can be deferred at once. A
			// deferred mkdir writes the record with the directory.
			o.acquireNew(lin)
		}
		return n, nil
	}
	var res *inode
	deferred := m.deferIn(ctx, parent, func(o *op, mode opMode) error {
		n, err := body(o, mode)
		if mode == deferLocal {
			res = n
		}
		return err
	})
	if deferred {
		m.wb.bear(lin, parent)
		if ni.Type == TypeDir {
			m.wb.holdNew(lin)
		}
	} else {
		var born bool
		err = m.update(ctx, func(o *op) error {
			n, err := body(o, synchronous)
			res, born = n, slices.Contains(o.acquired, lin)
			return err
		})
		if err == nil && born {
			m.wb.bear(lin, parent)
		}
	}
	if err != nil {
		return Attr{}, err
	}
	var t *dirTimes
	if res.typ == TypeDir {
		t = &dirTimes{mtime: res.mtime, ctime: res.ctime}
	}
	return res.attr(t), nil
}

// newInode returns the inode Create makes in directory p (LIN p.lin) for
// ni, named name, owned by caller, at time now: its pool and protection
// inherited from p unless ni names them, setgid inherited, link count 1
// (2 for a directory), generation 0 (the write bumps it). It does not
// change p: a new directory's caller raises p's link count.
func newInode(p *inode, lin LIN, name string, ni NewInode, caller Caller, now int64) *inode {
	n := &inode{
		lin: lin, typ: ni.Type, mode: ni.Mode & 0o7777, uid: caller.UID, gid: caller.GID,
		nlink: 1, rdev: ni.Rdev, atime: now, mtime: now, ctime: now, btime: now,
		pool: ni.Pool, prot: ni.Protection, links: []Link{{Parent: p.lin, Name: name}},
	}
	if n.pool == "" {
		n.pool = p.pool
	}
	if n.prot.IsZero() && !ni.PoolDefault {
		n.prot = p.prot
	}
	if p.mode&0o2000 != 0 {
		n.gid = p.gid
		if n.typ == TypeDir {
			n.mode |= 0o2000
		}
	}
	switch n.typ {
	case TypeDir:
		n.nlink = 2
	case TypeSymlink:
		n.target = ni.Target
		n.size = uint64(len(ni.Target))
	}
	return n
}

func checkNew(name string, ni NewInode) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if !ni.Type.valid() {
		return fmt.Errorf("%w: file type %d", ErrInvalid, ni.Type)
	}
	if ni.Type == TypeSymlink {
		switch {
		case ni.Target == "":
			return fmt.Errorf("%w: empty symlink target", ErrInvalid)
		case len(ni.Target) > MaxSymlinkLen:
			return fmt.Errorf("%w: symlink target of %d bytes, the limit is %d", ErrNameTooLong, len(ni.Target), MaxSymlinkLen)
		case strings.IndexByte(ni.Target, 0) >= 0:
			return fmt.Errorf("%w: symlink target contains a NUL byte", ErrInvalid)
		}
	} else if ni.Target != "" {
		return fmt.Errorf("%w: a target is only for symlinks", ErrInvalid)
	}
	if ni.Pool != "" {
		if err := ValidPoolName(ni.Pool); err != nil {
			return err
		}
	}
	return ni.Protection.Validate()
}

// Mkdir creates directory name in parent with mode; see Create.
func (m *Meta) Mkdir(ctx context.Context, parent LIN, name string, mode uint32) (Attr, error) {
	return m.Create(ctx, parent, name, NewInode{Type: TypeDir, Mode: mode})
}

// Symlink creates symlink name in parent pointing to target (mode 0777);
// see Create.
func (m *Meta) Symlink(ctx context.Context, parent LIN, name, target string) (Attr, error) {
	return m.Create(ctx, parent, name, NewInode{Type: TypeSymlink, Mode: 0o777, Target: target})
}

// Link adds entry name in directory parent for the existing inode lin, adds
// the back-pointer and returns lin's new attributes.
//
// Errors: ErrNotPermitted (lin is a directory), ErrTooManyLinks, ErrExists,
// ErrNotFound (no lin, or lin has no links left, or no parent), ErrNotDir,
// ErrInvalid and ErrNameTooLong.
func (m *Meta) Link(ctx context.Context, lin, parent LIN, name string) (Attr, error) {
	if err := ValidName(name); err != nil {
		return Attr{}, err
	}
	var res *inode
	err := m.update(ctx, func(o *op) error {
		vals, err := o.loadDirs([]LIN{parent}, []LIN{lin}, keyEntry(parent, name))
		if err != nil {
			return err
		}
		o.m.wb.forget(lin) // reachable under another name now
		n, err := o.inode(lin)
		if err != nil {
			return err
		}
		if err := linkable(n); err != nil {
			return err
		}
		if _, err := o.dir(parent); err != nil {
			return err
		}
		if vals[0] != nil {
			return fmt.Errorf("%w: %q in directory LIN %d", ErrExists, name, parent)
		}
		n.links = append(n.links, Link{Parent: parent, Name: name})
		n.nlink++
		o.change(n)
		o.put(keyEntry(parent, name), encodeEntry(n.typ, lin))
		o.touchDir(parent)
		res = n
		return nil
	})
	if err != nil {
		return Attr{}, err
	}
	return res.attr(nil), nil
}

// linkable returns why n cannot take another link, or nil.
func linkable(n *inode) error {
	switch {
	case n.typ == TypeDir:
		return fmt.Errorf("%w: LIN %d is a directory: directories cannot be hard-linked", ErrNotPermitted, n.lin)
	case n.nlink == 0:
		return fmt.Errorf("%w: LIN %d has been unlinked", ErrNotFound, n.lin)
	case len(n.links) >= MaxLinks:
		return fmt.Errorf("%w: LIN %d already has %d links", ErrTooManyLinks, n.lin, len(n.links))
	}
	return nil
}
