package meta

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Bulk loading: many new inodes and entries per transaction, for test
// namespaces of millions of files (weft bench populate).
//
// A Bulk queues Create, Mkdir and Link calls and commits them in batches,
// one transaction per batch. A batch replays its calls in order over the
// records it read, through the same inode constructor (newInode) and the
// same encoders as Create and Link, so that the records written are those
// the same calls made one by one would write at the same clock: inodes
// with their back-pointers, link counts and generations (one bump per
// call that changes an inode, as each call's own transaction makes),
// entries, directory times, the parents' link counts and ctimes, and the
// per-pool usage counters. What differs: the usage deltas of a batch go
// to one shard (StatFS sums the shards), every call of a batch carries
// the batch's time, and a Bulk takes no directory delegations (a Meta
// without write-back takes none either).
//
// LINs come from the shared counter ("L") in reservations of
// BulkOptions.LINBatch, as clients take theirs, so that no client ever
// hands out a LIN a Bulk used.
//
// Cost: a batch reads, in one round trip, each parent it did not create
// itself (inode and delegation record), each entry it adds under such a
// parent (to refuse a taken name), each inode it links that it did not
// create, and one usage shard; it writes two keys per new inode (inode,
// entry), one per link, one per directory whose entries changed, one per
// older inode changed, and the usage shard. Batches are cut so that
// neither count passes the store's Limits.MaxOps.

// DefaultBulkBatch is the calls one Bulk transaction commits when
// BulkOptions.Batch is zero.
const DefaultBulkBatch = 256

// DefaultBulkLINBatch is the LINs a Bulk reserves at a time when
// BulkOptions.LINBatch is zero.
const DefaultBulkLINBatch = 1 << 16

// BulkOptions configure a Bulk.
type BulkOptions struct {
	// Batch is the most calls one transaction commits (fewer when the
	// store's Limits would be passed). Zero means DefaultBulkBatch.
	Batch int
	// LINBatch is how many LINs one reservation takes from the shared
	// counter. Zero means DefaultBulkLINBatch. LINs reserved and not
	// used are never used by anyone.
	LINBatch uint64
}

// BulkStats counts what a Bulk has committed.
type BulkStats struct {
	// Inodes is the inodes created: Dirs directories and Files of every
	// other type.
	Inodes, Dirs, Files int64
	// Links is the entries added to existing inodes (Link calls).
	Links int64
	// Transactions is the batches committed.
	Transactions int64
}

// Bulk writes many new inodes and entries per transaction; see the
// comment above for what it writes. Calls are queued and committed in
// batches: a call's error says what is wrong with the call itself (a bad
// name, a name already queued in the directory, a parent the Bulk knows
// is not a directory), and a batch's error — a name taken in the store, a
// parent gone, the store's — is returned by the call that committed it
// (or Flush) and by every call after it: the batch wrote nothing (after
// ErrUnavailable: it may have been written, as for any commit), earlier
// batches stay, and the Bulk is done.
//
// Locking: a Bulk is not safe for concurrent use.
type Bulk struct {
	m        *Meta
	batch    int
	linBatch uint64
	maxOps   int // per transaction, writes and reads alike; 0: no limit
	next     LIN // reserved LINs not yet used: [next, limit)
	limit    LIN
	err      error // sticky: the batch that failed
	stats    BulkStats

	ops     []bulkOp
	fresh   map[LIN]FileType // created by the queued calls
	names   map[Link]bool    // entries added by the queued calls
	dirs    map[LIN]bool     // parents the batch did not create: it reads them
	linked  map[LIN]bool     // linked inodes it did not create: it reads them
	rewrite map[LIN]bool     // inodes it did not create and changes
	touched map[LIN]bool     // directories whose times it writes
	writes  int              // the batch's writes, as counted for maxOps
	reads   int              // its reads (keys read)
}

// bulkOp is one queued call: a Create (ni set) or a Link.
type bulkOp struct {
	link   bool
	parent LIN
	name   string
	lin    LIN
	ni     NewInode
	caller Caller
}

// NewBulk returns a Bulk over m's store. It reserves no LINs until the
// first call.
func (m *Meta) NewBulk(o BulkOptions) *Bulk {
	if o.Batch <= 0 {
		o.Batch = DefaultBulkBatch
	}
	if o.LINBatch == 0 {
		o.LINBatch = DefaultBulkLINBatch
	}
	b := &Bulk{m: m, batch: o.Batch, linBatch: o.LINBatch}
	if l := m.store.Limits().MaxOps; l > 0 {
		b.maxOps = l
	}
	b.reset()
	return b
}

