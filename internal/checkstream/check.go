package checkstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Class is what a checked byte is.
type Class string

// The classes of a check's extents.
const (
	// Valid: the stream's own byte at its own offset.
	Valid Class = "valid"
	// Zero: a zero byte where the stream has data (the stream's payload
	// has no zero byte; a zero run takes in the header's zero bytes at
	// its edges).
	Zero Class = "zero"
	// Corrupt: anything else — a byte that differs, a block of another
	// offset (misplaced) or of another stream, a block of an unknown
	// format version, data past the stream's end.
	Corrupt Class = "corrupt"
	// Missing: the data ends before the size its blocks state.
	Missing Class = "missing"
)

// Extent is a run of bytes of one class.
type Extent struct {
	Class  Class `json:"class"`
	Offset int64 `json:"offset"`
	Bytes  int64 `json:"bytes"`
	// Note says what is wrong with a corrupt or missing extent.
	Note string `json:"note,omitempty"`
}

// StreamInfo is the stream a check found, as reported.
type StreamInfo struct {
	ID     string `json:"id"` // 16 hex digits
	Size   int64  `json:"size"`
	Block  int    `json:"block"`
	Blocks int64  `json:"blocks"`
}

// Report is the result of a check: the stream found, the extents in
// offset order (adjacent ones of one class and note merged) and the byte
// count of each class.
type Report struct {
	// Stream is nil when no valid block was found to learn it from.
	Stream *StreamInfo `json:"stream"`
	// Read is how many bytes were read.
	Read    int64    `json:"read"`
	Valid   int64    `json:"valid"`
	Zero    int64    `json:"zero"`
	Corrupt int64    `json:"corrupt"`
	Missing int64    `json:"missing"`
	Extents []Extent `json:"extents"`
	// OK is true when every byte of the stream is valid and nothing
	// follows it.
	OK bool `json:"ok"`
}

// Verdict is the report's one-line verdict, "checkstream: VALID N bytes
// (stream ID)" or "checkstream: FAILED valid=… zero=… corrupt=… missing=…".
func (r *Report) Verdict() string {
	if r.OK {
		return fmt.Sprintf("checkstream: VALID %d bytes (stream %s)", r.Valid, r.Stream.ID)
	}
	what := ""
	if r.Stream == nil {
		what = " (no valid block found: not a checkstream stream, or wholly damaged)"
	}
	return fmt.Sprintf("checkstream: FAILED valid=%d zero=%d corrupt=%d missing=%d%s", r.Valid, r.Zero, r.Corrupt, r.Missing, what)
}

// Options tune Check.
type Options struct {
	// ID, if set, is the stream expected: blocks of any other stream are
	// corrupt, and the stream's geometry is learnt from its blocks only.
	ID *uint64
}

// ScanLimit is how far into its input Check looks for a valid block to
// learn the stream's id, size and block size from: the first MaxBlock
// and more. A stream whose first ScanLimit bytes hold no valid block is
// reported wholly corrupt or zero.
const ScanLimit = 2*MaxBlock + HeaderSize

// minValidRun is the shortest run of matching bytes inside a damaged
// block counted valid between damaged bytes: a shorter one (random data
// matches the stream's byte once in 256) is counted with them.
const minValidRun = 8

// Check reads a stream from r to its end and reports what it holds. Only
// a read error other than the end of the input is returned as an error;
// every kind of damage is in the report.
func Check(r io.Reader, o Options) (*Report, error) {
	// Read the input's head, growing it until a block at its own offset
	// shows, the input ends or ScanLimit is reached.
	head := make([]byte, 0, 1<<20)
	var s Stream
	found, eof := false, false
	for !found && !eof && len(head) < ScanLimit {
		if len(head) == cap(head) {
			head = append(head, make([]byte, min(2*cap(head), ScanLimit)-len(head))...)[:len(head)]
		}
		n, err := io.ReadFull(r, head[len(head):cap(head)])
		head = head[:len(head)+n]
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			eof = true
		case err != nil:
			return nil, fmt.Errorf("checkstream: read at offset %d: %w", len(head), err)
		}
		s, found = discover(head, o.ID, eof || len(head) >= ScanLimit)
	}
	in := io.MultiReader(bytes.NewReader(head), r)
	c := &checker{rep: &Report{}}
	if !found {
		if err := c.unknown(in); err != nil {
			return nil, err
		}
		return c.rep, nil
	}
	c.s = s
	c.rep.Stream = &StreamInfo{ID: fmt.Sprintf("%016x", s.ID), Size: s.Size, Block: s.Block, Blocks: s.Blocks()}
	if err := c.run(in); err != nil {
		return nil, err
	}
	rep := c.rep
	rep.OK = rep.Valid == s.Size && rep.Read == s.Size
	return rep, nil
}

