package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/weftfs/weft/internal/kv"
)

// The protection index ("r" keys, format 2): every stripe committed below
// its pool's target tolerance, kept with the stripe map in the
// transaction that commits it (CommitStripes), so that repair finds the
// stripes written while nodes or drives were down, `weft status` counts
// them and `weft file list --under-protected` lists them. meta knows no
// nodes: the committer says what the stripe achieves and what its pool
// could give it (StripeUpdate.Tolerance, computed by package placement
// from the topology).

// Tolerance is how many drives, or how many nodes, a stripe may lose and
// stay readable (-1: not readable even with none lost), as package
// placement computes it.
type Tolerance struct {
	Drives int `json:"drives"`
	Nodes  int `json:"nodes"`
}

// String formats t as "drives=2 nodes=1".
func (t Tolerance) String() string { return fmt.Sprintf("drives=%d nodes=%d", t.Drives, t.Nodes) }

// StripeTolerance is how a stripe's placement compares with what its pool
// could give it.
type StripeTolerance struct {
	// Achieved is the tolerance of the stripe's units as placed (whatever
	// drives are up now).
	Achieved Tolerance `json:"achieved"`
	// Target is the tolerance a stripe of the same protection gets when
	// placed over all of the pool's drives and nodes in service, all up.
	Target Tolerance `json:"target"`
}

// Below reports whether the stripe survives fewer drive or node failures
// than its target.
func (t StripeTolerance) Below() bool {
	return t.Achieved.Drives < t.Target.Drives || t.Achieved.Nodes < t.Target.Nodes
}

// UnderStripe is one entry of the protection index: a stripe committed
// below its target, or with units not placed.
type UnderStripe struct {
	LIN   LIN
	Index uint64
	// Missing counts the units not placed.
	Missing int
	// Known is false for an entry written by format 1 (units not placed,
	// nothing else recorded): DataLen, Tolerance and Since are zero.
	Known     bool
	DataLen   uint64
	Tolerance StripeTolerance
	// Since is when the stripe was first committed below its target (a
	// later commit still below keeps it).
	Since time.Time
}

// underOf is the index entry stripe s gets when committed with tolerance
// t at now, keeping the since of old (nil: none), and whether it has one
// at all.
func underOf(lin LIN, s Stripe, t StripeTolerance, now int64, old *UnderStripe) (UnderStripe, bool) {
	miss := s.Missing()
	if miss == 0 && !t.Below() {
		return UnderStripe{}, false
	}
	u := UnderStripe{LIN: lin, Index: s.Index, Missing: miss, Known: true, DataLen: s.DataLen, Tolerance: t, Since: time.Unix(0, now)}
	if old != nil && old.Known && !old.Since.IsZero() {
		u.Since = old.Since
	}
	return u, true
}

// setUnder writes, keeps or deletes the index entry of stripe s of lin
// committed with tolerance t; oldVal is the entry's stored value (nil:
// none).
func (o *op) setUnder(lin LIN, s Stripe, t StripeTolerance, oldVal []byte) error {
	var old *UnderStripe
	k := keyUnder(lin, s.Index)
	if oldVal != nil {
		u, err := decodeUnder(k, oldVal)
		if err != nil {
			return err
		}
		old = &u
	}
	u, below := underOf(lin, s, t, o.now, old)
	switch {
	case below:
		o.put(k, encodeUnder(u))
	case old != nil:
		o.del(k)
	}
	return nil
}

// UnderProtectedStripes returns lin's entries of the protection index, in
// stripe order (none for a file not in it, or gone).
func (m *Meta) UnderProtectedStripes(ctx context.Context, lin LIN) ([]UnderStripe, error) {
	var out []UnderStripe
	err := m.view(ctx, func(o *op) error {
		out = nil
		start, end := linRange(pfxUnder, lin)
		kvs, _, err := o.tx.Scan(start, end, 0)
		if err != nil {
			return err
		}
		for _, p := range kvs {
			u, err := decodeUnder(p.Key, p.Value)
			if err != nil {
				return err
			}
			out = append(out, u)
		}
		return nil
	})
	return out, err
}

