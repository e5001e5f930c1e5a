package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/placement"
)

// writeStripe writes buffered stripe d copy-on-write and commits it
// (through the file's group commit, with its other stripes committing at
// the same time).
//
// Each attempt reads the stripe's current map (generation g); if d does
// not cover the stripe's data, it reads the stored data (degraded if need
// be) and lays d's bytes over it; it encodes the result up to its last
// non-zero byte, writes the units to new blocks, and commits the map only
// if the stripe is still at generation g. A result of zeros only stores
// nothing: the stripe is committed as a hole (meta.StripeUpdate.Drop, at
// generation g) and the map returned has no units. When another writer
// or a restriper committed in between, the new blocks go to the delete
// queue and the attempt is retried from the fresh map, up to
// maxCommitAttempts times; d's ranges are re-applied each time, so
// non-overlapping writes of both writers survive.
//
// The committed map never names a block whose put was not acknowledged.
// d must be in flight: nothing else modifies it meanwhile.
func (ino *inode) writeStripe(ctx context.Context, d *dstripe) (meta.Stripe, error) {
	c := ino.c
	hi := d.ext.end()
	for attempt := 1; ; attempt++ {
		cur, exists, err := ino.stripe(ctx, d.idx, attempt > 1)
		if err != nil {
			return meta.Stripe{}, err
		}
		var oldLen int
		var gen uint64
		if exists {
			oldLen, gen = int(cur.DataLen), cur.Gen
		}
		n := max(oldLen, hi)
		var data, merged []byte
		covered := d.ext.covers(0, n)
		if covered && d.chunks == nil {
			data = d.buf[:n]
		} else {
			merged = ino.stripeBuf(n)
			if oldLen > 0 && !covered {
				if err := ino.readStripe(ctx, cur, 0, oldLen, merged[:oldLen]); err != nil {
					ino.freeStripeBuf(merged)
					return meta.Stripe{}, fmt.Errorf("client: LIN %d stripe %d: reading it to merge a partial write: %w", ino.lin, d.idx, err)
				}
			}
			clear(merged[oldLen:n])
			for _, r := range d.ext {
				d.copyTo(merged[r.lo:r.hi], r.lo, r.hi)
			}
			data = merged
		}
		size := uint64(d.idx*ino.ss) + uint64(n)
		// Trailing zeros are not stored: bytes past a stripe's DataLen
		// read as zeros. A stripe of zeros only is a hole (see sparse.go);
		// a small file's only stripe goes in its map (inline); any other
		// is stored in new blocks.
		data = data[:dataEnd(data)]
		var up meta.StripeUpdate
		var kind *atomic.Int64 // what a commit counts
		how := ""
		switch {
		case len(data) == 0:
			up = meta.StripeUpdate{Stripe: meta.Stripe{Index: uint64(d.idx)}, ExpectGen: gen, Drop: true}
			kind, how = &c.st.holesKept, " as a hole"
		case ino.inline(d.idx, len(data)):
			up = meta.StripeUpdate{Stripe: meta.Stripe{DataLen: uint64(len(data)), Inline: slices.Clone(data)}, ExpectGen: gen}
			kind, how = &c.st.inlineWritten, " inline"
		default:
			pool := ino.currentPool()
			st, tol, err := ino.putStripe(ctx, d.idx, gen+1, data, pool)
			if err != nil {
				ino.freeStripeBuf(merged)
				return meta.Stripe{}, err
			}
			// Failpoint client/before-commit: the units are stored but
			// the stripe map is not committed and nothing is queued for
			// deletion, as if the client died here; the blocks are
			// orphans for collect.
			if err := failpoint.Eval("client/before-commit"); err != nil {
				ino.freeStripeBuf(merged)
				return meta.Stripe{}, fmt.Errorf("client: committing LIN %d stripe %d: %w", ino.lin, d.idx, err)
			}
			up = meta.StripeUpdate{Stripe: st, ExpectGen: gen, Tolerance: tol, Pool: pool}
		}
		ino.freeStripeBuf(merged)
		committed, err := ino.commitStripe(ctx, up, size)
		if err == nil {
			// Failpoint client/after-commit: the map is committed and the
			// replaced blocks are queued for deletion (same transaction),
			// but nobody was told: a crash leaves a durable stripe that
			// no fsync or close acknowledged. Its error is a commit whose
			// reply was lost: the data stays buffered and is written again.
			if err := failpoint.Eval("client/after-commit"); err != nil {
				return meta.Stripe{}, fmt.Errorf("client: committing LIN %d stripe %d%s: %w", ino.lin, d.idx, how, err)
			}
			if !up.Drop {
				c.st.stripesWritten.Add(1)
			}
			if kind != nil {
				kind.Add(1)
			}
			return committed, nil
		}
		units := up.Stripe.Units // the new blocks: none for a hole or an inline stripe
		if !errors.Is(err, meta.ErrStripeConflict) {
			if definite(err) {
				c.enqueueOrphans(ctx, ino.lin, up.Stripe.Index, units)
			}
			// Otherwise the commit may have happened (a lost reply): the
			// blocks are left for the collect job rather than risk
			// deleting committed data.
			return meta.Stripe{}, fmt.Errorf("client: committing LIN %d stripe %d%s: %w", ino.lin, d.idx, how, err)
		}
		c.enqueueOrphans(ctx, ino.lin, up.Stripe.Index, units)
		if err := ino.conflicted(d.idx, attempt, err); err != nil {
			return meta.Stripe{}, err
		}
	}
}

