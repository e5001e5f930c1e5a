package drive

import "hash/crc32"

// AppendSegmentCRCs appends to dst the CRC32C of each SegmentSize segment of
// data (the last one may be short) — the checksums a block of data stores
// in its header — and returns them with the CRC32C of data as a whole,
// derived from the segment CRCs without a second pass over the bytes.
//
// A writer that computes them once can pass them to Put (see Put) and keep
// the whole-data CRC for its own records.
func AppendSegmentCRCs(dst []uint32, data []byte) ([]uint32, uint32) {
	tab := castagnoli()
	var whole uint32
	for off := 0; off < len(data); off += SegmentSize {
		seg := data[off:min(off+SegmentSize, len(data))]
		c := crc32.Checksum(seg, tab)
		dst = append(dst, c)
		whole = crcShift(whole, len(seg)) ^ c
	}
	return dst, whole
}

// DataCRC returns the CRC32C of the whole data of a block whose header
// is h, from its segment CRCs alone (no pass over the data): after a read
// of the whole block checked every segment (Get does), it is the CRC of
// the bytes read. ok is false when h carries no segment CRCs, or not as
// many as its length needs.
func DataCRC(h BlockHeader) (crc uint32, ok bool) {
	seg := int64(h.SegmentSize)
	if seg <= 0 || len(h.SegmentCRCs) != int((h.Length+seg-1)/seg) {
		return 0, false
	}
	for i, c := range h.SegmentCRCs {
		n := min(seg, h.Length-int64(i)*seg)
		crc = crcShift(crc, int(n)) ^ c
	}
	return crc, true
}

// crcShift returns the CRC32C of A followed by n zero bytes, given the
// CRC32C crc of A, with the pre- and post-inversion of crc32.Checksum
// undone so that crcShift(crc(A), len(B)) ^ crc(B) == crc(A ‖ B) (zlib's
// crc32_combine). It applies one precomputed linear operator per bit of n:
// one for a whole segment.
func crcShift(crc uint32, n int) uint32 {
	for k := 0; n > 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			crc = crcShiftOps[k].apply(crc)
		}
	}
	return crc
}

// gf2Matrix is a linear operator on CRC32 values over GF(2): column i is
// the image of bit i.
type gf2Matrix [32]uint32

func (m *gf2Matrix) apply(v uint32) uint32 {
	var sum uint32
	for i := 0; v != 0; i, v = i+1, v>>1 {
		if v&1 != 0 {
			sum ^= m[i]
		}
	}
	return sum
}

// squared returns m applied twice.
func (m *gf2Matrix) squared() gf2Matrix {
	var sq gf2Matrix
	for i := range sq {
		sq[i] = m.apply(m[i])
	}
	return sq
}

// crcShiftOps[k] appends 2^k zero bytes to a CRC32C (see crcShift), for
// every k up to MaxBlockLength. It is computed once and never changes.
var crcShiftOps = func() [29]gf2Matrix {
	// One zero bit: shift right, and reduce by the reflected polynomial.
	var bit gf2Matrix
	bit[0] = crc32.Castagnoli
	for i := 1; i < 32; i++ {
		bit[i] = 1 << (i - 1)
	}
	op := bit.squared() // 2 bits
	op = op.squared()   // 4 bits
	op = op.squared()   // 8 bits: one byte
	var ops [29]gf2Matrix
	for k := range ops {
		ops[k] = op
		op = op.squared()
	}
	return ops
}()
