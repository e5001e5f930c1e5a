package meta

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/weftfs/weft/internal/kv"
)

// op is one attempt of one metadata transaction: it caches the inodes it
// read (so an inode loaded twice is one object), collects changes, and
// writes them at flush. Every operation of Meta is written as a function of
// an op; the kv store retries the whole function on conflict.
type op struct {
	m     *Meta
	tx    kv.Tx
	write bool
	now   int64

	inodes  map[LIN]*inode // loaded; nil: known absent
	opens   map[LIN]bool   // whether a session has the inode open, as read
	dirty   map[LIN]bool   // to write at flush
	changed map[LIN]bool   // changed (ctime set): see checkCovered
	dropped map[LIN]bool   // deleted in this op
	touched map[LIN]bool   // directories whose times to set at flush
	writes  int            // kv writes issued so far, for chunked work

	pre map[string][]byte // keys read ahead by prefetch (fsck), nil values absent

	delegs   map[LIN]*delegation // delegation records read by loadDirs (nil: none)
	acquired []LIN               // delegations taken by this op

	shard       int
	wantShard   bool // load the usage shard with the first load
	shardLoaded bool
	shardVal    usageShard
	usage       usageShard // deltas to add at flush
}

// update runs fn in a read-write transaction and flushes its changes. With
// write-back, the changes this client deferred are committed first, so
// that its operations commit in the order they were acknowledged; a
// directory delegated to another client is recalled and fn runs again.
func (m *Meta) update(ctx context.Context, fn func(o *op) error) error {
	if m.wb != nil {
		if err := m.wb.d.Flush(ctx); err != nil {
			m.noteLost(err)
		}
	}
	// The store's errors leave meta classed (storeErr), as in view.
	return storeErr(m.retryDelegated(ctx, func() error {
		var last *op
		err := m.store.Update(ctx, func(tx kv.Tx) error {
			o := m.newOp(tx, true)
			last = o
			if err := fn(o); err != nil {
				return err
			}
			return o.flush()
		})
		if err == nil && m.wb != nil {
			m.wb.taken(last.acquired)
		}
		return err
	}))
}

// view runs fn on a snapshot (recalling another client's delegation of a
// directory it reads entries of).
func (m *Meta) view(ctx context.Context, fn func(o *op) error) error {
	return storeErr(m.retryDelegated(ctx, func() error {
		return m.store.View(ctx, func(tx kv.Tx) error { return fn(m.newOp(tx, false)) })
	}))
}

func (m *Meta) newOp(tx kv.Tx, write bool) *op {
	o := &op{m: m, tx: tx, write: write, now: m.now().UnixNano(), inodes: map[LIN]*inode{}}
	if write {
		o.shard = m.shard()
	}
	return o
}

// withUsage makes the next load fetch the usage shard too: call it first in
// operations that change usage, to save a round trip at flush.
func (o *op) withUsage() { o.wantShard = true }

// load reads the inodes of lins (into the cache) and the extra keys in one
// round trip, together with the usage shard in a read-write op. It returns
// the extra keys' values. Absent inodes are cached as absent, not errors.
func (o *op) load(lins []LIN, extra ...[]byte) ([][]byte, error) {
	var keys [][]byte
	var want []LIN
	for _, l := range lins {
		if _, ok := o.inodes[l]; !ok && !slices.Contains(want, l) {
			want = append(want, l)
			keys = append(keys, keyInode(l))
		}
	}
	keys = append(keys, extra...)
	loadShard := o.wantShard && !o.shardLoaded
	if loadShard {
		keys = append(keys, keyUsage(o.shard))
	}
	if len(keys) == 0 {
		return nil, nil
	}
	vals, err := o.tx.GetMany(keys...)
	if err != nil {
		return nil, err
	}
	for i, l := range want {
		if err := o.cache(l, vals[i]); err != nil {
			return nil, err
		}
	}
	if loadShard {
		if err := o.setShard(vals[len(vals)-1]); err != nil {
			return nil, err
		}
		vals = vals[:len(vals)-1]
	}
	return vals[len(want):], nil
}

func (o *op) cache(lin LIN, b []byte) error {
	if b == nil {
		o.inodes[lin] = nil
		return nil
	}
	n, err := decodeInode(lin, b)
	if err != nil {
		return err
	}
	o.inodes[lin] = n
	return nil
}

func (o *op) setShard(b []byte) error {
	u, err := decodeUsage(keyUsage(o.shard), b)
	if err != nil {
		return err
	}
	o.shardVal, o.shardLoaded = u, true
	return nil
}

// inode returns the inode lin, reading it if not cached; ErrNotFound if absent.
func (o *op) inode(lin LIN) (*inode, error) {
	n, ok := o.inodes[lin]
	if !ok {
		b, err := o.tx.Get(keyInode(lin))
		if err != nil {
			return nil, err
		}
		if err := o.cache(lin, b); err != nil {
			return nil, err
		}
		n = o.inodes[lin]
	}
	if n == nil {
		return nil, fmt.Errorf("%w: LIN %d", ErrNotFound, lin)
	}
	return n, nil
}

// dir returns the directory lin: ErrNotFound, or ErrNotDir for another type.
func (o *op) dir(lin LIN) (*inode, error) {
	n, err := o.inode(lin)
	if err != nil {
		return nil, err
	}
	if n.typ != TypeDir {
		return nil, fmt.Errorf("%w: LIN %d is a %s", ErrNotDir, lin, n.typ)
	}
	if n.nlink == 0 {
		return nil, fmt.Errorf("%w: directory LIN %d was removed", ErrNotFound, lin)
	}
	return n, nil
}

