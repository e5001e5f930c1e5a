package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/weftfs/weft/internal/kv"
)

// StripeReader is what EachStripe reads stripe maps from (*Meta, or a
// narrower interface a caller holds).
type StripeReader interface {
	GetStripes(ctx context.Context, lin LIN, from uint64, n int) ([]Stripe, error)
}

// EachStripe calls fn for every stripe map of lin in index order, read
// from r in pages of page maps; it stops at the first error of GetStripes
// (returned as is: ErrNotFound when lin is gone) or of fn.
func EachStripe(ctx context.Context, r StripeReader, lin LIN, page int, fn func(Stripe) error) error {
	for from := uint64(0); ; {
		ss, err := r.GetStripes(ctx, lin, from, page)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if err := fn(s); err != nil {
				return err
			}
		}
		if len(ss) < page {
			return nil
		}
		from = ss[len(ss)-1].Index + 1
	}
}

// BlockStripes returns r with inline stripes (Stripe.Inline) left out of
// GetStripes, which still returns up to n stripes when n stripes with
// units follow from: the view of the jobs that rebuild, move, verify,
// check or collect blocks. For them an inline stripe is nothing to do —
// the namespace holds its bytes and protects them — and leaving it out
// keeps code that works on units from ever meeting a stripe without.
func BlockStripes(r StripeReader) StripeReader { return blockStripes{r} }

type blockStripes struct{ r StripeReader }

func (b blockStripes) GetStripes(ctx context.Context, lin LIN, from uint64, n int) ([]Stripe, error) {
	ss, err := b.r.GetStripes(ctx, lin, from, n)
	if err != nil || len(ss) == 0 || !ss[0].IsInline() {
		return ss, err
	}
	full := n > 0 && len(ss) == n
	next := ss[0].Index + 1
	ss = ss[1:]
	if !full {
		return ss, nil
	}
	if len(ss) > 0 {
		next = ss[len(ss)-1].Index + 1
	}
	more, err := b.r.GetStripes(ctx, lin, next, 1)
	if err != nil {
		return nil, err
	}
	return append(ss, more...), nil
}