func (b *Bulk) reset() {
	b.ops = b.ops[:0]
	b.fresh, b.names = map[LIN]FileType{}, map[Link]bool{}
	b.dirs, b.linked, b.rewrite, b.touched = map[LIN]bool{}, map[LIN]bool{}, map[LIN]bool{}, map[LIN]bool{}
	b.writes, b.reads = 1, 1 // the usage shard
}

// Create queues the creation of an inode named name in directory parent,
// owned by the Caller in ctx, as Meta.Create makes it, and returns its
// LIN. It commits the batch first when the batch is full (see Bulk for
// the errors). Errors of the call itself: ErrInvalid and ErrNameTooLong
// (bad name, type, target, pool, protection), ErrExists (the name is
// queued already), ErrNotDir (parent is a non-directory this Bulk made).
func (b *Bulk) Create(ctx context.Context, parent LIN, name string, ni NewInode) (LIN, error) {
	if b.err != nil {
		return 0, b.err
	}
	if ni.Type == 0 {
		ni.Type = TypeFile
	}
	if err := checkNew(name, ni); err != nil {
		return 0, err
	}
	if err := b.checkParent(parent, name); err != nil {
		return 0, err
	}
	op := bulkOp{parent: parent, name: name, ni: ni, caller: CallerFrom(ctx)}
	if err := b.room(ctx, op); err != nil {
		return 0, err
	}
	lin, err := b.allocLIN(ctx)
	if err != nil {
		return 0, err
	}
	op.lin = lin
	b.queue(op)
	return lin, nil
}

// Mkdir queues directory name in parent with mode; see Create.
func (b *Bulk) Mkdir(ctx context.Context, parent LIN, name string, mode uint32) (LIN, error) {
	return b.Create(ctx, parent, name, NewInode{Type: TypeDir, Mode: mode})
}

// Link queues entry name in directory parent for inode lin, as Meta.Link
// adds it. Errors of the call itself: ErrInvalid and ErrNameTooLong (bad
// name), ErrExists (the name is queued already), ErrNotPermitted (lin is
// a directory this Bulk made), ErrNotDir (parent is a non-directory this
// Bulk made); the batch refuses what Meta.Link refuses of inodes it did
// not make.
func (b *Bulk) Link(ctx context.Context, lin, parent LIN, name string) error {
	if b.err != nil {
		return b.err
	}
	if err := ValidName(name); err != nil {
		return err
	}
	if t, ok := b.fresh[lin]; ok && t == TypeDir {
		return fmt.Errorf("%w: LIN %d is a directory: directories cannot be hard-linked", ErrNotPermitted, lin)
	}
	if err := b.checkParent(parent, name); err != nil {
		return err
	}
	op := bulkOp{link: true, parent: parent, name: name, lin: lin}
	if err := b.room(ctx, op); err != nil {
		return err
	}
	b.queue(op)
	return nil
}

// Flush commits the queued calls. It returns the batch's error (and then
// every later call does; see Bulk), or nil with nothing queued.
func (b *Bulk) Flush(ctx context.Context) error {
	if b.err != nil {
		return b.err
	}
	if len(b.ops) == 0 {
		return nil
	}
	ops := b.ops
	var st BulkStats
	err := b.m.update(ctx, func(o *op) error {
		var err error
		st, err = b.apply(o, ops)
		return err
	})
	if err != nil {
		outcome := "nothing of it written"
		if errors.Is(err, ErrUnavailable) {
			outcome = "it may or may not have been written"
		}
		b.err = fmt.Errorf("meta: bulk batch of %d calls (%s; %d inodes and %d links committed before): %w",
			len(ops), outcome, b.stats.Inodes, b.stats.Links, err)
		return b.err
	}
	b.stats.Inodes += st.Inodes
	b.stats.Dirs += st.Dirs
	b.stats.Files += st.Files
	b.stats.Links += st.Links
	b.stats.Transactions++
	b.reset()
	return nil
}

// Stats returns what the Bulk has committed so far (queued calls are not
// counted until their batch commits).
func (b *Bulk) Stats() BulkStats { return b.stats }

// checkParent refuses what the queued calls already tell: a parent this
// Bulk made as a non-directory, a name queued twice.
func (b *Bulk) checkParent(parent LIN, name string) error {
	if t, ok := b.fresh[parent]; ok && t != TypeDir {
		return fmt.Errorf("%w: LIN %d is a %s", ErrNotDir, parent, t)
	}
	if b.names[Link{Parent: parent, Name: name}] {
		return fmt.Errorf("%w: %q in directory LIN %d", ErrExists, name, parent)
	}
	return nil
}

