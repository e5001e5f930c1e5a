package erasure

import "fmt"

// StripeLayout is how one stripe is stored, as returned by Geometry.Layout.
// A mirrored stripe is described as a code with one data unit and
// Copies()-1 "parity" units that are plain copies, so Width, Needed and
// Tolerance read the same for both kinds.
//
// A stripe map records StripeProtection, UnitLen (the length of each unit's
// block) and DataLen; StoredLayout rebuilds the layout from them.
type StripeLayout struct {
	Protection Protection // the file's protection the layout was derived from
	Mirrored   bool       // units are full copies of the data (no coding)
	DataLen    int        // file bytes held by the stripe
	UnitLen    int        // bytes in every unit (shard or copy) of the stripe
	Data       int        // data units: K, or 1 when Mirrored
	Parity     int        // parity units: M, or copies-1 when Mirrored
}

// Extent is a byte range inside one data unit of a stripe.
type Extent struct {
	Unit int // index of the data unit (0 ≤ Unit < Data); any copy when mirrored
	Off  int // offset inside the unit
	Len  int // bytes
}

// Width is the number of units (drives) the stripe is stored on.
func (l StripeLayout) Width() int { return l.Data + l.Parity }

// Copies is the number of copies of a mirrored stripe, 0 if erasure coded.
func (l StripeLayout) Copies() int {
	if l.Mirrored {
		return l.Width()
	}
	return 0
}

// Needed is the number of units from which the data can be recovered:
// K when erasure coded, 1 when mirrored.
func (l StripeLayout) Needed() int { return l.Data }

// Tolerance is the number of unit losses the stripe survives when all
// Width units are stored.
func (l StripeLayout) Tolerance() int { return l.Parity }

// MinPlaced is the fewest units a writer may place and still acknowledge
// the write as protected against one loss: K+1 when erasure coded, 2 copies
// when mirrored (1 for a one-copy layout, which protects nothing anyway).
func (l StripeLayout) MinPlaced() int {
	if l.Mirrored {
		return min(2, l.Width())
	}
	return min(l.Data+1, l.Width())
}

// AchievedTolerance is the number of unit losses the stripe survives when
// only placed of its Width units were stored: placed-Needed, capped at
// Tolerance. For example ec:4+2 with 5 units placed tolerates 1. A negative
// result means the stripe is not recoverable at all.
func (l StripeLayout) AchievedTolerance(placed int) int {
	return min(placed, l.Width()) - l.Needed()
}

// StoredBytes is the number of bytes the stripe occupies over all its units
// (excluding block headers).
func (l StripeLayout) StoredBytes() int64 { return int64(l.Width()) * int64(l.UnitLen) }

// ScratchLen is the scratch memory Codec.EncodeInto needs for the stripe:
// the units that cannot alias the caller's data (a padded tail, parity).
// It is never more than Width()×UnitLen, and 0 for a mirrored stripe.
func (l StripeLayout) ScratchLen() int {
	if l.Mirrored {
		return 0
	}
	return (l.Width() - l.wholeUnits()) * l.UnitLen
}

// wholeUnits is the number of data units lying wholly inside the data.
func (l StripeLayout) wholeUnits() int {
	if l.UnitLen == 0 {
		return 0
	}
	return min(l.DataLen/l.UnitLen, l.Data)
}

// String names the layout for messages: the protection ("ec:4+2",
// "mirror:3"), or for the small stripe of an erasure-coded file
// "3 copies (small stripe of ec:4+2)".
func (l StripeLayout) String() string {
	if !l.Mirrored || l.Protection.Mirrors > 0 {
		return l.Protection.String()
	}
	return fmt.Sprintf("%d copies (small stripe of %v)", l.Width(), l.Protection)
}

// StripeProtection is the protection the stripe itself is stored with, to
// record in its stripe map: Protection for an erasure-coded stripe or a
// mirror:N file, mirror:M+1 for the small stripe of an ec:K+M file.
func (l StripeLayout) StripeProtection() Protection {
	if l.Mirrored {
		return Protection{Mirrors: l.Width()}
	}
	return l.Protection
}

// StoredLayout rebuilds the layout of a stripe already written from what its
// stripe map records: the stripe's own protection p (StripeProtection at
// write time), the length of its units, and its current data length.
//
// Use it, not Geometry.Layout(dataLen), to read a stored stripe: a truncate
// shortens a stripe's data length without rewriting its units, so the units
// keep the length Layout gave the longer data. It returns an error wrapping
// ErrBadProtection for an invalid p, or ErrBadShards if dataLen does not
// fit in the data units.
func StoredLayout(p Protection, unitLen, dataLen int) (StripeLayout, error) {
	if err := (Geometry{Protection: p}).Validate(); err != nil {
		return StripeLayout{}, err
	}
	l := StripeLayout{Protection: p, DataLen: dataLen, UnitLen: unitLen, Data: p.Data, Parity: p.Parity}
	if p.Mirrors > 0 {
		l.Mirrored, l.Data, l.Parity = true, 1, p.Mirrors-1
	}
	if err := l.validate(); err != nil {
		return StripeLayout{}, err
	}
	return l, nil
}

// Locate returns the data units and the ranges inside them that hold the n
// stripe bytes at offset off, in order. The range is clipped to DataLen: a
// range at or past the end yields nil. A mirrored stripe yields at most one
// extent, in unit 0; every copy holds the same bytes at the same offsets.
// Locate panics if off or n is negative.
func (l StripeLayout) Locate(off, n int) []Extent {
	if off < 0 || n < 0 {
		panic(fmt.Sprintf("erasure: Locate(%d, %d): negative range", off, n))
	}
	end := min(off+n, l.DataLen)
	if off >= end {
		return nil
	}
	if l.Mirrored || l.UnitLen == 0 {
		return []Extent{{Unit: 0, Off: off, Len: end - off}}
	}
	first, last := off/l.UnitLen, (end-1)/l.UnitLen
	out := make([]Extent, 0, last-first+1)
	for u := first; u <= last; u++ {
		lo := max(off, u*l.UnitLen)
		hi := min(end, (u+1)*l.UnitLen)
		out = append(out, Extent{Unit: u, Off: lo - u*l.UnitLen, Len: hi - lo})
	}
	return out
}

// validate checks the internal consistency of a layout handed to a Codec.
func (l StripeLayout) validate() error {
	switch {
	case l.Data < 1 || l.Parity < 0 || l.UnitLen < 0 || l.DataLen < 0:
		return fmt.Errorf("%w: invalid layout %+v", ErrBadShards, l)
	case l.Mirrored && (l.Data != 1 || l.DataLen > l.UnitLen):
		return fmt.Errorf("%w: mirrored layout %+v must have 1 data unit of at least DataLen bytes", ErrBadShards, l)
	case !l.Mirrored && l.DataLen > l.Data*l.UnitLen:
		return fmt.Errorf("%w: layout %+v holds more data than its %d units of %d", ErrBadShards, l, l.Data, l.UnitLen)
	}
	return nil
}
