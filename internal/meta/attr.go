package meta

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// loadAttr reads inode lin and its directory times in one round trip. In a
// view it scans the two adjacent keys (one range read, the cheapest request
// a backend serves) unless the store is a cache (which keeps keys, not
// ranges); in an update it reads them with the usage shard.
func (o *op) loadAttr(lin LIN) (*inode, *dirTimes, error) {
	var tb []byte
	if _, cached := o.inodes[lin]; !o.write && !cached && !o.m.cached {
		kvs, _, err := o.tx.Scan(keyInode(lin), keyInodeEnd(lin), 2)
		if err != nil {
			return nil, nil, err
		}
		var ib []byte
		for _, p := range kvs {
			if len(p.Key) == 9 {
				ib = p.Value
			} else if len(p.Key) == 10 && p.Key[9] == dirTimesSuffix {
				tb = p.Value
			}
		}
		if err := o.cache(lin, ib); err != nil {
			return nil, nil, err
		}
	} else {
		vals, err := o.load([]LIN{lin}, keyDirTimes(lin))
		if err != nil {
			return nil, nil, err
		}
		tb = vals[0]
	}
	n, err := o.inode(lin)
	if err != nil {
		return nil, nil, err
	}
	if tb == nil {
		return n, nil, nil
	}
	t, err := decodeDirTimes(lin, tb)
	return n, &t, err
}

// GetAttr returns the attributes of lin, or ErrNotFound. An unlinked inode
// that is still open has Nlink 0. One round trip.
func (m *Meta) GetAttr(ctx context.Context, lin LIN) (Attr, error) {
	var a Attr
	err := m.view(ctx, func(o *op) error {
		n, t, err := o.loadAttr(lin)
		if err != nil {
			return err
		}
		a = n.attr(t)
		return nil
	})
	return a, err
}

// GetInode returns lin with its back-pointers, xattr names and symlink
// target, or ErrNotFound.
func (m *Meta) GetInode(ctx context.Context, lin LIN) (Inode, error) {
	var in Inode
	err := m.view(ctx, func(o *op) error {
		n, t, err := o.loadAttr(lin)
		if err != nil {
			return err
		}
		in = n.full(t)
		return nil
	})
	return in, err
}

// Lookup returns the attributes of the inode that name names in directory
// parent. "." is parent itself and ".." its parent (the root's is the root).
// Errors: ErrNotFound (no such entry or parent), ErrNotDir (parent is not a
// directory), ErrInvalid and ErrNameTooLong (bad name).
func (m *Meta) Lookup(ctx context.Context, parent LIN, name string) (Attr, error) {
	if name != "." && name != ".." {
		if err := ValidName(name); err != nil {
			return Attr{}, err
		}
	}
	var a Attr
	err := m.view(ctx, func(o *op) error {
		var child LIN
		switch name {
		case ".", "..":
			p, err := o.dir(parent)
			if err != nil {
				return err
			}
			child = parent
			if name == ".." && parent != RootLIN {
				if len(p.links) == 0 {
					return fmt.Errorf("%w: directory LIN %d has no back-pointer", ErrCorrupt, parent)
				}
				child = p.links[0].Parent
			}
		default:
			// The entry and the parent in one round trip: a missing name
			// needs the parent to tell ErrNotFound from ErrNotDir.
			k := keyEntry(parent, name)
			vals, err := o.loadDirs([]LIN{parent}, nil, k)
			if err != nil {
				return err
			}
			_, lin, ok, err := entryOf(k, vals[0])
			if err != nil {
				return err
			}
			if !ok {
				if _, err := o.dir(parent); err != nil {
					return err
				}
				return fmt.Errorf("%w: %q in directory LIN %d", ErrNotFound, name, parent)
			}
			child = lin
		}
		n, t, err := o.loadAttr(child)
		if err != nil {
			return err
		}
		a = n.attr(t)
		return nil
	})
	return a, err
}

// Readlink returns a symlink's target. Errors: ErrNotFound, ErrInvalid (not a
// symlink).
func (m *Meta) Readlink(ctx context.Context, lin LIN) (string, error) {
	var target string
	err := m.view(ctx, func(o *op) error {
		n, err := o.inode(lin)
		if err != nil {
			return err
		}
		if n.typ != TypeSymlink {
			return fmt.Errorf("%w: LIN %d is a %s, not a symlink", ErrInvalid, lin, n.typ)
		}
		target = n.target
		return nil
	})
	return target, err
}

// SetAttrMask selects the fields SetAttr changes.
type SetAttrMask uint32

// SetAttr fields.
const (
	SetMode SetAttrMask = 1 << iota
	SetUID
	SetGID
	SetSize
	SetAtime
	SetMtime
	// SetAtimeNow and SetMtimeNow set the time to now (ignoring Attr).
	SetAtimeNow
	SetMtimeNow
	// SetCtime sets ctime to Attr.Ctime instead of now.
	SetCtime
	SetPool
	SetProtection
)