// discover finds the stream in the input's first bytes: from the first
// block whose checksum holds and that sits at its own offset; else, if
// final (buf is all of the head there will be), from the first block
// whose checksum holds (a misplaced one), else from a plausible header at
// its own offset whose block the input cuts short.
func discover(buf []byte, want *uint64, final bool) (Stream, bool) {
	var misplaced, cut *Stream
	for p := 0; p+HeaderSize <= len(buf); p += BlockAlign {
		h, ok := decodeHeader(buf[p:])
		if !ok {
			continue
		}
		s, ok := h.stream()
		if !ok || (want != nil && s.ID != *want) {
			continue
		}
		if p+int(h.length) > len(buf) {
			if cut == nil && h.offset == uint64(p) {
				cut = &s
			}
			continue
		}
		if blockCRC(buf[p:p+int(h.length)]) != h.crc {
			continue
		}
		if h.offset == uint64(p) {
			return s, true
		}
		if misplaced == nil {
			misplaced = &s
		}
	}
	switch {
	case !final:
	case misplaced != nil:
		return *misplaced, true
	case cut != nil:
		return *cut, true
	}
	return Stream{}, false
}

// checker is one check's state.
type checker struct {
	s   Stream
	rep *Report
	// exp holds a block as it should be; zero a block of zeros; cls the
	// classes of a damaged block's bytes.
	exp, zero []byte
	cls       []byte
}

// add appends an extent, merging it into the last one if that is of the
// same class and note and ends where it starts.
func (c *checker) add(cl Class, off, n int64, note string) {
	if n <= 0 {
		return
	}
	r := c.rep
	switch cl {
	case Valid:
		r.Valid += n
	case Zero:
		r.Zero += n
	case Corrupt:
		r.Corrupt += n
	case Missing:
		r.Missing += n
	}
	if k := len(r.Extents) - 1; k >= 0 {
		if l := &r.Extents[k]; l.Class == cl && l.Note == note && l.Offset+l.Bytes == off {
			l.Bytes += n
			return
		}
	}
	r.Extents = append(r.Extents, Extent{Class: cl, Offset: off, Bytes: n, Note: note})
}

// lastIs reports whether the last extent is of class cl and ends at off.
func (c *checker) lastIs(cl Class, off int64) bool {
	k := len(c.rep.Extents) - 1
	return k >= 0 && c.rep.Extents[k].Class == cl && c.rep.Extents[k].Offset+c.rep.Extents[k].Bytes == off
}

// run checks the stream block by block, then what follows its end.
func (c *checker) run(br io.Reader) error {
	s := c.s
	buf := make([]byte, s.Block+HeaderSize)
	c.exp = make([]byte, s.Block+HeaderSize)
	c.zero = make([]byte, s.Block+HeaderSize)
	c.cls = make([]byte, s.Block+HeaderSize)
	for k, nb := int64(0), s.Blocks(); k < nb; k++ {
		off, n := s.BlockAt(k)
		m, err := io.ReadFull(br, buf[:n])
		c.rep.Read += int64(m)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("checkstream: read at offset %d: %w", off+int64(m), err)
		}
		if m == n {
			c.block(buf[:n], off)
			continue
		}
		if m > 0 {
			s.fill(c.exp[:n], off)
			c.damaged(buf[:m], c.exp[:m], off)
		}
		end := off + int64(m)
		c.add(Missing, end, s.Size-end, fmt.Sprintf("the data ends at %d; its blocks say the stream is %d bytes", end, s.Size))
		return nil
	}
	// What follows the stream's end.
	note := fmt.Sprintf("past the stream's end (%d bytes)", s.Size)
	for {
		m, err := br.Read(buf)
		if m > 0 {
			c.add(Corrupt, c.rep.Read, int64(m), note)
			c.rep.Read += int64(m)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("checkstream: read at offset %d: %w", c.rep.Read, err)
		}
	}
}