// SetStripeTolerance brings the index entry of stripe index of lin in line
// with t, computed from the stripe map at generation gen: it indexes the
// stripe if it has units not placed or t is below its target, and removes
// its entry otherwise, without committing a new stripe map. Repair calls
// it for a stripe it found below its target and could not move, or whose
// entry no longer holds (the pool lost a node). It reports whether it
// changed the index; a stripe gone or no longer at gen changes nothing
// (whoever committed it indexed it). Errors: the store's.
func (m *Meta) SetStripeTolerance(ctx context.Context, lin LIN, index, gen uint64, t StripeTolerance) (bool, error) {
	changed := false
	err := m.update(ctx, func(o *op) error {
		changed = false
		sk, uk := keyStripe(lin, index), keyUnder(lin, index)
		vals, err := o.tx.GetMany(sk, uk)
		if err != nil {
			return err
		}
		if vals[0] == nil {
			return nil
		}
		s, err := decodeStripe(sk, vals[0])
		if err != nil || s.Gen != gen {
			return err
		}
		var old *UnderStripe
		if vals[1] != nil {
			u, err := decodeUnder(uk, vals[1])
			if err != nil {
				return err
			}
			old = &u
		}
		u, below := underOf(lin, s, t, o.now, old)
		switch {
		case below && (old == nil || !old.Known || old.Tolerance != u.Tolerance || old.Missing != u.Missing || old.DataLen != u.DataLen):
			o.put(uk, encodeUnder(u))
			changed = true
		case !below && old != nil:
			o.del(uk)
			changed = true
		}
		return nil
	})
	return changed, err
}

// UnderProtectedFile is one file of the protection index, its entries
// summed.
type UnderProtectedFile struct {
	LIN LIN `json:"lin"`
	// Stripes counts the file's stripes below their target; Missing the
	// units not placed in them; Bytes their data (entries of format 1
	// record none: Unknown counts those).
	Stripes int    `json:"stripes"`
	Missing int    `json:"missing_units"`
	Bytes   uint64 `json:"bytes"`
	Unknown int    `json:"unknown,omitempty"`
	// Achieved and Target are those of the file's weakest stripe, over
	// the entries that record them: the fewest nodes, then drives, it
	// may lose, and what its pool could give it.
	Achieved Tolerance `json:"achieved"`
	Target   Tolerance `json:"target"`
	// Since is when the oldest entry went below its target.
	Since time.Time `json:"since,omitzero"`
}

func (f *UnderProtectedFile) add(u UnderStripe) {
	f.Stripes++
	f.Missing += u.Missing
	if !u.Known {
		f.Unknown++
		return
	}
	f.Bytes += u.DataLen
	a := u.Tolerance.Achieved
	if f.Stripes-f.Unknown == 1 || a.Nodes < f.Achieved.Nodes || a.Nodes == f.Achieved.Nodes && a.Drives < f.Achieved.Drives {
		f.Achieved, f.Target = a, u.Tolerance.Target
	}
	if f.Since.IsZero() || u.Since.Before(f.Since) {
		f.Since = u.Since
	}
}

// indexPage is how many index keys one read of a listing returns.
const indexPage = 512

// eachIndexed calls fn for every key of record type p (the "r" or "l"
// index) of LINs after after, in (LIN, stripe) order, reading pages of
// indexPage keys (each page one snapshot), until fn returns false or an
// error, or the range ends.
func (m *Meta) eachIndexed(ctx context.Context, p byte, after LIN, fn func(kv.KV) (bool, error)) error {
	start := be64([]byte{p}, uint64(after)+1)
	for {
		var kvs []kv.KV
		var next []byte
		err := m.view(ctx, func(o *op) error {
			var err error
			kvs, next, err = o.tx.Scan(start, []byte{p + 1}, indexPage)
			return err
		})
		if err != nil {
			return err
		}
		for _, p := range kvs {
			more, err := fn(p)
			if err != nil || !more {
				return err
			}
		}
		if next == nil || len(kvs) == 0 {
			return nil
		}
		start = kv.After(kvs[len(kvs)-1].Key)
	}
}

// ListUnderProtectedFiles returns up to limit files of the protection
// index with LIN > after, in LIN order, each with its entries summed
// (limit < 1 means 1). The index is read in pages, not one snapshot.
// Errors: the store's; ErrCorrupt for an entry that does not decode.
func (m *Meta) ListUnderProtectedFiles(ctx context.Context, after LIN, limit int) ([]UnderProtectedFile, error) {
	limit = max(limit, 1)
	var out []UnderProtectedFile
	err := m.eachIndexed(ctx, pfxUnder, after, func(p kv.KV) (bool, error) {
		u, err := decodeUnder(p.Key, p.Value)
		if err != nil {
			return false, err
		}
		if len(out) == 0 || out[len(out)-1].LIN != u.LIN {
			if len(out) == limit {
				return false, nil
			}
			out = append(out, UnderProtectedFile{LIN: u.LIN})
		}
		out[len(out)-1].add(u)
		return true, nil
	})
	return out, err
}

