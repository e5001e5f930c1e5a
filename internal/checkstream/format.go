package checkstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The block format, version 1. A stream of Size bytes is cut into blocks
// of Block bytes at offsets 0, Block, 2·Block, …; the last block holds what
// is left, and if that is less than a header it is joined to the block
// before it (which is then up to Block+HeaderSize-1 bytes long). Each block
// starts with a header, little endian:
//
//	 0  magic    [8]byte  "WEFTSTRM"
//	 8  version  uint16   1
//	10  hdrlen   uint16   48 (HeaderSize)
//	12  block    uint32   the stream's block size
//	16  id       uint64   the stream's id
//	24  offset   uint64   this block's offset in the stream
//	32  size     uint64   the stream's size in bytes
//	40  length   uint32   this block's length, header included
//	44  crc      uint32   CRC32C (Castagnoli) of bytes [0,44) then [48,length)
//
// and the rest of the block is its payload: 64-bit words of a splitmix64
// sequence seeded from (id, offset), little endian, with the low bit of
// every byte set, so that no payload byte is zero and a zeroed byte is
// never mistaken for data (the last word is cut to the block's end).
//
// A reader of a later version refuses blocks of a version it does not know
// (they are reported corrupt, with the version named); version 1 has no
// predecessor to migrate from.
const (
	// Magic opens every block.
	Magic = "WEFTSTRM"
	// Version is the block format's version.
	Version = 1
	// HeaderSize is the length of a block's header.
	HeaderSize = 48
	// MinBlock, MaxBlock bound a stream's block size, a multiple of
	// BlockAlign; DefaultBlock is the block size of `weft checkstream gen`.
	MinBlock     = 512
	MaxBlock     = 16 << 20
	BlockAlign   = 512
	DefaultBlock = 64 << 10
)

// ErrInvalid: a stream's parameters are out of range.
var ErrInvalid = errors.New("checkstream: invalid stream parameters")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Stream is a stream's identity and geometry: all a generator needs, and
// all a checker learns from any one valid block.
type Stream struct {
	// ID names the stream; a block of another stream is corrupt.
	ID uint64
	// Size is the stream's length in bytes, at least HeaderSize.
	Size int64
	// Block is the block size: MinBlock..MaxBlock, a multiple of
	// BlockAlign.
	Block int
}

// Validate returns an error wrapping ErrInvalid naming the parameter that
// is out of range, or nil.
func (s Stream) Validate() error {
	if s.Block < MinBlock || s.Block > MaxBlock || s.Block%BlockAlign != 0 {
		return fmt.Errorf("%w: block size %d: want a multiple of %d from %d to %d bytes (e.g. 4KiB, 64KiB, 1MiB)",
			ErrInvalid, s.Block, BlockAlign, MinBlock, MaxBlock)
	}
	if s.Size < HeaderSize {
		return fmt.Errorf("%w: size %d: a stream is at least %d bytes (one block header)", ErrInvalid, s.Size, HeaderSize)
	}
	return nil
}

// Blocks returns how many blocks the stream has.
func (s Stream) Blocks() int64 {
	n := (s.Size + int64(s.Block) - 1) / int64(s.Block)
	if n > 1 && s.Size-(n-1)*int64(s.Block) < HeaderSize {
		n--
	}
	return n
}

// BlockAt returns the offset and length of block k (0 ≤ k < Blocks()).
func (s Stream) BlockAt(k int64) (off int64, n int) {
	off = k * int64(s.Block)
	if k == s.Blocks()-1 {
		return off, int(s.Size - off)
	}
	return off, s.Block
}

// header is a block's header, decoded.
type header struct {
	version, hdrlen uint16
	block           uint32
	id              uint64
	offset, size    uint64
	length          uint32
	crc             uint32
}

func decodeHeader(b []byte) (header, bool) {
	if len(b) < HeaderSize || string(b[:8]) != Magic {
		return header{}, false
	}
	le := binary.LittleEndian
	return header{
		version: le.Uint16(b[8:]), hdrlen: le.Uint16(b[10:]), block: le.Uint32(b[12:]),
		id: le.Uint64(b[16:]), offset: le.Uint64(b[24:]), size: le.Uint64(b[32:]),
		length: le.Uint32(b[40:]), crc: le.Uint32(b[44:]),
	}, true
}

// stream returns the stream a header describes, and whether its fields
// agree with each other (a known version, a valid geometry in which its
// offset starts a block of its length).
func (h header) stream() (Stream, bool) {
	if h.version != Version || h.hdrlen != HeaderSize || h.size > 1<<62 || h.offset > h.size {
		return Stream{}, false
	}
	s := Stream{ID: h.id, Size: int64(h.size), Block: int(h.block)}
	if s.Validate() != nil || int64(h.offset)%int64(s.Block) != 0 || int64(h.offset)/int64(s.Block) >= s.Blocks() {
		return Stream{}, false
	}
	if _, n := s.BlockAt(int64(h.offset) / int64(s.Block)); uint32(n) != h.length {
		return Stream{}, false
	}
	return s, true
}

// blockCRC returns the CRC32C of block b (its whole length) without its
// crc field.
func blockCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[:44])
	return crc32.Update(c, castagnoli, b[HeaderSize:])
}

// fill writes block k of s into b, which must be its length.
func (s Stream) fill(b []byte, off int64) {
	le := binary.LittleEndian
	copy(b, Magic)
	le.PutUint16(b[8:], Version)
	le.PutUint16(b[10:], HeaderSize)
	le.PutUint32(b[12:], uint32(s.Block))
	le.PutUint64(b[16:], s.ID)
	le.PutUint64(b[24:], uint64(off))
	le.PutUint64(b[32:], uint64(s.Size))
	le.PutUint32(b[40:], uint32(len(b)))
	payload(b[HeaderSize:], s.ID, off)
	le.PutUint32(b[44:], blockCRC(b))
}

// noZero sets the low bit of every byte of a payload word.
const noZero = 0x0101010101010101

// payload fills p with the payload of the block of stream id at off.
func payload(p []byte, id uint64, off int64) {
	x := mix(id ^ mix(uint64(off)+0x6a09e667f3bcc908))
	le := binary.LittleEndian
	for len(p) >= 8 {
		x += 0x9e3779b97f4a7c15
		le.PutUint64(p, mix(x)|noZero)
		p = p[8:]
	}
	if len(p) > 0 {
		var w [8]byte
		x += 0x9e3779b97f4a7c15
		le.PutUint64(w[:], mix(x)|noZero)
		copy(p, w[:])
	}
}

// mix is splitmix64's finaliser.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
