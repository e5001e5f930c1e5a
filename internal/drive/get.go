package drive

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"
)

// Get returns length bytes of block id's data starting at off (length -1:
// to the end), and the block's header. It checks the header CRC and the CRC
// of every segment the range touches, so a range in an intact segment of an
// otherwise damaged block still reads.
//
// Errors: ErrNotFound; *CorruptError (errors.Is ErrCorrupt) naming drive,
// block and segment for a checksum mismatch, a malformed header or a file
// truncated inside the range; ErrNewerFormat; ErrInvalid for a range outside
// [0, header.Length]; ctx.Err() wrapped; ErrClosed. The returned slice is
// the caller's.
func (d *Drive) Get(ctx context.Context, id BlockID, off, length int64) (data []byte, hdr BlockHeader, err error) {
	return d.get(ctx, id, off, length, nil)
}

// GetInto is Get of len(dst) bytes at off into dst, which it returns
// filled (a range of whole segments, or one ending at the block's end, is
// read straight into it; others through a scratch buffer): a reader
// assembling a stripe from units saves the copy and the allocation of
// each unit. Errors are Get's; dst's contents are undefined after one.
func (d *Drive) GetInto(ctx context.Context, id BlockID, off int64, dst []byte) ([]byte, BlockHeader, error) {
	return d.get(ctx, id, off, int64(len(dst)), dst)
}

// spanPool recycles the segment-aligned scratch buffers of reads of part
// of a segment (a 4 KiB read checks and so reads its whole 64 KiB
// segment; only the 4 KiB are handed back).
var spanPool sync.Pool

func (d *Drive) get(ctx context.Context, id BlockID, off, length int64, dst []byte) (data []byte, hdr BlockHeader, err error) {
	if err := d.checkOpen(); err != nil {
		return nil, hdr, err
	}
	start := d.counters.begin(OpRead)
	var moved int64
	defer func() { d.counters.end(OpRead, start, moved, err != nil) }()
	if err := ctx.Err(); err != nil {
		return nil, hdr, fmt.Errorf("drive %v: get block %v: %w", d.ID(), id, err)
	}
	f, err := d.openBlock(id)
	if err != nil {
		return nil, hdr, err
	}
	defer f.Close()
	cached := false
	if d.headers != nil {
		hdr, cached = d.headers.get(id)
	}
	if !cached {
		hdr, err = d.readHeaderOnly(f, id)
		moved += int64(HeaderAlign)
		if err != nil {
			return nil, hdr, err
		}
		if d.headers != nil {
			d.headers.put(hdr)
		}
	}
	if length == -1 && off >= 0 && off <= hdr.Length {
		length = hdr.Length - off
	}
	if off < 0 || length < 0 || off > hdr.Length || length > hdr.Length-off {
		return nil, hdr, fmt.Errorf("%w: drive %v block %v: range [%d, +%d) outside its %d bytes",
			ErrInvalid, d.ID(), id, off, length, hdr.Length)
	}
	if length == 0 {
		return []byte{}, hdr, nil
	}
	seg := int64(hdr.SegmentSize)
	first, last := off/seg, (off+length-1)/seg
	spanStart, spanEnd := first*seg, min((last+1)*seg, hdr.Length)
	var buf []byte
	pooled := false
	switch {
	case dst != nil && spanStart == off && spanEnd == off+length:
		buf = dst // whole segments: straight into the caller's buffer
	case spanEnd-spanStart == length:
		buf = make([]byte, length)
	default:
		// Part of the span is wanted: read it into scratch, hand back a
		// copy of the part.
		if p, ok := spanPool.Get().(*[]byte); ok && int64(cap(*p)) >= spanEnd-spanStart {
			buf = (*p)[:spanEnd-spanStart]
		} else {
			buf = make([]byte, spanEnd-spanStart, max(spanEnd-spanStart, 2*SegmentSize))
		}
		pooled = true
	}
	if pooled {
		defer func() { spanPool.Put(&buf) }()
	}
	direct := false
	n, rerr := d.readAt(f, buf, int64(hdr.HeaderLength())+spanStart, &direct)
	moved += int64(n)
	if rerr != nil && !errors.Is(rerr, io.EOF) {
		return nil, hdr, fmt.Errorf("drive %v: reading block %v: %w", d.ID(), id, rerr)
	}
	if err := d.checkSegments(&hdr, buf[:n], int(first), spanEnd-spanStart); err != nil {
		return nil, hdr, err
	}
	part := buf[off-spanStart : off-spanStart+length]
	if !pooled {
		return part, hdr, nil
	}
	if dst == nil {
		dst = make([]byte, length)
	}
	copy(dst, part)
	return dst, hdr, nil
}