// ProtectionStats counts the protection index and the lost-data list.
type ProtectionStats struct {
	// UnderFiles, UnderStripes and UnderBytes count the files, stripes
	// and data bytes below their target (entries of format 1 record no
	// bytes).
	UnderFiles   int    `json:"under_protected_files"`
	UnderStripes int    `json:"under_protected_stripes"`
	UnderBytes   uint64 `json:"under_protected_bytes"`
	// NewestUnder is when the most recent entry counted went below its
	// target.
	NewestUnder time.Time `json:"newest_under_protected,omitzero"`
	// LostFiles, LostStripes and LostBytes count the lost-data list.
	LostFiles   int    `json:"lost_files"`
	LostStripes int    `json:"lost_stripes"`
	LostBytes   uint64 `json:"lost_bytes"`
	// Partial: an index held more entries than the count was allowed to
	// read; the counts are lower bounds.
	Partial bool `json:"partial,omitempty"`
	// Incomplete: the namespace was migrated from format 1 and no repair
	// has checked every stripe since (IncompleteSince): stripes written by
	// format 1 on too few nodes are not indexed yet.
	Incomplete      bool      `json:"index_incomplete,omitempty"`
	IncompleteSince time.Time `json:"index_incomplete_since,omitzero"`
}

// ProtectionStats counts the protection index and the lost-data list,
// reading at most max entries of each (max < 1: no bound; Partial says
// when the bound was reached). The cost is one read per indexPage
// entries: nothing for a cluster where every stripe is where it should be.
func (m *Meta) ProtectionStats(ctx context.Context, max int) (ProtectionStats, error) {
	var st ProtectionStats
	since, ok, err := m.ProtectionMarker(ctx)
	if err != nil {
		return st, err
	}
	st.Incomplete, st.IncompleteSince = ok, since
	var last LIN
	n := 0
	err = m.eachIndexed(ctx, pfxUnder, 0, func(p kv.KV) (bool, error) {
		if max > 0 && n == max {
			st.Partial = true
			return false, nil
		}
		n++
		u, err := decodeUnder(p.Key, p.Value)
		if err != nil {
			return false, err
		}
		if u.LIN != last || st.UnderFiles == 0 {
			st.UnderFiles++
			last = u.LIN
		}
		st.UnderStripes++
		st.UnderBytes += u.DataLen
		if u.Since.After(st.NewestUnder) {
			st.NewestUnder = u.Since
		}
		return true, nil
	})
	if err != nil {
		return st, err
	}
	n, last = 0, 0
	err = m.eachIndexed(ctx, pfxLost, 0, func(p kv.KV) (bool, error) {
		if max > 0 && n == max {
			st.Partial = true
			return false, nil
		}
		n++
		l, err := decodeLost(p.Key, p.Value)
		if err != nil {
			return false, err
		}
		if lin := linAt(p.Key, 1); lin != last || st.LostFiles == 0 {
			st.LostFiles++
			last = lin
		}
		st.LostStripes++
		st.LostBytes += l.DataLen
		return true, nil
	})
	return st, err
}

// ProtectionMarker reports whether the protection index may be incomplete
// (the namespace was migrated from format 1 and no repair has checked
// every stripe since), and since when.
func (m *Meta) ProtectionMarker(ctx context.Context) (time.Time, bool, error) {
	var since time.Time
	var ok bool
	err := m.view(ctx, func(o *op) error {
		b, err := o.tx.Get(keyMarker())
		if err != nil || b == nil {
			ok = false
			return err
		}
		ok = true
		since, err = decodeMarker(b)
		return err
	})
	return since, ok, err
}

// ClearProtectionMarker removes the marker of an incomplete protection
// index if it was set before before (a repair that started after the
// marker and checked every stripe calls it with its start time). It
// reports whether it removed one; it is idempotent.
func (m *Meta) ClearProtectionMarker(ctx context.Context, before time.Time) (bool, error) {
	cleared := false
	err := m.update(ctx, func(o *op) error {
		cleared = false
		b, err := o.tx.Get(keyMarker())
		if err != nil || b == nil {
			return err
		}
		since, err := decodeMarker(b)
		if err != nil {
			return err
		}
		if since.Before(before) {
			o.del(keyMarker())
			cleared = true
		}
		return nil
	})
	return cleared, err
}
