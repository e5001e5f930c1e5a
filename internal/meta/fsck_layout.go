package meta

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/weftfs/weft/internal/kv"
)

// The layout checker's part in meta: its kinds of findings, and the
// per-pool usage check and its repair. (Whether each unit's block is on
// its drive is asked of the block services by the fsck job; its repair is
// a restripe.)
//
// Usage counters. A pool's usage is kept as deltas spread over
// UsageShards shards ("u" keys), each operation adding its own delta in
// the transaction that changes the inodes and stripe maps it accounts
// for. So in every committed state, if no delta was ever lost, the sum of
// the shards equals the usage the namespace holds: per pool, the inodes,
// the regular files' sizes and the bytes of their placed units.
// FsckUsage computes both sides in one snapshot: their difference is
// what the counters lack, and it stays exactly that whatever clients
// commit afterwards (each commit changes both sides alike). The one
// thing that changes it is a correction: FsckRepairUsage adds the
// difference to a shard only if the pool's count of corrections ("U"
// pool) is still what the snapshot read, and counts its own — so a
// difference is applied at most once, also when an item runs twice after
// a crash or two fsck runs race, while a client's write meanwhile is
// never "repaired". Its cost and limit: FsckUsage reads every inode and
// stripe map of the namespace in one snapshot (a store that compacts the
// snapshot away meanwhile makes the view start over); on a namespace too
// large to read within the store's compaction window the check cannot
// finish, and the job fails with the store's error.

// The kinds of layout findings (FsckLayoutKinds).
const (
	// FsckMissingUnit: a unit's stripe map names a block its drive (up)
	// does not have. Repair: the unit is rebuilt from the others
	// (restripe; a stripe too damaged to rebuild goes to the lost-data
	// list).
	FsckMissingUnit FsckKind = "missing-unit"
	// FsckBadHeader: the block a unit names is on its drive, but its
	// header names another file, stripe or unit, a generation newer than
	// the stripe map's, or does not read. Repair: as missing-unit.
	FsckBadHeader FsckKind = "bad-header"
	// FsckUsageCounter: a pool's usage counters differ from the usage its
	// inodes and stripe maps hold. Repair: the difference is added to the
	// counters (FsckRepairUsage).
	FsckUsageCounter FsckKind = "usage-counter"
)

// FsckLayoutKinds returns every kind of layout finding, in report order.
func FsckLayoutKinds() []FsckKind {
	return []FsckKind{FsckMissingUnit, FsckBadHeader, FsckUsageCounter}
}

// FsckUsageResult is what FsckUsage found, in one snapshot.
type FsckUsageResult struct {
	// Inodes and Stripes count the records read.
	Inodes, Stripes int
	// Counted is each pool's usage as the inodes and stripe maps hold it;
	// Stored is its counters' (the shards summed).
	Counted, Stored map[string]Usage
	// Disagree counts the regular files whose own Allocated differs from
	// the bytes of their stripe maps' placed units (not corrected here;
	// the pool's count follows the stripe maps).
	Disagree int
	// Findings has one usage-counter finding per pool whose counters
	// differ, in pool order.
	Findings []FsckFinding
}

// fsckScanPage is how many records FsckUsage reads per range read.
const fsckScanPage = 1024

// FsckUsage recomputes each pool's usage from the inodes (one inode
// each, a regular file's size) and the stripe maps (the length of each
// placed unit, counted in the pool of the file's inode) and compares it
// with the pool's counters, all in one snapshot (see above). It changes
// nothing. Errors: the store's; ErrCorrupt for a record that does not
// decode.
func (m *Meta) FsckUsage(ctx context.Context) (FsckUsageResult, error) {
	var r FsckUsageResult
	err := m.view(ctx, func(o *op) error {
		r = FsckUsageResult{Counted: map[string]Usage{}}
		stripes := &stripeCursor{tx: o.tx, end: []byte{pfxStripe}}
		for from := LIN(0); ; {
			kvs, more, err := o.scanInodeKeys(from, LIN(math.MaxUint64), fsckScanPage)
			if err != nil {
				return err
			}
			if len(kvs) > 0 {
				// The stripe maps of the LINs up to this page's last.
				last := linAt(kvs[len(kvs)-1].Key, 1)
				stripes.extend(keyStripe(last+1, 0))
				from = last + 1
			}
			for _, p := range kvs {
				if len(p.Key) != 9 {
					continue // directory times, open records
				}
				n, err := decodeInode(linAt(p.Key, 1), p.Value)
				if err != nil {
					return err
				}
				r.Inodes++
				u := Usage{Inodes: 1}
				if n.typ == TypeFile {
					u.Bytes = int64(n.size)
				}
				alloc, count, err := stripes.sumTo(n.lin)
				if err != nil {
					return err
				}
				r.Stripes += count
				u.Allocated = int64(alloc)
				if n.typ == TypeFile && alloc != n.allocated {
					r.Disagree++
				}
				c := r.Counted[n.pool]
				c.add(u)
				r.Counted[n.pool] = c
			}
			if !more || from == 0 {
				break
			}
		}
		var err error
		if r.Stored, err = storedUsage(o.tx); err != nil {
			return err
		}
		for _, pool := range r.Pools() {
			c, s := r.Counted[pool], r.Stored[pool]
			if c == s {
				continue
			}
			k := keyUsageFix(pool)
			b, err := o.tx.Get(k)
			if err != nil {
				return err
			}
			fixes, err := decodeUsageFix(k, b)
			if err != nil {
				return err
			}
			r.Findings = append(r.Findings, FsckFinding{Kind: FsckUsageCounter, Pool: pool, Fixes: fixes,
				Delta: Usage{Inodes: c.Inodes - s.Inodes, Bytes: c.Bytes - s.Bytes, Allocated: c.Allocated - s.Allocated},
				Detail: fmt.Sprintf("the counters say %d inodes, %d bytes, %d allocated; the inodes and stripe maps hold %d, %d, %d",
					s.Inodes, s.Bytes, s.Allocated, c.Inodes, c.Bytes, c.Allocated)})
		}
		return nil
	})
	return r, err
}

