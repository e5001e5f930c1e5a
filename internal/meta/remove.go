package meta

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
)

// Unlink removes entry name from directory parent and its back-pointer. When
// the inode's last link goes: if a session has it open, it stays (Nlink 0)
// with an orphan record until the last Release; otherwise it is deleted with
// its stripes (blocks to the delete queue) and xattrs — in the same
// transaction when they are few, else the orphan record is written in that
// transaction and a resumable cleanup (Purge) finishes after it.
//
// Errors: ErrNotFound, ErrNotDir (parent), ErrIsDir (name is a directory:
// use Rmdir), ErrInvalid and ErrNameTooLong (bad name).
func (m *Meta) Unlink(ctx context.Context, parent LIN, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	// body unlinks; it reports the LIN to purge after the commit (0: none).
	body := func(o *op, mode opMode) (LIN, error) {
		o.withUsage()
		k := keyEntry(parent, name)
		vals, err := o.loadDirs([]LIN{parent}, nil, k)
		if err != nil {
			return 0, err
		}
		if mode == deferLocal && !o.mine(parent) {
			return 0, errNotMine
		}
		if _, err := o.dir(parent); err != nil {
			return 0, err
		}
		typ, child, ok, err := entryOf(k, vals[0])
		if err != nil {
			return 0, err
		}
		switch {
		case !ok:
			return 0, fmt.Errorf("%w: %q in directory LIN %d", ErrNotFound, name, parent)
		case typ == TypeDir:
			return 0, fmt.Errorf("%w: %q in directory LIN %d: use rmdir", ErrIsDir, name, parent)
		}
		// Its attribute changes are not deferred past its unlink (whose
		// replay may purge it).
		o.m.wb.forget(child)
		n, _, err := o.inodeOpen(child)
		if err != nil {
			return 0, err
		}
		o.del(k)
		o.touchDir(parent)
		if !n.removeLink(parent, name) {
			return 0, fmt.Errorf("%w: LIN %d has no back-pointer for %q in LIN %d", ErrCorrupt, child, name, parent)
		}
		n.nlink--
		o.change(n)
		if mode == synchronous {
			o.acquire(parent)
		}
		if n.nlink > 0 {
			return 0, nil
		}
		if purge, err := o.release(n); err != nil || !purge {
			return 0, err
		}
		if mode == deferLocal {
			return 0, errNotMine // a large file: unlink it synchronously, then purge
		}
		return n.lin, nil
	}
	// A replay that finds the file grown large leaves it an orphan for
	// the collect job to purge.
	if m.deferIn(ctx, parent, func(o *op, mode opMode) error { _, err := body(o, mode); return err }) {
		return nil
	}
	var later LIN
	err := m.update(ctx, func(o *op) error {
		var err error
		later, err = body(o, synchronous)
		return err
	})
	if err == nil && later != 0 {
		// The unlink is committed; an interrupted cleanup stays an orphan
		// that Purge (or the collect job) finishes.
		_ = m.purge(ctx, later)
	}
	return err
}

// Rmdir removes the empty directory name from parent.
//
// Errors: ErrNotFound, ErrNotDir (parent, or name is not a directory),
// ErrNotEmpty, ErrInvalid and ErrNameTooLong (bad name; "." and ".." are
// refused).
func (m *Meta) Rmdir(ctx context.Context, parent LIN, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	var later LIN
	err := m.update(ctx, func(o *op) error {
		later = 0
		o.withUsage()
		k := keyEntry(parent, name)
		vals, err := o.loadDirs([]LIN{parent}, nil, k)
		if err != nil {
			return err
		}
		p, err := o.dir(parent)
		if err != nil {
			return err
		}
		typ, child, ok, err := entryOf(k, vals[0])
		if err != nil {
			return err
		}
		switch {
		case !ok:
			return fmt.Errorf("%w: %q in directory LIN %d", ErrNotFound, name, parent)
		case typ != TypeDir:
			return fmt.Errorf("%w: %q in directory LIN %d is a %s", ErrNotDir, name, parent, typ)
		}
		o.m.wb.forget(child)
		n, err := o.dir(child)
		if err != nil {
			return err
		}
		if err := o.checkEmpty(n); err != nil {
			return err
		}
		o.del(k)
		o.touchDir(parent)
		p.nlink--
		o.change(p)
		n.removeLink(parent, name)
		n.nlink = 0
		if purge, err := o.destroy(n); err != nil || !purge {
			return err
		}
		later = n.lin
		return nil
	})
	if err == nil && later != 0 {
		_ = m.purge(ctx, later)
	}
	return err
}

