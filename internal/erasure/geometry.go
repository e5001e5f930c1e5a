package erasure

import "fmt"

// Unit sizes. A unit is the part of a stripe stored on one drive (a block).
const (
	// DefaultUnitSize is the unit size of a file that does not choose one.
	DefaultUnitSize = 1 << 20
	// UnitAlign is the granule of unit lengths: a unit size is a multiple
	// of it, and the units of a partial erasure-coded stripe are rounded
	// up to it (so block files stay page aligned).
	UnitAlign = 4 << 10
	// MaxUnitSize bounds the unit size so a full stripe (K units) stays
	// well inside an int and a sane memory budget.
	MaxUnitSize = 64 << 20
)

// Geometry is how a file's bytes map onto stripes and units: its protection
// and its unit size. A file is cut into stripes of StripeDataSize data bytes
// each (the last one may be shorter); Layout says how one stripe is stored.
//
// A UnitSize of 0 means DefaultUnitSize, so Geometry{Protection: p} is
// usable as is. A Geometry is a value; its methods are pure and safe for
// concurrent use. Methods other than Validate assume a valid geometry.
type Geometry struct {
	Protection
	UnitSize int // bytes per unit; 0 means DefaultUnitSize
}

// NewGeometry returns the geometry of protection p with the given unit size
// (0 for DefaultUnitSize). It returns an error wrapping ErrBadGeometry or
// ErrBadProtection when Validate would.
func NewGeometry(p Protection, unitSize int) (Geometry, error) {
	g := Geometry{Protection: p, UnitSize: unitSize}
	if err := g.Validate(); err != nil {
		return Geometry{}, err
	}
	return g, nil
}

// Validate checks the protection against the limits of ParseProtection
// (errors wrap ErrBadProtection) and the unit size (a multiple of UnitAlign
// in [UnitAlign, MaxUnitSize], or 0; errors wrap ErrBadGeometry).
func (g Geometry) Validate() error {
	p := g.Protection
	switch {
	case p.Mirrors > 0:
		if p.Mirrors > MaxMirrors || p.Data != 0 || p.Parity != 0 {
			return fmt.Errorf("%w %+v: mirror count must be 1..%d with no K or M", ErrBadProtection, p, MaxMirrors)
		}
	case p.Data < 1 || p.Data > MaxDataUnits || p.Parity < 1 || p.Parity > MaxParityUnits:
		return fmt.Errorf("%w %+v: want mirror:1..%d or ec:K+M with K 1..%d, M 1..%d",
			ErrBadProtection, p, MaxMirrors, MaxDataUnits, MaxParityUnits)
	}
	if u := g.UnitSize; u != 0 && (u < UnitAlign || u > MaxUnitSize || u%UnitAlign != 0) {
		return fmt.Errorf("%w: unit size %d is not a multiple of %d between %d and %d (0 means %d)",
			ErrBadGeometry, u, UnitAlign, UnitAlign, MaxUnitSize, DefaultUnitSize)
	}
	return nil
}

// Unit returns the unit size in bytes (UnitSize, or DefaultUnitSize if 0).
func (g Geometry) Unit() int {
	if g.UnitSize == 0 {
		return DefaultUnitSize
	}
	return g.UnitSize
}

// StripeDataSize is the number of file bytes a full stripe carries: K units
// for ec:K+M, one unit for mirror:N (each copy holds the whole stripe).
func (g Geometry) StripeDataSize() int64 {
	if g.Mirrors > 0 {
		return int64(g.Unit())
	}
	return int64(g.Data) * int64(g.Unit())
}

// StripeOf returns the stripe holding file offset off (≥ 0) and the offset
// within that stripe's data.
func (g Geometry) StripeOf(off int64) (stripe int64, within int64) {
	s := g.StripeDataSize()
	return off / s, off % s
}

// StripeCount is the number of stripes a file of size bytes spans
// (0 for an empty file).
func (g Geometry) StripeCount(size int64) int64 {
	if size <= 0 {
		return 0
	}
	s := g.StripeDataSize()
	return (size + s - 1) / s
}

// StripeDataLen is the number of data bytes stripe holds in a file of size
// bytes: StripeDataSize for all stripes but the last, the remainder for the
// last, 0 past the end. Pass the result to Layout.
func (g Geometry) StripeDataLen(size, stripe int64) int {
	s := g.StripeDataSize()
	rest := size - stripe*s
	switch {
	case stripe < 0 || rest <= 0:
		return 0
	case rest >= s:
		return int(s)
	default:
		return int(rest)
	}
}

// IsMirrored reports whether a stripe holding dataLen bytes is stored as
// full copies rather than erasure coded. This is the small-file rule of the
// design: a mirror:N file is always mirrored; in an ec:K+M file a stripe
// with less than one unit of data (dataLen < Unit()) is mirrored too,
// because K data units plus M parity would each be tiny and cost M+1 drive
// I/Os to read. The copies it gets (Copies) tolerate the same M failures.
func (g Geometry) IsMirrored(dataLen int) bool {
	return g.Mirrors > 0 || dataLen < g.Unit()
}

// Copies is the number of copies a mirrored stripe of this geometry gets:
// N for mirror:N, M+1 for ec:K+M (same unit-loss tolerance, M).
func (g Geometry) Copies() int {
	if g.Mirrors > 0 {
		return g.Mirrors
	}
	return g.Parity + 1
}

// Layout returns how a stripe holding dataLen bytes is stored.
//
//   - Mirrored (IsMirrored): Copies() copies, each exactly dataLen bytes
//     long (no padding).
//   - Erasure coded: K data units and M parity units, all of the same
//     length ceil(dataLen/K) rounded up to UnitAlign, which never exceeds
//     Unit(). A full stripe has units of Unit() bytes; a final partial
//     stripe has shorter units instead of K full, zero-padded ones. Data
//     bytes fill data unit 0 first, then unit 1, …; the tail of the last
//     unit (and, rarely, whole trailing data units) is zero padding that is
//     encoded and stored but is not file data.
//
// Layout is for writing a stripe. To read a stored stripe use StoredLayout:
// after a truncate its data length may be shorter than its units were cut
// for. It panics if dataLen is outside [0, StripeDataSize()]: the caller cut
// the file wrongly.
func (g Geometry) Layout(dataLen int) StripeLayout {
	if dataLen < 0 || int64(dataLen) > g.StripeDataSize() {
		panic(fmt.Sprintf("erasure: stripe data length %d outside [0, %d] for %v", dataLen, g.StripeDataSize(), g.Protection))
	}
	l := StripeLayout{Protection: g.Protection, DataLen: dataLen}
	if g.IsMirrored(dataLen) {
		l.Mirrored = true
		l.Data, l.Parity = 1, g.Copies()-1
		l.UnitLen = dataLen
		return l
	}
	l.Data, l.Parity = g.Data, g.Parity
	per := (dataLen + g.Data - 1) / g.Data
	l.UnitLen = min((per+UnitAlign-1)/UnitAlign*UnitAlign, g.Unit())
	return l
}
