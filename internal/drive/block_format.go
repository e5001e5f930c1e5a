package drive

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"
)

// Block file format, version 1.
//
// A block is one file, DIR/blocks/<first 2 hex digits of id>/<32 hex id>,
// made of a header padded to a multiple of HeaderAlign bytes (so data starts
// on a page boundary) followed by the data bytes. All integers little-endian.
//
//	off  size  field
//	  0     8  magic "WEFTBLK\x00"
//	  8     2  format version (BlockFormatVersion)
//	 10     2  reserved, zero
//	 12     4  header length in bytes, including padding (multiple of 4096)
//	 16    16  block id
//	 32     8  owner LIN
//	 40     8  stripe
//	 48     4  unit
//	 52     4  reserved, zero
//	 56     8  generation
//	 64     8  data length in bytes
//	 72     4  segment size in bytes (SegmentSize, 64 KiB)
//	 76     4  segment count n = ceil(data length / segment size)
//	 80     8  created, unix nanoseconds
//	 88   4*n  CRC32C (Castagnoli) of each data segment; the last one may be short
//	 88+4n  4  CRC32C of header bytes [0, 88+4n)
//	 ...       zero padding up to the header length (not checksummed, ignored)
//	 hlen      data length bytes of data
//
// A file shorter than header length + data length is truncated (corrupt); a
// longer one has trailing garbage (corrupt for Verify, ignored by Get).
//
// Migration: a reader accepts every version <= BlockFormatVersion and refuses
// newer ones with ErrNewerFormat. Version 1 is the first; when a version 2
// appears, decodeBlockHeader keeps decoding version 1 and a mediascan rewrite
// migrates blocks lazily.
const (
	// BlockFormatVersion is the block format this binary writes.
	BlockFormatVersion = 1
	// SegmentSize is the checksum granularity: one CRC32C per 64 KiB.
	SegmentSize = 64 << 10
	// HeaderAlign is the alignment of the header length (and so of the data).
	HeaderAlign = 4096
	// MaxBlockLength bounds the data length of one block (256 MiB).
	MaxBlockLength = 256 << 20

	blockMagic       = "WEFTBLK\x00"
	headerFixedLen   = 88
	maxSegmentCount  = (MaxBlockLength + SegmentSize - 1) / SegmentSize
	maxHeaderLength  = (headerFixedLen + 4*maxSegmentCount + 4 + HeaderAlign - 1) / HeaderAlign * HeaderAlign
	minHeaderReadLen = HeaderAlign
)

// castagnoli is the CRC32C table. crc32.MakeTable returns a shared,
// hardware-accelerated table for Castagnoli, so calling it is cheap.
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// BlockHeader is the decoded header of a block file. Callers of Put set ID,
// Owner, Stripe, Unit and Generation, and may carry SegmentSize and
// SegmentCRCs (see Put); Put fills in the rest.
type BlockHeader struct {
	// Version is the block format version the block was written with.
	Version uint16
	// ID is the block's id; it must not be zero.
	ID BlockID
	// Owner is the LIN (inode number) of the file the block belongs to.
	Owner uint64
	// Stripe is the stripe (protection group) index within the file.
	Stripe uint64
	// Unit is the unit index within the stripe (data units, then parity).
	Unit uint32
	// Generation is the stripe generation the block was written for.
	Generation uint64
	// Length is the data length in bytes.
	Length int64
	// SegmentSize is the checksum segment size in bytes.
	SegmentSize uint32
	// Created is when the block was written.
	Created time.Time
	// SegmentCRCs holds one CRC32C per data segment.
	SegmentCRCs []uint32
}

// segmentCount returns the number of segments of length bytes.
func segmentCount(length int64, segSize uint32) int {
	return int((length + int64(segSize) - 1) / int64(segSize))
}

// headerLength returns the padded header length for n segments.
func headerLength(n int) int {
	return (headerFixedLen + 4*n + 4 + HeaderAlign - 1) / HeaderAlign * HeaderAlign
}

// HeaderLength returns the encoded, padded length of h's header in bytes;
// data starts at this file offset.
func (h *BlockHeader) HeaderLength() int { return headerLength(len(h.SegmentCRCs)) }