// SetAttr changes the fields of lin selected by mask to those in a, sets
// ctime to now (unless SetCtime), and returns the new attributes.
//
// Mode keeps only the 07777 bits. Size applies to regular files only
// (ErrIsDir for a directory, ErrInvalid otherwise). Shrinking a file drops
// the stripes past the new size, their blocks go to the delete queue, and
// the stripe holding the new end gets a shorter DataLen (readers see zeros
// past it). A file with more stripes than fit in one transaction is trimmed
// in several, from the lowest dropped stripe up; concurrent readers may see
// the tail as holes before the size shrinks. The last transaction applies
// all the fields at once. Pool moves the inode's usage to the new pool.
func (m *Meta) SetAttr(ctx context.Context, lin LIN, mask SetAttrMask, a Attr) (Attr, error) {
	if mask&SetPool != 0 {
		if err := ValidPoolName(a.Pool); err != nil {
			return Attr{}, err
		}
	}
	if mask&SetProtection != 0 {
		if err := a.Protection.Validate(); err != nil {
			return Attr{}, err
		}
	}
	if a, ok := m.deferAttr(ctx, lin, mask, a); ok {
		return a, nil
	}
	for {
		var res *inode
		var resTimes *dirTimes
		err := m.update(ctx, func(o *op) error {
			res = nil
			o.withUsage()
			n, t, err := o.loadAttr(lin)
			if err != nil {
				return err
			}
			if mask&SetSize != 0 {
				switch {
				case n.typ == TypeDir:
					return fmt.Errorf("%w: cannot set the size of directory LIN %d", ErrIsDir, lin)
				case n.typ != TypeFile:
					return fmt.Errorf("%w: cannot set the size of %s LIN %d", ErrInvalid, n.typ, lin)
				}
				if a.Size < n.size && n.stripeSize > 0 {
					finished, err := o.trimStripes(n, a.Size)
					if err != nil || !finished {
						return err
					}
				}
			}
			res, resTimes = n, o.applyAttr(n, t, mask, a)
			return nil
		})
		if err != nil {
			return Attr{}, err
		}
		if res != nil { // else one chunk of a long truncate committed: go on
			return res.attr(resTimes), nil
		}
	}
}