// entry decodes an entry value read by load; ok is false if absent.
func entryOf(key, b []byte) (typ FileType, lin LIN, ok bool, err error) {
	if b == nil {
		return 0, 0, false, nil
	}
	typ, lin, err = decodeEntry(key, b)
	return typ, lin, err == nil, err
}

// change marks n to be written at flush, with ctime now.
func (o *op) change(n *inode) {
	n.ctime = o.now
	if o.changed == nil {
		o.changed = map[LIN]bool{}
	}
	o.changed[n.lin] = true
	o.mark(n)
}

// mark marks n to be written at flush, times untouched.
func (o *op) mark(n *inode) {
	if o.dirty == nil {
		o.dirty = map[LIN]bool{}
	}
	o.dirty[n.lin] = true
}

// touchDir sets directory lin's mtime and ctime to now at flush, with a
// blind write: entry changes in one directory do not conflict on its times.
func (o *op) touchDir(lin LIN) {
	if o.touched == nil {
		o.touched = map[LIN]bool{}
	}
	o.touched[lin] = true
}

// addUsage adds d to pool's usage at flush.
func (o *op) addUsage(pool string, d Usage) {
	if d == (Usage{}) {
		return
	}
	if o.usage == nil {
		o.usage = usageShard{}
	}
	u := o.usage[pool]
	u.add(d)
	o.usage[pool] = u
}

// put and del write through the transaction and count the writes.
func (o *op) put(k, v []byte) { o.tx.Put(k, v); o.writes++ }
func (o *op) del(k []byte)    { o.tx.Delete(k); o.writes++ }

// dropInode deletes n's inode record, directory times and orphan record and
// takes it out of usage. The caller has removed its stripes and xattrs.
func (o *op) dropInode(n *inode) {
	o.del(keyInode(n.lin))
	if n.typ == TypeDir {
		o.del(keyDirTimes(n.lin))
		o.del(keyDeleg(n.lin))
	}
	o.del(keyOrphan(n.lin))
	d := Usage{Inodes: -1, Allocated: -int64(n.allocated)}
	if n.typ == TypeFile {
		d.Bytes = -int64(n.size)
	}
	o.addUsage(n.pool, d)
	if o.dropped == nil {
		o.dropped = map[LIN]bool{}
	}
	o.dropped[n.lin] = true
	delete(o.dirty, n.lin)
	delete(o.touched, n.lin)
}

// flush writes dirty inodes (bumping their generation), directory times and
// the usage shard.
func (o *op) flush() error {
	if err := o.checkCovered(); err != nil {
		return err
	}
	for lin := range o.dirty {
		n := o.inodes[lin]
		n.gen++
		o.put(keyInode(lin), encodeInode(n))
	}
	for lin := range o.touched {
		o.put(keyDirTimes(lin), encodeDirTimes(dirTimes{mtime: o.now, ctime: o.now}))
	}
	if len(o.usage) == 0 {
		return nil
	}
	if !o.shardLoaded {
		b, err := o.tx.Get(keyUsage(o.shard))
		if err != nil {
			return err
		}
		if err := o.setShard(b); err != nil {
			return err
		}
	}
	for p, d := range o.usage {
		u := o.shardVal[p]
		u.add(d)
		if u == (Usage{}) {
			delete(o.shardVal, p)
		} else {
			o.shardVal[p] = u
		}
	}
	if len(o.shardVal) == 0 {
		o.del(keyUsage(o.shard))
	} else {
		o.put(keyUsage(o.shard), encodeUsage(o.shardVal))
	}
	return nil
}

// attr returns n's attributes; times, if not nil, are a directory's blind
// times, which win over the inode's own mtime and raise its ctime.
func (n *inode) attr(times *dirTimes) Attr {
	a := Attr{
		LIN: n.lin, Type: n.typ, Mode: n.mode, UID: n.uid, GID: n.gid, Size: n.size,
		Nlink: n.nlink, Rdev: n.rdev, Generation: n.gen, Pool: n.pool, Protection: n.prot,
		StripeSize: n.stripeSize, Allocated: n.allocated,
	}
	mtime, ctime := n.mtime, n.ctime
	if times != nil {
		mtime = times.mtime
		ctime = max(ctime, times.ctime)
	}
	a.Atime, a.Mtime, a.Ctime, a.Btime = time.Unix(0, n.atime), time.Unix(0, mtime), time.Unix(0, ctime), time.Unix(0, n.btime)
	for _, r := range n.wdl {
		a.WDL = append(a.WDL, r.drive)
	}
	return a
}

func (n *inode) full(times *dirTimes) Inode {
	return Inode{Attr: n.attr(times), Links: slices.Clone(n.links), Target: n.target, Xattrs: slices.Clone(n.xattrs)}
}

// removeLink removes the back-pointer (parent, name); it reports whether it
// was there.
func (n *inode) removeLink(parent LIN, name string) bool {
	for i, l := range n.links {
		if l.Parent == parent && l.Name == name {
			n.links = slices.Delete(n.links, i, i+1)
			return true
		}
	}
	return false
}

// addDrives adds (delta > 0) or removes units on drives to the WDL refcounts.
func (n *inode) addDrives(units []Unit, delta int) {
	for _, u := range units {
		if !u.Placed() {
			continue
		}
		i, found := slices.BinarySearchFunc(n.wdl, u.Drive, func(r driveRef, d DriveID) int { return int(r.drive) - int(d) })
		switch {
		case found:
			r := int(n.wdl[i].refs) + delta
			if r <= 0 {
				n.wdl = slices.Delete(n.wdl, i, i+1)
			} else {
				n.wdl[i].refs = uint32(r)
			}
		case delta > 0:
			n.wdl = slices.Insert(n.wdl, i, driveRef{drive: u.Drive, refs: uint32(delta)})
		}
	}
}