// encode returns the padded on-disk header. h.SegmentCRCs must hold
// segmentCount(h.Length, h.SegmentSize) entries.
func (h *BlockHeader) encode() []byte {
	n := len(h.SegmentCRCs)
	hlen := headerLength(n)
	b := make([]byte, hlen)
	copy(b[0:8], blockMagic)
	le := binary.LittleEndian
	le.PutUint16(b[8:], h.Version)
	le.PutUint32(b[12:], uint32(hlen))
	copy(b[16:32], h.ID[:])
	le.PutUint64(b[32:], h.Owner)
	le.PutUint64(b[40:], h.Stripe)
	le.PutUint32(b[48:], h.Unit)
	le.PutUint64(b[56:], h.Generation)
	le.PutUint64(b[64:], uint64(h.Length))
	le.PutUint32(b[72:], h.SegmentSize)
	le.PutUint32(b[76:], uint32(n))
	le.PutUint64(b[80:], uint64(h.Created.UnixNano()))
	for i, c := range h.SegmentCRCs {
		le.PutUint32(b[headerFixedLen+4*i:], c)
	}
	end := headerFixedLen + 4*n
	le.PutUint32(b[end:], crc32.Checksum(b[:end], castagnoli()))
	return b
}

// headerLengthOf returns the header length recorded in the first bytes of a
// block file, or an error naming what is wrong. b must hold at least
// headerFixedLen bytes.
func headerLengthOf(b []byte) (int, error) {
	if len(b) < headerFixedLen {
		return 0, fmt.Errorf("file has %d bytes, shorter than the %d-byte fixed header", len(b), headerFixedLen)
	}
	if string(b[0:8]) != blockMagic {
		return 0, fmt.Errorf("bad magic %q", b[0:8])
	}
	hlen := int(binary.LittleEndian.Uint32(b[12:]))
	if hlen < HeaderAlign || hlen%HeaderAlign != 0 || hlen > maxHeaderLength {
		return 0, fmt.Errorf("bad header length %d", hlen)
	}
	return hlen, nil
}

// errNewerBlock is returned (wrapped) by decodeBlockHeader for a version this
// binary cannot read; callers turn it into ErrNewerFormat.
type errNewerBlock struct{ version uint16 }

func (e errNewerBlock) Error() string {
	return fmt.Sprintf("block format version %d, this weft reads up to %d", e.version, BlockFormatVersion)
}

// decodeBlockHeader decodes and checks a header. b must hold at least the
// header length reported by headerLengthOf. It returns a plain error
// describing the problem (callers wrap it into a CorruptError) or an
// errNewerBlock.
func decodeBlockHeader(b []byte) (BlockHeader, error) {
	var h BlockHeader
	hlen, err := headerLengthOf(b)
	if err != nil {
		return h, err
	}
	if len(b) < hlen {
		return h, fmt.Errorf("file has %d bytes, shorter than its %d-byte header", len(b), hlen)
	}
	le := binary.LittleEndian
	h.Version = le.Uint16(b[8:])
	if h.Version == 0 {
		return h, fmt.Errorf("bad format version 0")
	}
	if h.Version > BlockFormatVersion {
		return h, errNewerBlock{h.Version}
	}
	copy(h.ID[:], b[16:32])
	h.Owner = le.Uint64(b[32:])
	h.Stripe = le.Uint64(b[40:])
	h.Unit = le.Uint32(b[48:])
	h.Generation = le.Uint64(b[56:])
	length := le.Uint64(b[64:])
	h.SegmentSize = le.Uint32(b[72:])
	n := int(le.Uint32(b[76:]))
	h.Created = time.Unix(0, int64(le.Uint64(b[80:])))
	if headerLength(n) != hlen {
		return h, fmt.Errorf("segment count %d does not fit header length %d", n, hlen)
	}
	end := headerFixedLen + 4*n
	if got, want := crc32.Checksum(b[:end], castagnoli()), le.Uint32(b[end:]); got != want {
		return h, fmt.Errorf("header crc mismatch: stored %08x, computed %08x", want, got)
	}
	if length > MaxBlockLength || h.SegmentSize == 0 || segmentCount(int64(length), h.SegmentSize) != n {
		return h, fmt.Errorf("inconsistent length %d, segment size %d, segment count %d", length, h.SegmentSize, n)
	}
	h.Length = int64(length)
	h.SegmentCRCs = make([]uint32, n)
	for i := range h.SegmentCRCs {
		h.SegmentCRCs[i] = le.Uint32(b[headerFixedLen+4*i:])
	}
	return h, nil
}