// checkSegments verifies the segments held in b, which starts at the
// beginning of segment first and should hold want bytes; fewer means the
// file is truncated.
func (d *Drive) checkSegments(h *BlockHeader, b []byte, first int, want int64) error {
	seg := int(h.SegmentSize)
	tab := castagnoli()
	for s := 0; int64(s) < want; s += seg {
		idx := first + s/seg
		end := min(int64(s+seg), want)
		if end > int64(len(b)) {
			return d.corrupt(h.ID, idx, "truncated: the file ends %d bytes into this segment, the header says %d bytes of data",
				max(len(b)-s, 0), h.Length)
		}
		if got, stored := crc32.Checksum(b[s:end], tab), h.SegmentCRCs[idx]; got != stored {
			return d.corrupt(h.ID, idx, "crc mismatch: stored %08x, computed %08x", stored, got)
		}
	}
	return nil
}

// Stat returns block id's header (checked against its CRC), its file size
// and modification time, without reading its data. Errors: ErrNotFound,
// *CorruptError for a bad header, ErrNewerFormat, ErrClosed.
func (d *Drive) Stat(id BlockID) (BlockHeader, int64, time.Time, error) {
	if err := d.checkOpen(); err != nil {
		return BlockHeader{}, 0, time.Time{}, err
	}
	f, err := d.openBlock(id)
	if err != nil {
		return BlockHeader{}, 0, time.Time{}, err
	}
	defer f.Close()
	hdr, info, err := d.readHeader(f, id)
	if err != nil {
		return hdr, 0, time.Time{}, err
	}
	return hdr, info.Size(), info.ModTime(), nil
}

// Verify reads all of block id and checks the header CRC, every segment CRC
// and the file size (a truncated file or trailing bytes are corrupt). It
// returns nil for an intact block, a *CorruptError naming the first bad
// segment, ErrNotFound, ErrNewerFormat, ctx.Err() wrapped or ErrClosed. It
// streams through a bounded buffer and counts as a read.
func (d *Drive) Verify(ctx context.Context, id BlockID) (err error) {
	if err := d.checkOpen(); err != nil {
		return err
	}
	start := d.counters.begin(OpRead)
	var moved int64
	defer func() { d.counters.end(OpRead, start, moved, err != nil) }()
	f, err := d.openBlock(id)
	if err != nil {
		return err
	}
	defer f.Close()
	hdr, info, err := d.readHeader(f, id)
	moved += int64(HeaderAlign)
	if err != nil {
		return err
	}
	return d.checkData(ctx, f, &hdr, info, &moved, true)
}

// checkData reads the data of block file f, whose header hdr and stat
// info are known, once, and checks every segment's CRC and that nothing
// follows the data; it adds the bytes read to *moved. A mismatch is a
// *CorruptError. direct reads around the page cache where it can
// (readAt): a scan checks the drive, not what the page cache holds; the
// check of a block just written through the cache reads the cache.
func (d *Drive) checkData(ctx context.Context, f *os.File, hdr *BlockHeader, info fs.FileInfo, moved *int64, direct bool) error {
	id := hdr.ID
	bp := d.bufs.Get().(*[]byte)
	defer d.bufs.Put(bp)
	buf := (*bp)[:ioBufferSize/int(hdr.SegmentSize)*int(hdr.SegmentSize)]
	hlen := int64(hdr.HeaderLength())
	var on *bool // nil: through the page cache
	if direct {
		on = new(bool)
	}
	for off := int64(0); off < hdr.Length; off += int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("drive %v: verify block %v: %w", d.ID(), id, err)
		}
		want := min(int64(len(buf)), hdr.Length-off)
		n, rerr := d.readAt(f, buf[:want], hlen+off, on)
		*moved += int64(n)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("drive %v: reading block %v: %w", d.ID(), id, rerr)
		}
		if err := d.checkSegments(hdr, buf[:n], int(off/int64(hdr.SegmentSize)), want); err != nil {
			return err
		}
	}
	if extra := info.Size() - hlen - hdr.Length; extra > 0 {
		return d.corrupt(id, segmentCount(hdr.Length, hdr.SegmentSize)-1,
			"%d trailing bytes after the %d bytes of data", extra, hdr.Length)
	}
	return nil
}

