package restripe

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/placement"
)

// Relayout: rewriting a file's stripes in another pool and/or with
// another protection (weft file set-pool, set-protection), copy-on-write
// as every other restripe: each stripe's data is read (rebuilt if units
// are missing), encoded with the new protection, stored as new blocks on
// the drives of the file's pool, and the new map committed only if the
// stripe's generation is unchanged; the old blocks go to the delete
// queue in the same transaction. Readers keep the old map until the
// commit and then see the new one; a writer that committed in between
// makes the stripe be tried again from its new map.

// RelayoutResult counts what RelayoutFile did.
type RelayoutResult struct {
	LIN meta.LIN `json:"lin"`
	// Stripes is how many stripes the file has; Rewritten, how many of
	// them were rewritten (the others were in place already).
	Stripes      int   `json:"stripes"`
	Rewritten    int   `json:"rewritten"`
	BytesWritten int64 `json:"bytes_written"`
	// UnderProtected is how many rewritten stripes got fewer units than
	// their protection asks (drives down or full): a repair completes them.
	UnderProtected int `json:"under_protected"`
}

// RelayoutFile rewrites every stripe of lin that is not stored with the
// layout geometry g gives its data (client.FileGeometry of the file's
// protection), or that has a unit on a drive outside
// the file's pool (its attributes' Pool, read once at the start), as
// described above. It is idempotent: a file already in place is read
// (its stripe maps) and left alone. Stripes are done one at a time; a
// stripe whose generation keeps moving is retried up to
// maxRelayoutAttempts times, then the file fails with client.ErrConflict
// (run it again). Errors: client.ErrUnavailable (too few units readable,
// or too few drives in the pool to place a stripe: the map is unchanged),
// client.ErrInvalid (not a regular file), meta's errors (meta.ErrNotFound:
// deleted) and context errors, wrapped with the stripe.
func (r *Restriper) RelayoutFile(ctx context.Context, lin meta.LIN, g erasure.Geometry) (RelayoutResult, error) {
	res := RelayoutResult{LIN: lin}
	attr, err := r.meta.GetAttr(ctx, lin)
	if err != nil {
		return res, fmt.Errorf("restripe: relayout of LIN %d: %w", lin, err)
	}
	if attr.Type != meta.TypeFile {
		return res, fmt.Errorf("%w: relayout of LIN %d: a %s, not a regular file", client.ErrInvalid, lin, attr.Type)
	}
	var indexes []uint64
	err = r.eachStripe(ctx, lin, func(s meta.Stripe) error {
		indexes = append(indexes, s.Index)
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Stripes = len(indexes)
	for _, idx := range indexes {
		if err := r.relayoutStripe(ctx, lin, attr.Pool, idx, g, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// maxRelayoutAttempts bounds the attempts at one stripe that a
// concurrent writer or restriper keeps changing.
const maxRelayoutAttempts = 5

// relayoutStripe rewrites stripe idx of lin in pool with geometry g if it
// is not there already, retrying on a lost compare-and-swap.
func (r *Restriper) relayoutStripe(ctx context.Context, lin meta.LIN, pool string, idx uint64, g erasure.Geometry, res *RelayoutResult) error {
	snapshot, refreshed := r.data.Snapshot, false
	for attempt := 1; ; attempt++ {
		got, err := r.meta.GetStripes(ctx, lin, idx, 1)
		if err != nil {
			return fmt.Errorf("restripe: relayout of LIN %d stripe %d: %w", lin, idx, err)
		}
		if len(got) == 0 || got[0].Index != idx {
			return nil // truncated away meanwhile
		}
		s := got[0]
		view, err := snapshot(ctx)
		if err != nil {
			return fmt.Errorf("restripe: relayout of LIN %d stripe %d: %w", lin, idx, err)
		}
		nl := g.Layout(int(s.DataLen))
		want, err := client.MetaProtection(nl.StripeProtection())
		if err != nil {
			return fmt.Errorf("%w: relayout of LIN %d stripe %d: %w", client.ErrInvalid, lin, idx, err)
		}
		if s.Protection == want && inPool(view, pool, s) {
			return nil
		}
		data, err := r.readStripeData(ctx, view, lin, s)
		if err != nil {
			return err
		}
		ns, written, under, err := r.storeLayout(ctx, view, lin, pool, s, nl, want, data)
		if errors.Is(err, placement.ErrNotEnoughDrives) && !refreshed {
			// The cached snapshot may predate drives just moved into
			// the pool (set-pool right after drive move): once more
			// from the control plane before failing the file.
			snapshot, refreshed = r.data.FreshSnapshot, true
			continue
		}
		if err != nil {
			return err
		}
		tol, err := view.StripeTolerance(pool, lin, ns)
		if err != nil {
			r.enqueueOrphans(ctx, lin, idx, ns.Units)
			return err
		}
		_, err = r.data.CommitStripes(ctx, lin, []meta.StripeUpdate{{Stripe: ns, ExpectGen: s.Gen, Tolerance: tol, Pool: pool}}, [][]meta.Unit{placedUnits(ns)}, meta.CommitOptions{Restripe: true})
		switch {
		case err == nil:
			res.Rewritten++
			res.BytesWritten += written
			if under {
				res.UnderProtected++
			}
			r.log.Debug("stripe relaid out", "lin", uint64(lin), "stripe", idx, "pool", pool, "layout", nl.String())
			return nil
		case movedOn(err):
			// The file left pool meanwhile (set-pool or a tier job
			// again): the relayout that change started places it.
			r.log.Info("relayout: file moved to another pool meanwhile", "lin", uint64(lin), "stripe", idx, "from", pool)
			return nil
		case errors.Is(err, meta.ErrStripeConflict) && attempt < maxRelayoutAttempts:
			continue // CommitStripes queued the new blocks for deletion
		case errors.Is(err, meta.ErrStripeConflict):
			return fmt.Errorf("%w: relayout of LIN %d stripe %d: gave up after %d attempts: %w", client.ErrConflict, lin, idx, attempt, err)
		default:
			return err
		}
	}
}

// movedOn reports whether a commit was refused because the file is in
// another pool now.
func movedOn(err error) bool {
	var sc *meta.StripeConflictError
	return errors.As(err, &sc) && sc.Pool != ""
}

// inPool reports whether every unit of s is placed on a drive of pool.
func inPool(view *client.Snapshot, pool string, s meta.Stripe) bool {
	ids := map[placement.DriveID]bool{}
	for _, c := range view.Candidates(pool) {
		ids[c.ID] = true
	}
	for _, u := range s.Units {
		if !u.Placed() || !ids[placement.DriveID(u.Drive)] {
			return false
		}
	}
	return true
}

// placedUnits returns the placed units of s.
func placedUnits(s meta.Stripe) []meta.Unit {
	var out []meta.Unit
	for _, u := range s.Units {
		if u.Placed() {
			out = append(out, u)
		}
	}
	return out
}

// readStripeData returns the data bytes of stripe s, read from its units
// and rebuilt from parity if some are unreadable. Errors wrap
// client.ErrUnavailable when too few units read.
func (r *Restriper) readStripeData(ctx context.Context, view *client.Snapshot, lin meta.LIN, s meta.Stripe) ([]byte, error) {
	l, err := client.StoredLayout(lin, s)
	if err != nil {
		return nil, err
	}
	shards := make([][]byte, len(s.Units))
	fails := map[int]error{}
	var placed []int
	for i, u := range s.Units {
		if !u.Placed() {
			fails[i] = errors.New("not placed")
			continue
		}
		placed = append(placed, i)
	}
	r.readUnits(ctx, view, lin, s, placed, shards, fails)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(s.Units)-len(fails) < l.Needed() {
		return nil, fmt.Errorf("%w: relayout of LIN %d stripe %d: %d of %d units readable, %d needed: %s",
			client.ErrUnavailable, lin, s.Index, len(s.Units)-len(fails), len(s.Units), l.Needed(), reasons(fails))
	}
	if len(fails) > 0 {
		if err := r.codec.ReconstructData(shards, l); err != nil {
			return nil, fmt.Errorf("%w: relayout of LIN %d stripe %d: rebuilding from parity: %w", client.ErrUnavailable, lin, s.Index, err)
		}
	}
	data, err := erasure.Join(shards, l)
	if err != nil {
		return nil, fmt.Errorf("%w: relayout of LIN %d stripe %d: %w", client.ErrCorrupt, lin, s.Index, err)
	}
	return data, nil
}

// storeLayout encodes data with layout nl and stores its units as new
// blocks of generation s.Gen+1 on drives of pool, spread over nodes
// (placement.Place), retrying a failed put on another drive once. It
// returns the map to commit, the bytes written and whether some units
// could not be placed. Errors wrap client.ErrUnavailable when fewer
// units than nl.MinPlaced() are stored (what was stored is queued for
// deletion).
func (r *Restriper) storeLayout(ctx context.Context, view *client.Snapshot, lin meta.LIN, pool string, s meta.Stripe, nl erasure.StripeLayout, prot meta.Protection, data []byte) (meta.Stripe, int64, bool, error) {
	shards, err := r.codec.Encode(data, nl)
	if err != nil {
		return meta.Stripe{}, 0, false, fmt.Errorf("restripe: relayout of LIN %d stripe %d: encoding %v: %w", lin, s.Index, nl, err)
	}
	crcs := make([]uint32, len(shards))
	segs := make([][]uint32, len(shards))
	for i, sh := range shards {
		segs[i], crcs[i] = drive.AppendSegmentCRCs(nil, sh)
	}
	ns := meta.Stripe{Index: s.Index, Protection: prot, DataLen: s.DataLen, Units: make([]meta.Unit, nl.Width())}
	var exclude []placement.DriveID
	pending := make([]int, nl.Width())
	for i := range pending {
		pending[i] = i
	}
	var written int64
	var lastErr error
	for round := 1; len(pending) > 0 && round <= maxPutRounds; round++ {
		var existing []placement.Unit
		for _, u := range ns.Units {
			if u.Placed() {
				existing = append(existing, placement.Unit{Drive: placement.DriveID(u.Drive), Node: view.Node(u.Drive)})
			}
		}
		min := 1
		if round == 1 {
			min = nl.MinPlaced()
		}
		pr, err := placement.Place(placement.Request{
			Candidates: view.Candidates(pool), Width: len(pending), Min: min, Needed: nl.Needed(),
			UnitBytes: int64(nl.UnitLen) + drive.HeaderAlign, Exclude: exclude, Existing: existing,
			Label: fmt.Sprintf("relayout of %v in pool %s", nl, pool), Rand: r.rng(),
		})
		if err != nil {
			r.enqueueOrphans(ctx, lin, s.Index, placedUnits(ns))
			return meta.Stripe{}, 0, false, fmt.Errorf("%w: relayout of LIN %d stripe %d into pool %s: %w", client.ErrUnavailable, lin, s.Index, pool, err)
		}
		puts := make([]unitPut, len(pr.Drives))
		for j, d := range pr.Drives {
			i := pending[j]
			ns.Units[i] = meta.Unit{Drive: meta.DriveID(d), Block: meta.BlockID(drive.NewBlockID()), Length: uint32(nl.UnitLen), CRC: crcs[i]}
			puts[j] = unitPut{ref: client.UnitRef{LIN: lin, Stripe: s.Index, Index: i, Unit: ns.Units[i]}, data: shards[i], segs: segs[i]}
		}
		errs := r.putUnits(ctx, view, s.Gen+1, puts)
		var retry []int
		for j, d := range pr.Drives {
			i := pending[j]
			if errs[j] != nil {
				lastErr = errs[j]
				exclude = append(exclude, d)
				r.enqueueOrphans(ctx, lin, s.Index, []meta.Unit{ns.Units[i]})
				ns.Units[i] = meta.Unit{}
				retry = append(retry, i)
				continue
			}
			written += int64(len(shards[i]))
		}
		retry = append(retry, pending[len(pr.Drives):]...)
		if err := ctx.Err(); err != nil {
			r.enqueueOrphans(ctx, lin, s.Index, placedUnits(ns))
			return meta.Stripe{}, 0, false, err
		}
		pending = retry
	}
	if placed := len(placedUnits(ns)); placed < nl.MinPlaced() {
		r.enqueueOrphans(ctx, lin, s.Index, placedUnits(ns))
		return meta.Stripe{}, 0, false, fmt.Errorf("%w: relayout of LIN %d stripe %d into pool %s: %d of %d units stored, %d needed (last error: %v)",
			client.ErrUnavailable, lin, s.Index, pool, placed, nl.Width(), nl.MinPlaced(), lastErr)
	}
	return ns, written, len(pending) > 0, nil
}