// checkEmpty returns ErrNotEmpty unless directory n has no entries (and
// fails if another client holds n's delegation: it may have entries there
// not committed yet).
func (o *op) checkEmpty(n *inode) error {
	b, err := o.tx.Get(keyDeleg(n.lin))
	if err != nil {
		return err
	}
	if err := o.checkDeleg(n.lin, b); err != nil {
		return err
	}
	start, end := entriesRange(n.lin)
	kvs, _, err := o.tx.Scan(start, end, 1)
	if err != nil {
		return err
	}
	if len(kvs) > 0 {
		return fmt.Errorf("%w: directory LIN %d has entries (first %q)", ErrNotEmpty, n.lin, kvs[0].Key[9:])
	}
	return nil
}

// release handles n after its last link went: if open, it becomes an orphan
// until the last Release; otherwise destroy. It reports whether a purge
// must follow the commit.
func (o *op) release(n *inode) (bool, error) {
	open, err := o.isOpen(n.lin)
	if err != nil {
		return false, err
	}
	if open {
		o.mark(n)
		o.put(keyOrphan(n.lin), encodeOrphan(o.now))
		return false, nil
	}
	return o.destroy(n)
}

func (o *op) isOpen(lin LIN) (bool, error) {
	if open, ok := o.opens[lin]; ok {
		return open, nil
	}
	start, end := opensRange(lin)
	kvs, _, err := o.tx.Scan(start, end, 1)
	return len(kvs) > 0, err
}

// inodeOpen reads inode lin and whether it is open with one range read (the
// open records follow the inode's key). ErrNotFound if absent. Open records
// written later in the same op are not reflected.
func (o *op) inodeOpen(lin LIN) (*inode, bool, error) {
	if _, cached := o.inodes[lin]; cached {
		n, err := o.inode(lin)
		if err != nil {
			return nil, false, err
		}
		open, err := o.isOpen(lin)
		return n, open, err
	}
	start, end := opensRange(lin)
	kvs, _, err := o.tx.Scan(keyInode(lin), end, 3) // inode, times, first open
	if err != nil {
		return nil, false, err
	}
	var ib []byte
	open := false
	for _, p := range kvs {
		switch {
		case len(p.Key) == 9:
			ib = p.Value
		case bytes.HasPrefix(p.Key, start):
			open = true
		}
	}
	if err := o.cache(lin, ib); err != nil {
		return nil, false, err
	}
	if o.opens == nil {
		o.opens = map[LIN]bool{}
	}
	o.opens[lin] = open
	n, err := o.inode(lin)
	return n, open, err
}

// destroy deletes n (no links, not open) with its stripes and xattrs if they
// fit in this transaction; else it records n as an orphan and reports that a
// purge must follow.
func (o *op) destroy(n *inode) (bool, error) {
	small := o.writes+len(n.xattrs)+8 <= o.m.budget/2
	if small && (n.stripeSize > 0 || n.allocated > 0) {
		finished, err := o.deleteStripes(n, 0)
		if err != nil {
			return false, err
		}
		small = finished
	}
	if !small {
		o.mark(n)
		o.put(keyOrphan(n.lin), encodeOrphan(o.now))
		return true, nil
	}
	for _, x := range n.xattrs {
		o.del(keyXattr(n.lin, x))
	}
	o.dropInode(n)
	return false, nil
}

// Purge finishes deleting inode lin, which has no links left: stripes (their
// blocks to the delete queue), xattrs, then the inode and its orphan record,
// in as many transactions as needed. Each transaction leaves a consistent
// namespace, so an interrupted Purge is resumed by calling it again; it is
// idempotent (nil for an inode already gone).
//
// Errors: ErrBusy (still open), ErrInvalid (lin still has links).
func (m *Meta) Purge(ctx context.Context, lin LIN) error { return m.purge(ctx, lin) }

func (m *Meta) purge(ctx context.Context, lin LIN) error {
	for {
		done := false
		err := m.update(ctx, func(o *op) error {
			done = false
			o.withUsage()
			if _, err := o.load([]LIN{lin}); err != nil {
				return err
			}
			n := o.inodes[lin]
			if n == nil {
				done = true
				return nil
			}
			if n.nlink > 0 {
				return fmt.Errorf("%w: LIN %d still has %d links: unlink it instead", ErrInvalid, lin, n.nlink)
			}
			if open, err := o.isOpen(lin); err != nil || open {
				if open {
					err = fmt.Errorf("%w: LIN %d will be deleted at its last close", ErrBusy, lin)
				}
				return err
			}
			finished, err := o.deleteStripes(n, 0)
			if err != nil || !finished {
				return err
			}
			for len(n.xattrs) > 0 && o.writes < o.m.budget {
				o.del(keyXattr(lin, n.xattrs[0]))
				n.xattrs = n.xattrs[1:]
				o.mark(n)
			}
			if len(n.xattrs) > 0 {
				return nil
			}
			o.dropInode(n)
			done = true
			return nil
		})
		if err != nil || done {
			return err
		}
	}
}