// inline reports whether stripe idx, holding n bytes, is committed
// inline (Config.InlineMax): the file's first and only stripe, the file
// no longer than InlineMax, buffered writes included, and InlineAllowed.
func (ino *inode) inline(idx int64, n int) bool {
	if idx != 0 || int64(n) > ino.c.inlineMax || (ino.c.inlineOK != nil && !ino.c.inlineOK()) {
		return false
	}
	ino.mu.Lock()
	defer ino.mu.Unlock()
	return ino.size <= ino.c.inlineMax
}

// conflicted handles a commit of stripe idx that lost its compare-and-swap
// (err) at attempt: it counts it, follows the file to its new pool if it
// moved, and drops the cached map for the next attempt; it returns
// ErrConflict after maxCommitAttempts.
func (ino *inode) conflicted(idx int64, attempt int, err error) error {
	ino.c.st.conflicts.Add(1)
	var sc *meta.StripeConflictError
	if errors.As(err, &sc) && sc.Pool != "" {
		// The file moved to another pool (set-pool, a tier job)
		// since this handle read it: its stripes go there now.
		ino.setPool(sc.Pool)
	}
	ino.mu.Lock()
	ino.forgetMapLocked(idx)
	ino.mu.Unlock()
	if attempt >= maxCommitAttempts {
		return fmt.Errorf("%w: LIN %d stripe %d: gave up after %d attempts: %w", ErrConflict, ino.lin, idx, attempt, err)
	}
	return nil
}

// definite reports whether a failed commit surely committed nothing.
func definite(err error) bool {
	return errors.Is(err, meta.ErrNotFound) || errors.Is(err, meta.ErrInvalid) || errors.Is(err, meta.ErrIsDir)
}

// stripeBuf returns a buffer of n bytes (arbitrary contents), pooled when
// it is a whole stripe.
func (ino *inode) stripeBuf(n int) []byte {
	if n == int(ino.ss) {
		return ino.c.bufs.get(n)
	}
	return make([]byte, n)
}

// freeStripeBuf returns a buffer of stripeBuf (nil is ignored).
func (ino *inode) freeStripeBuf(b []byte) {
	if b != nil && cap(b) == int(ino.ss) {
		ino.c.bufs.put(b)
	}
}

// putStripe encodes data as stripe idx and writes its units to new blocks
// of generation gen. It returns the stripe map to commit (its units that
// could not be placed have Drive 0) and its tolerance (see placeAndPut).
func (ino *inode) putStripe(ctx context.Context, idx int64, gen uint64, data []byte, pool string) (meta.Stripe, meta.StripeTolerance, error) {
	c := ino.c
	l := ino.geo.Layout(len(data))
	prot, err := MetaProtection(l.StripeProtection())
	if err != nil {
		return meta.Stripe{}, meta.StripeTolerance{}, err
	}
	scratch := make([]byte, 0)
	full := ino.geo.Layout(int(ino.ss)).ScratchLen()
	if sl := l.ScratchLen(); sl > 0 && sl == full {
		scratch = c.bufs.get(sl)
		defer c.bufs.put(scratch)
	}
	shards, err := c.codec.EncodeInto(data, l, scratch)
	if err != nil {
		return meta.Stripe{}, meta.StripeTolerance{}, fmt.Errorf("client: encoding LIN %d stripe %d: %w", ino.lin, idx, err)
	}
	// One CRC pass per unit: the segment CRCs go to the nodes with the
	// units (they store them as they are), the whole-unit CRC into the
	// stripe map.
	crcs := make([]uint32, len(shards))
	segs := make([][]uint32, len(shards))
	for i, sh := range shards {
		if i > 0 && l.Mirrored {
			crcs[i], segs[i] = crcs[0], segs[0]
			continue
		}
		segs[i], crcs[i] = drive.AppendSegmentCRCs(nil, sh)
	}
	units, tol, err := ino.placeAndPut(ctx, idx, gen, l, shards, crcs, segs, pool)
	if err != nil {
		return meta.Stripe{}, meta.StripeTolerance{}, err
	}
	return meta.Stripe{Index: uint64(idx), Protection: prot, DataLen: uint64(len(data)), Units: units}, tol, nil
}