// GetStripes returns up to n stripes of lin with index >= from, in index
// order (n <= 0: all of them; page large files). Stripes never written
// (holes) are absent from the result. Errors: ErrNotFound.
func (m *Meta) GetStripes(ctx context.Context, lin LIN, from uint64, n int) ([]Stripe, error) {
	var out []Stripe
	err := m.view(ctx, func(o *op) error {
		out = nil
		kvs, _, err := o.tx.Scan(keyStripe(lin, from), stripesEnd(lin), n)
		if err != nil {
			return err
		}
		if len(kvs) == 0 {
			_, err := o.inode(lin)
			return err
		}
		for _, p := range kvs {
			s, err := decodeStripe(p.Key, p.Value)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// GetStripesAt returns the stripes of lin with from <= index < to that
// exist, in index order, like GetStripes but reading each stripe's key
// rather than scanning the range: a metadata cache (kvcache), which keeps
// keys, answers it, where it sends a range scan outside the directories it
// completes to the store. For a short range: a small file's stripes, whose
// count its size gives. Errors: ErrNotFound, ErrInvalid (to < from, or
// more than the budget of keys).
func (m *Meta) GetStripesAt(ctx context.Context, lin LIN, from, to uint64) ([]Stripe, error) {
	if to < from || to-from > uint64(m.budget) {
		return nil, fmt.Errorf("%w: stripes [%d, %d) of LIN %d: want at most %d, from the first", ErrInvalid, from, to, lin, m.budget)
	}
	keys := make([][]byte, 0, to-from)
	for i := from; i < to; i++ {
		keys = append(keys, keyStripe(lin, i))
	}
	var out []Stripe
	err := m.view(ctx, func(o *op) error {
		out = nil
		vals, err := o.load([]LIN{lin}, keys...) // with the inode: one read
		if err != nil {
			return err
		}
		if _, err := o.inode(lin); err != nil {
			return err
		}
		for i, v := range vals {
			if v == nil {
				continue
			}
			s, err := decodeStripe(keys[i], v)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// StripeUpdate is one stripe to commit: the new stripe (its Gen is ignored)
// and the generation the caller read (0: the stripe does not exist yet).
type StripeUpdate struct {
	Stripe    Stripe
	ExpectGen uint64
	// Tolerance is what the new stripe's placement achieves and what its
	// pool could give it, computed by the committer from the topology
	// (client.Snapshot.StripeTolerance). A stripe below its target, or
	// with units not placed, is indexed for repair (the protection index);
	// the zero value indexes only the latter.
	Tolerance StripeTolerance
	// Pool, when set, is the pool the new units were placed in: the
	// commit is refused (a *StripeConflictError naming the file's pool)
	// if the file is in another pool now, so that a writer or restriper
	// that read the file's pool before a set-pool or a tier job moved it
	// never commits a stripe into the old pool.
	Pool string
	// Drop makes the stripe a hole instead: its map (if it is at
	// ExpectGen; ExpectGen 0 and no map is a no-op) is deleted with its
	// protection-index and lost-data entries, and its blocks go to the
	// delete queue. Stripe carries only the Index. The writer of a stripe
	// whose bytes are all zeros drops it rather than storing zeros; the
	// commit still grows the file (CommitOptions.Size) and sets mtime.
	Drop bool
}

// CommitOptions go with a stripe commit.
type CommitOptions struct {
	// StripeSize is the file bytes per stripe. Required for a file's first
	// stripe; afterwards 0 or the file's StripeSize.
	StripeSize uint64
	// Size extends the file to at least this many bytes (a commit never
	// shrinks a file: use SetAttr).
	Size uint64
	// Mtime is the new mtime; zero means now.
	Mtime time.Time
	// Restripe marks a commit that moves or rebuilds units without changing
	// the file's data (repair, drain, rebalance): mtime and ctime stay as
	// they are, so backups and make see no change. Size and Mtime are
	// ignored.
	Restripe bool
}

// CommitStripes replaces stripes of file lin in one transaction, each only
// if its stored generation equals ExpectGen (compare-and-swap); each
// committed stripe gets generation ExpectGen+1; a dropped one
// (StripeUpdate.Drop) is deleted and returned with its Index only. Blocks of the old stripes
// that the new ones do not reuse go to the delete queue in the same
// transaction; the WDL, Allocated, size, mtime, the protection index (an
// entry for each stripe with units not placed or below its target, none
// for the others) and pool usage follow; a commit that is not a Restripe
// replaces the stripe's data, so it also takes the stripe off the
// lost-data list. It returns the committed stripes. A commit that is not
// deferred (see deferStripes) and not a Restripe runs the data barriers
// first (AddDataBarrier): their error fails it, with nothing committed.
//
// Errors: a *StripeConflictError (errors.Is ErrStripeConflict) naming the
// first stripe whose generation moved, or whose units are in a pool the
// file has left (StripeUpdate.Pool) — nothing is committed, and the
// caller's new blocks are its own to reuse or enqueue for deletion;
// ErrNotFound; ErrIsDir or ErrInvalid (not a regular file); ErrInvalid for a
// malformed stripe (protection, unit count, placement, DataLen over
// StripeSize, duplicate index); ErrTooLarge (wrapping kv.ErrTooLarge) for too many stripes at once.
func (m *Meta) CommitStripes(ctx context.Context, lin LIN, ups []StripeUpdate, co CommitOptions) ([]Stripe, error) {
	if err := checkStripes(ups); err != nil {
		return nil, err
	}
	if out, deferred, err := m.deferStripes(ctx, lin, ups, co); deferred {
		return out, err
	}
	if !co.Restripe {
		// The blocks may have been written unsynced, for a commit that
		// was to be deferred (see data_barrier.go).
		if err := m.dataBarrier(ctx); err != nil {
			return nil, fmt.Errorf("meta: committing stripes of LIN %d: the data they name is not durable: %w", lin, err)
		}
	}
	var out []Stripe
	err := m.update(ctx, func(o *op) error {
		var err error
		out, err = o.commitStripes(lin, ups, co)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// deferStripes commits the first commit of each stripe (ExpectGen 0,
// not a hole, not a Restripe) of a file only this client can reach (a
// deferred create's, see bear) through the write-back: it defers it
// behind the file's create and attribute changes, to be committed with
// them and the changes deferred after it, and does not wait for that
// commit. The file is then like its create: shown to this client at once,
// to others once committed (any path to it goes through a delegated
// directory, whose recall commits it first), durable at fsync, and lost
// whole — with everything deferred after it — if this client dies first.
// So that that loss stays small, it waits while more than
// MaxUncommittedData deferred changes wait for their commit. It returns
// the stripes committed and true; false if the commit could not be
// deferred (the caller commits it synchronously). Errors of the
// write-back's commit are reported by the next Flush (fsync).
func (m *Meta) deferStripes(ctx context.Context, lin LIN, ups []StripeUpdate, co CommitOptions) ([]Stripe, bool, error) {
	if m.wb == nil || co.Restripe {
		return nil, false, nil
	}
	for _, up := range ups {
		if up.ExpectGen != 0 || up.Drop {
			return nil, false, nil
		}
	}
	var out []Stripe
	ok := m.deferOn(ctx, lin, func(o *op, mode opMode) error {
		got, err := o.commitStripes(lin, ups, co)
		if mode == deferLocal {
			out = got
		}
		return err
	})
	if !ok {
		return nil, false, nil
	}
	// Deferred is done: a cancelled wait leaves the bound to the next.
	_ = m.wb.d.Settle(ctx, MaxUncommittedData)
	return out, true, nil
}

// commitStripes is CommitStripes in o.
func (o *op) commitStripes(lin LIN, ups []StripeUpdate, co CommitOptions) ([]Stripe, error) {
	o.withUsage()
	// One read: the stripes, their index entries and lost-data
	// entries (keys[i], keys[n+i], keys[2n+i]), the inode and the
	// usage shard.
	n0 := len(ups)
	keys := make([][]byte, 3*n0)
	for i, up := range ups {
		keys[i] = keyStripe(lin, up.Stripe.Index)
		keys[n0+i] = keyUnder(lin, up.Stripe.Index)
		keys[2*n0+i] = keyLost(lin, up.Stripe.Index)
	}
	vals, err := o.load([]LIN{lin}, keys...)
	if err != nil {
		return nil, err
	}
	n, err := o.inode(lin)
	if err != nil {
		return nil, err
	}
	switch {
	case n.typ == TypeDir:
		return nil, fmt.Errorf("%w: LIN %d has no stripes", ErrIsDir, lin)
	case n.typ != TypeFile:
		return nil, fmt.Errorf("%w: LIN %d is a %s: only regular files have stripes", ErrInvalid, lin, n.typ)
	case n.stripeSize == 0 && co.StripeSize == 0:
		return nil, fmt.Errorf("%w: the first stripe of LIN %d needs CommitOptions.StripeSize", ErrInvalid, lin)
	case n.stripeSize != 0 && co.StripeSize != 0 && co.StripeSize != n.stripeSize:
		return nil, fmt.Errorf("%w: stripe size %d, LIN %d has %d", ErrInvalid, co.StripeSize, lin, n.stripeSize)
	}
	if n.stripeSize == 0 {
		n.stripeSize = co.StripeSize
	}
	out := make([]Stripe, len(ups))
	var alloc int64
	for i, up := range ups {
		s := up.Stripe
		if s.DataLen > n.stripeSize {
			return nil, fmt.Errorf("%w: stripe %d of LIN %d holds %d bytes, the stripe size is %d", ErrInvalid, s.Index, lin, s.DataLen, n.stripeSize)
		}
		var old Stripe
		if vals[i] != nil {
			if old, err = decodeStripe(keys[i], vals[i]); err != nil {
				return nil, err
			}
		}
		if old.Gen != up.ExpectGen {
			return nil, &StripeConflictError{LIN: lin, Index: s.Index, Want: up.ExpectGen, Have: old.Gen}
		}
		if up.Pool != "" && up.Pool != n.pool {
			return nil, &StripeConflictError{LIN: lin, Index: s.Index, Want: up.ExpectGen, Have: old.Gen, Pool: n.pool}
		}
		if up.Drop {
			if vals[i] != nil {
				o.deleteStripe(n, old)
			}
			out[i] = Stripe{Index: s.Index}
			continue
		}
		s.Gen = old.Gen + 1
		keep := map[unitKey]bool{}
		for _, u := range s.Units {
			if u.Placed() {
				keep[unitKey{u.Drive, u.Block}] = true
			}
		}
		o.queueUnits(lin, s.Index, old.Units, keep)
		alloc += int64(unitBytes(s.Units)) - int64(unitBytes(old.Units))
		n.addDrives(old.Units, -1)
		n.addDrives(s.Units, +1)
		o.put(keys[i], encodeStripe(&s))
		if err := o.setUnder(lin, s, up.Tolerance, vals[n0+i]); err != nil {
			return nil, err
		}
		if vals[2*n0+i] != nil && !co.Restripe {
			o.del(keys[2*n0+i])
		}
		out[i] = s
	}
	n.allocated = uint64(int64(n.allocated) + alloc)
	d := Usage{Allocated: alloc}
	if co.Size > n.size && !co.Restripe {
		d.Bytes = int64(co.Size - n.size)
		n.size = co.Size
	}
	o.addUsage(n.pool, d)
	if co.Restripe {
		o.mark(n)
		return out, nil
	}
	n.mtime = o.now
	if !co.Mtime.IsZero() {
		n.mtime = co.Mtime.UnixNano()
	}
	o.change(n)
	return out, nil
}

// CommitStripe commits one stripe; see CommitStripes.
func (m *Meta) CommitStripe(ctx context.Context, lin LIN, s Stripe, expectGen uint64, co CommitOptions) (Stripe, error) {
	out, err := m.CommitStripes(ctx, lin, []StripeUpdate{{Stripe: s, ExpectGen: expectGen}}, co)
	if err != nil {
		return Stripe{}, err
	}
	return out[0], nil
}

func checkStripes(ups []StripeUpdate) error {
	if len(ups) == 0 {
		return fmt.Errorf("%w: no stripe to commit", ErrInvalid)
	}
	seen := map[uint64]bool{}
	for _, up := range ups {
		s := up.Stripe
		if seen[s.Index] {
			return fmt.Errorf("%w: stripe %d twice in one commit", ErrInvalid, s.Index)
		}
		seen[s.Index] = true
		if up.Drop {
			if len(s.Units) != 0 || s.IsInline() {
				return fmt.Errorf("%w: stripe %d is dropped but names %d units or holds bytes", ErrInvalid, s.Index, len(s.Units))
			}
			continue
		}
		if s.IsInline() {
			if err := checkInline(s); err != nil {
				return err
			}
			continue
		}
		if err := s.Protection.Validate(); err != nil {
			return err
		}
		if s.Protection.IsZero() {
			return fmt.Errorf("%w: stripe %d has no protection", ErrInvalid, s.Index)
		}
		if len(s.Units) != s.Protection.Width() {
			return fmt.Errorf("%w: stripe %d has %d units, %s needs %d (unplaced units have Drive 0)",
				ErrInvalid, s.Index, len(s.Units), s.Protection, s.Protection.Width())
		}
		blocks := map[BlockID]bool{}
		for j, u := range s.Units {
			switch {
			case !u.Placed() && (u != Unit{}):
				return fmt.Errorf("%w: stripe %d unit %d has no drive but a block or length", ErrInvalid, s.Index, j)
			case u.Placed() && u.Block.IsZero():
				return fmt.Errorf("%w: stripe %d unit %d on drive %d has a zero block id", ErrInvalid, s.Index, j, u.Drive)
			case u.Placed() && blocks[u.Block]:
				return fmt.Errorf("%w: stripe %d uses block %s twice", ErrInvalid, s.Index, u.Block)
			}
			blocks[u.Block] = true
		}
	}
	return nil
}

// checkInline checks an inline stripe to commit: stripe 0, bytes that
// are its DataLen, at most MaxInline of them, and no protection or units.
func checkInline(s Stripe) error {
	switch {
	case s.Index != 0:
		return fmt.Errorf("%w: stripe %d holds its bytes inline: only a file's first stripe may", ErrInvalid, s.Index)
	case len(s.Inline) == 0 || len(s.Inline) > MaxInline:
		return fmt.Errorf("%w: inline stripe of %d bytes: want 1 to %d (a stripe of zeros is a hole)", ErrInvalid, len(s.Inline), MaxInline)
	case uint64(len(s.Inline)) != s.DataLen:
		return fmt.Errorf("%w: inline stripe of %d bytes with data length %d", ErrInvalid, len(s.Inline), s.DataLen)
	case len(s.Units) != 0 || !s.Protection.IsZero():
		return fmt.Errorf("%w: inline stripe with protection %s and %d units: it has neither", ErrInvalid, s.Protection, len(s.Units))
	}
	return nil
}

// ListUnderProtected returns up to limit stripes of the protection index
// (units not placed, or below their target when committed), after the
// stripe after (zero: from the start), in (LIN, index) order, for repair.
func (m *Meta) ListUnderProtected(ctx context.Context, after StripeRef, limit int) ([]StripeRef, error) {
	var out []StripeRef
	err := m.view(ctx, func(o *op) error {
		out = nil
		start := []byte{pfxUnder}
		if after != (StripeRef{}) {
			start = kv.After(keyUnder(after.LIN, after.Index))
		}
		kvs, _, err := o.tx.Scan(start, []byte{pfxUnder + 1}, limit)
		for _, p := range kvs {
			out = append(out, StripeRef{LIN: linAt(p.Key, 1), Index: uint64(linAt(p.Key, 9))})
		}
		return err
	})
	return out, err
}