// SetAtimes sets the access time of each LIN in times that still exists
// to its time, where that is later than the atime it has;
// ctime stays (an access is not a change), and LINs gone are skipped. The
// LINs go in as few transactions as the budget allows. It is how reads
// record access times in the background (vfs: atimes).
func (m *Meta) SetAtimes(ctx context.Context, times map[LIN]time.Time) error {
	lins := slices.Sorted(maps.Keys(times))
	for len(lins) > 0 {
		chunk := lins[:min(len(lins), max(1, m.budget/2))]
		lins = lins[len(chunk):]
		err := m.update(ctx, func(o *op) error {
			if _, err := o.load(chunk); err != nil {
				return err
			}
			for _, lin := range chunk {
				if n := o.inodes[lin]; n != nil && times[lin].UnixNano() > n.atime {
					n.atime = times[lin].UnixNano()
					o.mark(n)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// deferrableAttrs are the fields whose change SetAttr may defer: those of
// the inode alone (no stripes, usage or pool).
const deferrableAttrs = SetMode | SetUID | SetGID | SetAtime | SetMtime | SetAtimeNow | SetMtimeNow | SetCtime

// deferAttr defers SetAttr of lin when only this client can reach it
// (deferOn: a file it created by a deferred create, or a directory it made,
// in a directory whose delegation it still holds) and mask selects deferrableAttrs only: the
// change is decided on the cache and committed with the create, as the
// chown, chmod and utimes that follow each file of an untar are. It
// returns the new attributes and true if it deferred the change.
func (m *Meta) deferAttr(ctx context.Context, lin LIN, mask SetAttrMask, a Attr) (Attr, bool) {
	if mask&^deferrableAttrs != 0 {
		return Attr{}, false
	}
	var res *inode
	var resTimes *dirTimes
	ok := m.deferOn(ctx, lin, func(o *op, mode opMode) error {
		n, t, err := o.loadAttr(lin) // a directory's times too
		if err != nil {
			return err
		}
		t = o.applyAttr(n, t, mask, a)
		if mode == deferLocal {
			res, resTimes = n, t
		}
		return nil
	})
	if !ok {
		return Attr{}, false
	}
	return res.attr(resTimes), true
}

// applyAttr sets the fields in mask on n and returns n's new directory
// times (for a directory whose mtime is set).
func (o *op) applyAttr(n *inode, t *dirTimes, mask SetAttrMask, a Attr) *dirTimes {
	if mask&SetMode != 0 {
		n.mode = a.Mode & 0o7777
	}
	if mask&SetUID != 0 {
		n.uid = a.UID
	}
	if mask&SetGID != 0 {
		n.gid = a.GID
	}
	if mask&SetSize != 0 && a.Size != n.size {
		o.addUsage(n.pool, Usage{Bytes: int64(a.Size) - int64(n.size)})
		n.size = a.Size
		n.mtime = o.now
	}
	switch {
	case mask&SetAtimeNow != 0:
		n.atime = o.now
	case mask&SetAtime != 0:
		n.atime = a.Atime.UnixNano()
	}
	mtimeSet := true
	switch {
	case mask&SetMtimeNow != 0:
		n.mtime = o.now
	case mask&SetMtime != 0:
		n.mtime = a.Mtime.UnixNano()
	default:
		mtimeSet = false
	}
	if mask&SetPool != 0 && a.Pool != n.pool {
		d := Usage{Inodes: 1, Allocated: int64(n.allocated)}
		if n.typ == TypeFile {
			d.Bytes = int64(n.size)
		}
		o.addUsage(n.pool, Usage{Inodes: -d.Inodes, Bytes: -d.Bytes, Allocated: -d.Allocated})
		o.addUsage(a.Pool, d)
		n.pool = a.Pool
	}
	if mask&SetProtection != 0 {
		n.prot = a.Protection
	}
	o.change(n)
	if mask&SetCtime != 0 {
		n.ctime = a.Ctime.UnixNano()
	}
	if n.typ == TypeDir && mtimeSet {
		// A directory's mtime lives in its blind times record: set it there.
		t = &dirTimes{mtime: n.mtime, ctime: n.ctime}
		o.put(keyDirTimes(n.lin), encodeDirTimes(*t))
	}
	return t
}

// trimStripes deletes the stripes of n past size, as many as fit in this
// transaction's budget, and reports whether none are left; when none are,
// it also shortens the stripe holding the new end of file.
func (o *op) trimStripes(n *inode, size uint64) (bool, error) {
	first := (size + n.stripeSize - 1) / n.stripeSize
	finished, err := o.deleteStripes(n, first)
	if err != nil || !finished {
		return finished, err
	}
	if first == 0 || size%n.stripeSize == 0 {
		return true, nil
	}
	last := first - 1
	k := keyStripe(n.lin, last)
	b, err := o.tx.Get(k)
	if err != nil || b == nil {
		return true, err
	}
	s, err := decodeStripe(k, b)
	if err != nil {
		return false, err
	}
	if keep := size - last*n.stripeSize; s.DataLen > keep {
		s.DataLen = keep
		if s.IsInline() {
			s.Inline = s.Inline[:keep]
		}
		s.Gen++
		o.put(k, encodeStripe(&s))
	}
	return true, nil
}

// deleteStripes deletes n's stripes from index first on, sending their
// blocks to the delete queue, within the op's budget. It reports whether no
// stripe from first on is left.
func (o *op) deleteStripes(n *inode, first uint64) (bool, error) {
	return o.deleteStripeRange(n, keyStripe(n.lin, first), stripesEnd(n.lin))
}

// deleteStripeRange deletes n's stripes with keys in [start, end), as
// deleteStripes does.
func (o *op) deleteStripeRange(n *inode, start, end []byte) (bool, error) {
	// Every stripe scanned joins the read set, which is bounded like writes.
	perScan := max(1, min(16, o.m.budget/4))
	kvs, next, err := o.tx.Scan(start, end, perScan)
	if err != nil {
		return false, err
	}
	for i, p := range kvs {
		s, err := decodeStripe(p.Key, p.Value)
		if err != nil {
			return false, err
		}
		if i > 0 && o.writes+3+len(s.Units) > o.m.budget {
			o.mark(n) // the stripes deleted so far changed its WDL and Allocated
			return false, nil
		}
		o.deleteStripe(n, s)
	}
	if len(kvs) > 0 {
		o.mark(n)
	}
	return next == nil, nil
}

// deleteStripe deletes stripe s of n, its protection-index and lost-data
// entries, and queues its placed blocks.
func (o *op) deleteStripe(n *inode, s Stripe) {
	o.del(keyStripe(n.lin, s.Index))
	o.del(keyUnder(n.lin, s.Index))
	o.del(keyLost(n.lin, s.Index))
	o.queueUnits(n.lin, s.Index, s.Units, nil)
	alloc := unitBytes(s.Units)
	n.allocated -= min(n.allocated, alloc)
	n.addDrives(s.Units, -1)
	o.addUsage(n.pool, Usage{Allocated: -int64(alloc)})
}

// queueUnits puts the placed units not in keep on the delete queue.
func (o *op) queueUnits(lin LIN, idx uint64, units []Unit, keep map[unitKey]bool) {
	for _, u := range units {
		if !u.Placed() || keep[unitKey{u.Drive, u.Block}] {
			continue
		}
		o.put(keyDelete(u.Drive, u.Block), encodeDelete(DeleteEntry{LIN: lin, Stripe: idx, Length: u.Length, Enqueued: time.Unix(0, o.now)}))
	}
}

type unitKey struct {
	drive DriveID
	block BlockID
}

func unitBytes(units []Unit) uint64 {
	var n uint64
	for _, u := range units {
		if u.Placed() {
			n += uint64(u.Length)
		}
	}
	return n
}