// placeAndPut chooses drives for the units of a stripe (placement.Place
// over the up drives of pool, the file's, spread over nodes) and puts the
// units there in parallel, with their CRCs (crcs[i] of shards[i] whole,
// segs[i] per drive.SegmentSize). A unit whose put fails (drive full, node down)
// is re-placed on another drive, avoiding the failed ones, up to
// maxPutRounds rounds. Units that cannot be placed stay unplaced; if fewer
// than the layout's MinPlaced are placed, the blocks written go to the
// delete queue and the error wraps ErrNoSpace (drives are up but full) or
// ErrUnavailable. It returns the units and the stripe's tolerance as
// placed against its target (all of the pool's drives in service): a
// stripe written while a node is down lands on fewer nodes, and its
// commit indexes it for repair.
func (ino *inode) placeAndPut(ctx context.Context, idx int64, gen uint64, l erasure.StripeLayout, shards [][]byte, crcs []uint32, segs [][]uint32, pool string) ([]meta.Unit, meta.StripeTolerance, error) {
	c := ino.c
	var none meta.StripeTolerance
	view, err := c.view(ctx)
	if err != nil {
		return nil, none, fmt.Errorf("client: LIN %d stripe %d: %w", ino.lin, idx, err)
	}
	cands := view.Candidates(pool)
	req := placement.Request{
		Candidates: cands, Width: l.Width(), Min: l.MinPlaced(), Needed: l.Needed(),
		UnitBytes: int64(l.UnitLen) + drive.HeaderAlign,
		Label:     fmt.Sprintf("%v in pool %s", l, pool), Rand: c.rng(),
	}
	res, err := placement.Place(req)
	if errors.Is(err, placement.ErrNotEnoughDrives) {
		// The cached view may predate drives just brought up or moved
		// into the pool: once more from the control plane.
		if v, verr := c.FreshSnapshot(ctx); verr == nil {
			view, req.Candidates = v, v.Candidates(pool)
			res, err = placement.Place(req)
		}
	}
	if err != nil {
		return nil, none, ino.placeErr(idx, req, err)
	}
	units := make([]meta.Unit, l.Width())
	nodes := make([]string, l.Width())
	assign := func(i int, d placement.DriveID, node string) {
		units[i] = meta.Unit{Drive: meta.DriveID(d), Block: meta.BlockID(drive.NewBlockID()), Length: uint32(l.UnitLen), CRC: crcs[i]}
		nodes[i] = node
	}
	unsynced := c.mayDeferSync(ino.lin, gen, l.UnitLen)
	var pending []int
	for i, d := range res.Drives {
		assign(i, d, res.Nodes[i])
		pending = append(pending, i)
	}
	var (
		exclude        []placement.DriveID
		maybe          []meta.Unit // failed puts that may have left a block
		lastErr        error
		noSpace, other int
	)
	for round := 1; len(pending) > 0; round++ {
		errs := make([]error, len(pending))
		var wg sync.WaitGroup
		for k, i := range pending {
			u := unitRef{lin: ino.lin, stripe: uint64(idx), index: i, unit: units[i], node: nodes[i], local: view.local(units[i].Drive), pool: view.pool(units[i].Drive), unsynced: unsynced}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[k] = c.putUnit(ctx, u, gen, shards[i], segs[i])
			}()
		}
		wg.Wait()
		var failed []int
		for k, i := range pending {
			if errs[k] == nil {
				continue
			}
			failed = append(failed, i)
			exclude = append(exclude, placement.DriveID(units[i].Drive))
			maybe = append(maybe, units[i])
			lastErr = fmt.Errorf("unit %d on drive %d (node %s): %w", i, units[i].Drive, nodes[i], errs[k])
			if errors.Is(errs[k], drive.ErrNoSpace) {
				noSpace++
			} else {
				other++
			}
			units[i], nodes[i] = meta.Unit{}, ""
		}
		if err := ctx.Err(); err != nil {
			c.enqueueOrphans(ctx, ino.lin, uint64(idx), append(maybe, units...))
			return nil, none, err
		}
		pending = nil
		if len(failed) == 0 || round >= maxPutRounds {
			break
		}
		// Re-place the failed units on other drives, from a fresh view
		// (an unreachable node invalidated the topology).
		if v, err := c.view(ctx); err == nil {
			view = v
		}
		var existing []placement.Unit
		for i, u := range units {
			if u.Placed() {
				existing = append(existing, placement.Unit{Drive: placement.DriveID(u.Drive), Node: nodes[i]})
			}
		}
		res, err := placement.Place(placement.Request{
			Candidates: view.Candidates(pool), Width: len(failed), Min: 1, Needed: l.Needed(),
			UnitBytes: req.UnitBytes, Exclude: exclude, Existing: existing, Label: req.Label, Rand: req.Rand,
		})
		if err != nil {
			lastErr = fmt.Errorf("re-placing %d units: %w", len(failed), err)
			break
		}
		for j, d := range res.Drives {
			assign(failed[j], d, res.Nodes[j])
			pending = append(pending, failed[j])
			c.st.putRetries.Add(1)
		}
	}
	if len(maybe) > 0 {
		c.enqueueOrphans(ctx, ino.lin, uint64(idx), maybe)
	}
	placed := 0
	for _, u := range units {
		if u.Placed() {
			placed++
		}
	}
	if placed < l.MinPlaced() {
		c.enqueueOrphans(ctx, ino.lin, uint64(idx), units)
		kind := ErrUnavailable
		if noSpace > 0 && other == 0 {
			kind = ErrNoSpace
		}
		return nil, none, fmt.Errorf("%w: LIN %d stripe %d (%v): %d of %d units written, at least %d needed; last failure: %w",
			kind, ino.lin, idx, l, placed, l.Width(), l.MinPlaced(), lastErr)
	}
	var at []placement.Unit
	for i, u := range units {
		if u.Placed() {
			at = append(at, placement.Unit{Drive: placement.DriveID(u.Drive), Node: nodes[i]})
		}
	}
	tol := meta.StripeTolerance{
		Achieved: metaTolerance(placement.ComputeTolerance(at, l.Needed())),
		Target:   metaTolerance(view.TargetTolerance(pool, l)),
	}
	if placed < l.Width() || tol.Below() {
		c.st.underProtected.Add(1)
		c.warnLimited("stripe written below its protection (drives or nodes down); repair will re-protect it",
			"lin", uint64(ino.lin), "stripe", idx, "layout", l.String(), "placed", placed, "width", l.Width(),
			"achieved", tol.Achieved.String(), "target", tol.Target.String())
	}
	return units, tol, nil
}