// Pools returns the pools r compared: those with usage counted or
// stored, in name order.
func (r FsckUsageResult) Pools() []string {
	pools := maps.Clone(r.Counted)
	maps.Copy(pools, r.Stored)
	return slices.Sorted(maps.Keys(pools))
}

// stripeCursor walks the stripe maps in key (LIN) order alongside the
// inodes, so that a whole-namespace scan reads each range once. Its
// reads end where the inodes read so far end (extend): a read with a
// limit up to the table's far end would cost the store a visit of every
// key to that end (see scanInodeKeys).
type stripeCursor struct {
	tx        kv.Tx
	buf       []kv.KV
	next, end []byte // the next range read, up to end; next nil: read to end
}

// extend lets the cursor read on up to end (above the current one).
func (c *stripeCursor) extend(end []byte) {
	if c.next == nil {
		c.next = c.end
	}
	c.end = end
}

// sumTo returns the placed bytes and the count of the stripe maps of lin,
// skipping those of lower LINs (stripes whose inode is gone: a file
// being deleted in several transactions, not counted in any pool). lin's
// maps must be below the cursor's end.
func (c *stripeCursor) sumTo(lin LIN) (uint64, int, error) {
	var alloc uint64
	count := 0
	for {
		if len(c.buf) == 0 {
			if c.next == nil {
				return alloc, count, nil
			}
			kvs, next, err := c.tx.Scan(c.next, c.end, fsckScanPage)
			if err != nil {
				return 0, 0, err
			}
			c.buf, c.next = kvs, next
			continue
		}
		p := c.buf[0]
		if len(p.Key) != 17 {
			return 0, 0, fmt.Errorf("%w: stripe key %q", ErrCorrupt, p.Key)
		}
		switch owner := linAt(p.Key, 1); {
		case owner > lin:
			return alloc, count, nil
		case owner == lin:
			s, err := decodeStripe(p.Key, p.Value)
			if err != nil {
				return 0, 0, err
			}
			alloc += unitBytes(s.Units)
			count++
		}
		c.buf = c.buf[1:]
	}
}

// FsckRepairUsage repairs usage-counter finding f: in one transaction it
// adds f.Delta to the pool's counters if the pool's count of corrections
// is still f.Fixes (no correction since the snapshot f was computed in:
// see the comment above), and counts the correction. It reports false
// (nothing written) otherwise. Idempotent: a second call with the same
// finding finds the count moved. Errors: ErrInvalid (not a usage-counter
// finding, or one with nothing to add); the store's.
func (m *Meta) FsckRepairUsage(ctx context.Context, f FsckFinding) (bool, error) {
	if f.Kind != FsckUsageCounter || f.Delta == (Usage{}) {
		return false, fmt.Errorf("%w: FsckRepairUsage: a %s finding with a delta, got %s", ErrInvalid, FsckUsageCounter, f)
	}
	repaired := false
	err := m.update(ctx, func(o *op) error {
		repaired = false
		k := keyUsageFix(f.Pool)
		b, err := o.tx.Get(k)
		if err != nil {
			return err
		}
		fixes, err := decodeUsageFix(k, b)
		if err != nil || fixes != f.Fixes {
			return err
		}
		o.put(k, encodeUsageFix(fixes+1))
		o.addUsage(f.Pool, f.Delta)
		repaired = true
		return nil
	})
	return repaired, err
}