// cost returns the writes and reads op adds to the batch.
func (b *Bulk) cost(op bulkOp) (writes, reads int) {
	writes = 1 // the entry
	if !op.link {
		writes++ // the inode
	}
	if _, fresh := b.fresh[op.parent]; !fresh {
		reads++ // the entry, to refuse a taken name
		if !b.dirs[op.parent] {
			reads += 2 // the parent's inode and delegation record
		}
		if !op.link && op.ni.Type == TypeDir && !b.rewrite[op.parent] {
			writes++ // the parent's link count
		}
	}
	if !b.touched[op.parent] {
		writes++ // the parent's times
	}
	if _, fresh := b.fresh[op.lin]; op.link && !fresh && !b.linked[op.lin] {
		reads++
		writes++ // its links
	}
	return writes, reads
}

// room commits the batch if op would not fit in it.
func (b *Bulk) room(ctx context.Context, op bulkOp) error {
	w, r := b.cost(op)
	full := len(b.ops) >= b.batch || b.maxOps > 0 && (b.writes+w > b.maxOps || b.reads+r > b.maxOps)
	if !full {
		return nil
	}
	return b.Flush(ctx)
}

// queue adds op to the batch.
func (b *Bulk) queue(op bulkOp) {
	w, r := b.cost(op)
	b.writes += w
	b.reads += r
	if _, fresh := b.fresh[op.parent]; !fresh {
		b.dirs[op.parent] = true
		if !op.link && op.ni.Type == TypeDir {
			b.rewrite[op.parent] = true
		}
	}
	b.touched[op.parent] = true
	if op.link {
		if _, fresh := b.fresh[op.lin]; !fresh {
			b.linked[op.lin] = true
			b.rewrite[op.lin] = true
		}
	} else {
		b.fresh[op.lin] = op.ni.Type
	}
	b.names[Link{Parent: op.parent, Name: op.name}] = true
	b.ops = append(b.ops, op)
}

// allocLIN returns the next reserved LIN, reserving LINBatch more when
// they are used up.
func (b *Bulk) allocLIN(ctx context.Context) (LIN, error) {
	if b.next == b.limit {
		first, err := b.m.reserveLINs(ctx, b.linBatch)
		if err != nil {
			return 0, err
		}
		b.next, b.limit = first, first+LIN(b.linBatch)
	}
	b.next++
	return b.next - 1, nil
}

// apply replays ops in transaction o (one attempt): it reads what the
// batch did not make, checks each call as Create and Link do, and writes
// the result. The inodes it writes are bumped once per call that changed
// them, not by o's flush.
func (b *Bulk) apply(o *op, ops []bulkOp) (BulkStats, error) {
	var st BulkStats
	o.withUsage()
	dirs, lins := slices.Sorted(maps.Keys(b.dirs)), slices.Sorted(maps.Keys(b.linked))
	var keys [][]byte
	var at []int
	for i, op := range ops {
		if _, fresh := b.fresh[op.parent]; !fresh {
			keys = append(keys, keyEntry(op.parent, op.name))
			at = append(at, i)
		}
	}
	vals, err := o.loadDirs(dirs, lins, keys...)
	if err != nil {
		return st, err
	}
	taken := map[int]bool{}
	for j, v := range vals {
		if v != nil {
			taken[at[j]] = true
		}
	}
	made := map[LIN]*inode{}
	write := map[LIN]*inode{}
	for i, op := range ops {
		p := made[op.parent]
		if p == nil {
			if p, err = o.dir(op.parent); err != nil {
				return st, err
			}
		}
		if taken[i] {
			return st, fmt.Errorf("%w: %q in directory LIN %d", ErrExists, op.name, op.parent)
		}
		if op.link {
			n := made[op.lin]
			if n == nil {
				if n, err = o.inode(op.lin); err != nil {
					return st, err
				}
			}
			if err := linkable(n); err != nil {
				return st, err
			}
			n.links = append(n.links, Link{Parent: op.parent, Name: op.name})
			n.nlink++
			n.ctime = o.now
			n.gen++
			write[n.lin] = n
			o.put(keyEntry(op.parent, op.name), encodeEntry(n.typ, n.lin))
			o.touchDir(op.parent)
			st.Links++
			continue
		}
		n := newInode(p, op.lin, op.name, op.ni, op.caller, o.now)
		n.gen = 1
		if n.typ == TypeDir {
			p.nlink++
			p.ctime = o.now
			p.gen++
			write[p.lin] = p
			st.Dirs++
		} else {
			st.Files++
		}
		st.Inodes++
		made[n.lin] = n
		write[n.lin] = n
		o.put(keyEntry(op.parent, op.name), encodeEntry(n.typ, n.lin))
		o.touchDir(op.parent)
		o.addUsage(n.pool, Usage{Inodes: 1})
	}
	for _, lin := range slices.Sorted(maps.Keys(write)) {
		o.put(keyInode(lin), encodeInode(write[lin]))
	}
	return st, nil
}