// placeErr turns a failed first placement into ErrNoSpace (enough drives
// are up and ready, too few have room) or ErrUnavailable.
func (ino *inode) placeErr(idx int64, req placement.Request, err error) error {
	ready := 0
	for _, cd := range req.Candidates {
		if cd.Up && cd.Usable {
			ready++
		}
	}
	kind := ErrUnavailable
	if errors.Is(err, placement.ErrNotEnoughDrives) && ready >= req.Min {
		kind = ErrNoSpace
	}
	return fmt.Errorf("%w: writing LIN %d stripe %d: %w", kind, ino.lin, idx, err)
}

// EnqueueOrphans sends the placed units of a stripe of lin that no stripe
// map references (blocks written for a commit that lost its
// compare-and-swap or was never made) to the delete queue, where the node
// servers free them. It is idempotent. Never pass units a committed map
// may still name: deleting them loses data.
func (c *Client) EnqueueOrphans(ctx context.Context, lin meta.LIN, stripe uint64, units []meta.Unit) error {
	var es []meta.DeleteEntry
	for _, u := range units {
		if u.Placed() {
			es = append(es, meta.DeleteEntry{Drive: u.Drive, Block: u.Block, LIN: lin, Stripe: stripe, Length: u.Length})
		}
	}
	if len(es) == 0 {
		return nil
	}
	if err := c.meta.EnqueueDeletes(ctx, es); err != nil {
		return fmt.Errorf("client: queueing %d orphaned blocks of LIN %d stripe %d for deletion: %w", len(es), lin, stripe, err)
	}
	c.st.orphans.Add(int64(len(es)))
	return nil
}

// enqueueOrphans is EnqueueOrphans for the write path: it runs even if
// ctx is canceled (for up to a minute), and a failure is only logged — the
// collect job finds unreferenced blocks anyway.
func (c *Client) enqueueOrphans(ctx context.Context, lin meta.LIN, stripe uint64, units []meta.Unit) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := c.EnqueueOrphans(ctx, lin, stripe, units); err != nil {
		c.log.Warn("orphaned blocks left for the collect job", "err", err)
	}
}