// ListOrphans returns up to limit orphans with LIN > after, in LIN order:
// inodes without links that are open or whose cleanup was interrupted.
// A collect job calls Purge on those no session holds open.
func (m *Meta) ListOrphans(ctx context.Context, after LIN, limit int) ([]Orphan, error) {
	var out []Orphan
	err := m.view(ctx, func(o *op) error {
		out = nil
		kvs, _, err := o.tx.Scan(keyOrphan(after+1), []byte{pfxOrphan + 1}, limit)
		if err != nil {
			return err
		}
		for _, p := range kvs {
			orph, err := decodeOrphan(p.Key, p.Value)
			if err != nil {
				return err
			}
			out = append(out, orph)
		}
		return nil
	})
	return out, err
}

// Open records that session has lin open, so that unlinking its last link
// defers the delete until Release. The caller counts its own handles: one
// Open per (session, inode) is enough and a repeated Open is a no-op.
// Directories need no Open: Rmdir does not wait for their openers.
// Errors: ErrNotFound (no such inode, or it is unlinked and no session
// holds it open).
func (m *Meta) Open(ctx context.Context, session SessionID, lin LIN) error {
	return m.update(ctx, func(o *op) error {
		n, err := o.inode(lin)
		if err != nil {
			return err
		}
		if n.nlink == 0 {
			if open, err := o.isOpen(lin); err != nil || !open {
				if err == nil {
					err = fmt.Errorf("%w: LIN %d has been unlinked", ErrNotFound, lin)
				}
				return err
			}
		}
		o.put(keyOpen(lin, session), encodeOpen(o.now))
		o.put(keySessionOpen(session, lin), encodeOpen(o.now))
		return nil
	})
}

// OpenSessions returns the sessions that have lin open (Open, not yet
// Release), in order: what keeps an unlinked inode's data. An inode
// nobody has open, or that does not exist, has none.
func (m *Meta) OpenSessions(ctx context.Context, lin LIN) ([]SessionID, error) {
	var out []SessionID
	err := m.view(ctx, func(o *op) error {
		out = out[:0]
		start, end := opensRange(lin)
		for start != nil {
			kvs, next, err := o.tx.Scan(start, end, 256)
			if err != nil {
				return err
			}
			for _, p := range kvs {
				out = append(out, SessionID(binary.BigEndian.Uint64(p.Key[len(p.Key)-8:])))
			}
			start = next
		}
		return nil
	})
	return out, err
}

// Release ends session's open of lin. If lin has no links left and no
// other session has it open, it is deleted (see Unlink). Releasing what is
// not open is a no-op.
func (m *Meta) Release(ctx context.Context, session SessionID, lin LIN) error {
	var later bool
	err := m.update(ctx, func(o *op) error {
		later = false
		o.del(keyOpen(lin, session))
		o.del(keySessionOpen(session, lin))
		// One range read: the inode and the other sessions' opens (this
		// session's is deleted above, so the scan no longer sees it).
		n, open, err := o.inodeOpen(lin)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		case n.nlink > 0 || open:
			return nil
		}
		later, err = o.destroy(n)
		return err
	})
	if err == nil && later {
		_ = m.purge(ctx, lin)
	}
	return err
}

// CloseSession releases every inode session has open, for a client that
// ended or died. It is idempotent and resumable.
func (m *Meta) CloseSession(ctx context.Context, session SessionID) error {
	for {
		var lins []LIN
		err := m.view(ctx, func(o *op) error {
			start, end := sessionRange(session)
			kvs, _, err := o.tx.Scan(start, end, 256)
			lins = lins[:0]
			for _, p := range kvs {
				lins = append(lins, linAt(p.Key, 9))
			}
			return err
		})
		if err != nil {
			return err
		}
		if len(lins) == 0 {
			return nil
		}
		for _, lin := range lins {
			if err := m.Release(ctx, session, lin); err != nil {
				return err
			}
		}
	}
}