// block checks one whole block b read at offset off.
func (c *checker) block(b []byte, off int64) {
	s := c.s
	if h, ok := decodeHeader(b); ok && h.crc == blockCRC(b) {
		hs, hok := h.stream()
		switch {
		case hok && hs == s && h.offset == uint64(off):
			exp := c.exp[:len(b)-HeaderSize]
			payload(exp, s.ID, off)
			if bytes.Equal(b[HeaderSize:], exp) {
				c.add(Valid, off, int64(len(b)), "")
				return
			}
			c.add(Corrupt, off, int64(len(b)), "a checksummed block whose payload is not the stream's")
			return
		case !hok && h.version != Version:
			c.add(Corrupt, off, int64(len(b)), fmt.Sprintf("a block of format version %d, which this weft does not know", h.version))
			return
		case hok && hs.ID != s.ID:
			c.add(Corrupt, off, int64(len(b)), fmt.Sprintf("a block of another stream (%016x)", hs.ID))
			return
		case hok && h.offset != uint64(off):
			c.add(Corrupt, off, int64(len(b)), fmt.Sprintf("misplaced: holds the block of offset %d", h.offset))
			return
		}
		// A valid header of this id with another geometry: damaged.
	}
	if bytes.Equal(b, c.zero[:len(b)]) {
		c.add(Zero, off, int64(len(b)), "")
		return
	}
	s.fill(c.exp[:len(b)], off)
	c.damaged(b, c.exp[:len(b)], off)
}

// Byte classes of a damaged block.
const (
	bValid = iota
	bZero
	bCorrupt
	bBoth // zero, and zero in the stream too (a header's zero byte)
)

// damaged classifies a damaged block's bytes b (or those of it the input
// held) against exp, the block as it should be, byte by byte: equal is
// valid, zero is zero, anything else corrupt. A zero byte that is zero in
// the stream too joins a zero run next to it, else it is valid; a valid
// run shorter than minValidRun between damaged bytes is corrupt.
func (c *checker) damaged(b, exp []byte, off int64) {
	cls := c.cls[:len(b)]
	for i := range b {
		switch {
		case b[i] == exp[i] && b[i] == 0:
			cls[i] = bBoth
		case b[i] == exp[i]:
			cls[i] = bValid
		case b[i] == 0:
			cls[i] = bZero
		default:
			cls[i] = bCorrupt
		}
	}
	for i := 0; i < len(cls); {
		if cls[i] != bBoth {
			i++
			continue
		}
		j := i
		for j < len(cls) && cls[j] == bBoth {
			j++
		}
		to := byte(bValid)
		if (i > 0 && cls[i-1] == bZero) || (i == 0 && c.lastIs(Zero, off)) || (j < len(cls) && cls[j] == bZero) {
			to = bZero
		}
		for k := i; k < j; k++ {
			cls[k] = to
		}
		i = j
	}
	for i := 0; i < len(cls); {
		j := i
		for j < len(cls) && cls[j] == cls[i] {
			j++
		}
		if cls[i] == bValid && j-i < minValidRun && i > 0 && j < len(cls) {
			for k := i; k < j; k++ {
				cls[k] = bCorrupt
			}
		}
		i = j
	}
	for i := 0; i < len(cls); {
		j := i
		for j < len(cls) && cls[j] == cls[i] {
			j++
		}
		switch cls[i] {
		case bValid:
			c.add(Valid, off+int64(i), int64(j-i), "")
		case bZero:
			c.add(Zero, off+int64(i), int64(j-i), "")
		default:
			c.add(Corrupt, off+int64(i), int64(j-i), "differs from the stream's data")
		}
		i = j
	}
}

// unknown reports input in which no stream was found: zero runs and
// corrupt runs, to its end.
func (c *checker) unknown(br io.Reader) error {
	buf := make([]byte, 1<<20)
	for {
		m, err := br.Read(buf)
		for i := 0; i < m; {
			j := i
			z := buf[i] == 0
			for j < m && (buf[j] == 0) == z {
				j++
			}
			if z {
				c.add(Zero, c.rep.Read+int64(i), int64(j-i), "")
			} else {
				c.add(Corrupt, c.rep.Read+int64(i), int64(j-i), "no valid block of a stream found")
			}
			i = j
		}
		c.rep.Read += int64(m)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("checkstream: read at offset %d: %w", c.rep.Read, err)
		}
	}
}