// openBlock opens block id's file for reading; ErrNotFound if missing.
func (d *Drive) openBlock(id BlockID) (*os.File, error) {
	_, path := d.blockPath(id)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: drive %v block %v", ErrNotFound, d.ID(), id)
	}
	if err != nil {
		return nil, fmt.Errorf("drive %v: opening block %v: %w", d.ID(), id, err)
	}
	return f, nil
}

// readHeaderFile reads and checks the header of the block file at path.
func (d *Drive) readHeaderFile(path string, id BlockID) (BlockHeader, fs.FileInfo, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return BlockHeader{}, nil, fmt.Errorf("%w: drive %v block %v", ErrNotFound, d.ID(), id)
	}
	if err != nil {
		return BlockHeader{}, nil, fmt.Errorf("drive %v: opening block %v: %w", d.ID(), id, err)
	}
	defer f.Close()
	return d.readHeader(f, id)
}

// readHeader reads, decodes and checks the header of block file f, which
// must be block id's.
func (d *Drive) readHeader(f *os.File, id BlockID) (BlockHeader, fs.FileInfo, error) {
	info, err := f.Stat()
	if err != nil {
		return BlockHeader{}, nil, fmt.Errorf("drive %v: stat block %v: %w", d.ID(), id, err)
	}
	hdr, err := d.readHeaderOnly(f, id)
	return hdr, info, err
}

// readHeaderOnly is readHeader without the file's information (one system
// call less on every read).
func (d *Drive) readHeaderOnly(f *os.File, id BlockID) (BlockHeader, error) {
	buf := make([]byte, minHeaderReadLen)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return BlockHeader{}, fmt.Errorf("drive %v: reading block %v: %w", d.ID(), id, err)
	}
	buf = buf[:n]
	if !slices.ContainsFunc(buf, func(b byte) bool { return b != 0 }) {
		return BlockHeader{}, d.corrupt(id, HeaderSegment, "%s: %d bytes read", tornReason, n)
	}
	hlen, err := headerLengthOf(buf)
	if err != nil {
		return BlockHeader{}, d.corrupt(id, HeaderSegment, "%v", err)
	}
	if hlen > n && n == minHeaderReadLen {
		buf = append(buf, make([]byte, hlen-n)...)
		m, err := f.ReadAt(buf[n:], int64(n))
		if err != nil && !errors.Is(err, io.EOF) {
			return BlockHeader{}, fmt.Errorf("drive %v: reading block %v: %w", d.ID(), id, err)
		}
		buf = buf[:n+m]
	}
	hdr, err := decodeBlockHeader(buf)
	var newer errNewerBlock
	if errors.As(err, &newer) {
		return BlockHeader{}, fmt.Errorf("%w: drive %v block %v: %v; upgrade weft", ErrNewerFormat, d.ID(), id, err)
	}
	if err != nil {
		return BlockHeader{}, d.corrupt(id, HeaderSegment, "%v", err)
	}
	if hdr.ID != id {
		return BlockHeader{}, d.corrupt(id, HeaderSegment, "header names block %v", hdr.ID)
	}
	return hdr, nil
}

func (d *Drive) corrupt(id BlockID, seg int, format string, args ...any) *CorruptError {
	return &CorruptError{Drive: d.ID(), Block: id, Segment: seg, Reason: fmt.Sprintf(format, args...)}
}
