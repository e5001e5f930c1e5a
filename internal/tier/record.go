package tier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/weftfs/weft/internal/meta"
)

// Entries: the tier job's findings for one page of LINs, kept as job data
// between its phases (candidates and list entries after the scan, the
// plan's moves and deletions after the plan). Format, version 1:
//
//	byte     version (1)
//	uvarint  number of pool names, then each: uvarint length, bytes
//	uvarint  number of entries, then each:
//	           uvarint  LIN minus the previous entry's (the first: itself)
//	           uvarint  rule index
//	           uvarint  pool name's index in the table above
//	           8 bytes  weight, IEEE 754 big-endian
//	           varint   allocated bytes
//	           uvarint  path length, then the path ("" when not kept)
//
// Entries are in LIN order, so deltas are non-negative; several entries
// may have one LIN (a file two LIST rules list). A decoder refuses a
// newer version (ErrNewerRecord) and a record cut short (ErrCorruptRecord)
// rather than misreading either.

// recordVersion is the version EncodeEntries writes.
const recordVersion = 1

// Errors of DecodeEntries.
var (
	ErrNewerRecord   = errors.New("tier: entries record of a newer format")
	ErrCorruptRecord = errors.New("tier: corrupt entries record")
)

// EncodeEntries encodes entries, which must be in LIN order.
func EncodeEntries(entries []Candidate) []byte {
	pools := map[string]uint64{}
	var names []string
	for _, e := range entries {
		if _, ok := pools[e.Pool]; !ok {
			pools[e.Pool] = uint64(len(names))
			names = append(names, e.Pool)
		}
	}
	b := []byte{recordVersion}
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = appendString(b, n)
	}
	b = binary.AppendUvarint(b, uint64(len(entries)))
	var prev meta.LIN
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(e.LIN-prev))
		prev = e.LIN
		b = binary.AppendUvarint(b, uint64(e.Rule))
		b = binary.AppendUvarint(b, pools[e.Pool])
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(e.Weight))
		b = binary.AppendVarint(b, e.Allocated)
		b = appendString(b, e.Path)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// DecodeEntries decodes what EncodeEntries wrote, appending to dst.
func DecodeEntries(dst []Candidate, b []byte) ([]Candidate, error) {
	if len(b) == 0 {
		return dst, fmt.Errorf("%w: empty", ErrCorruptRecord)
	}
	if b[0] > recordVersion {
		return dst, fmt.Errorf("%w: version %d, this binary reads up to %d", ErrNewerRecord, b[0], recordVersion)
	}
	d := decoder{b: b[1:]}
	n := d.uvarint(1 << 20)
	names := make([]string, 0, n)
	for range n {
		names = append(names, d.string())
	}
	count := d.uvarint(1 << 24)
	var lin meta.LIN
	for i := uint64(0); i < count && d.err == nil; i++ {
		lin += meta.LIN(d.uvarint(math.MaxUint64))
		e := Candidate{LIN: lin, Rule: int(d.uvarint(1 << 16))}
		if p := d.uvarint(uint64(len(names))); d.err == nil && p < uint64(len(names)) {
			e.Pool = names[p]
		} else if d.err == nil {
			d.err = fmt.Errorf("%w: pool index %d of %d", ErrCorruptRecord, p, len(names))
		}
		e.Weight = math.Float64frombits(d.u64())
		e.Allocated = d.varint()
		e.Path = d.string()
		if d.err == nil {
			dst = append(dst, e)
		}
	}
	if d.err != nil {
		return dst, d.err
	}
	return dst, nil
}

// decoder reads a record, keeping its first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s cut short", ErrCorruptRecord, what)
	}
	d.b = nil
}

func (d *decoder) uvarint(limit uint64) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("integer")
		return 0
	}
	d.b = d.b[n:]
	if v > limit && limit != math.MaxUint64 {
		if d.err == nil {
			d.err = fmt.Errorf("%w: value %d over %d", ErrCorruptRecord, v, limit)
		}
		d.b = nil
		return 0
	}
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail("weight")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint(math.MaxUint64)
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
