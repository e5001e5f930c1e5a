package client

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/meta"
)

// Holes. A file's bytes that were never written, or were zeroed, store
// nothing:
//
//   - a stripe without a map is a hole and reads as zeros: stripes never
//     written have none, a punched range drops the maps of the stripes it
//     covers (meta.DropStripes, their blocks to the delete queue), and a
//     write-out whose stripe bytes are all zeros commits the stripe as a
//     hole (meta.StripeUpdate.Drop) instead of storing them;
//   - a stripe stores its bytes only up to its last non-zero byte (its
//     DataLen): the zeros after it read back as zeros without being
//     stored.
//
// Zeros before data within a stripe are stored: the erasure layout fills
// data unit 0 first, and marking units as absent would change the stripe
// map format for the little it saves (the writes of a sparse file are
// mostly stripe-aligned, and docs/architecture.md has the measurements).
// SEEK_DATA and SEEK_HOLE therefore see data from a stripe's start to its
// DataLen (or the end of its buffered writes).

// dataEnd returns the length of b without its trailing zero bytes.
func dataEnd(b []byte) int {
	const chunk = 64 << 10
	end := len(b)
	for end > 0 {
		lo := max(0, end-chunk)
		if !allZero(b[lo:end]) {
			for b[end-1] == 0 {
				end--
			}
			return end
		}
		end = lo
	}
	return 0
}

// allZero reports whether every byte of b is zero: b[0] is, and b equals
// itself shifted by one byte (memequal's vector loop, no zero buffer).
func allZero(b []byte) bool {
	return len(b) == 0 || b[0] == 0 && bytes.Equal(b[1:], b[:len(b)-1])
}

// checkRange refuses a negative offset, a length below one or a range
// past the largest offset, for what.
func (f *File) checkRange(what string, off, n int64) error {
	if off < 0 || n <= 0 || off+n < off {
		return fmt.Errorf("%w: %s of %d bytes at offset %d of LIN %d: want an offset of 0 or more and a length of 1 or more", ErrInvalid, what, n, off, f.ino.lin)
	}
	return nil
}

// Allocate is fallocate(2) mode 0 (keepSize false) and FALLOC_FL_KEEP_SIZE
// (true): it grows the file to off+n bytes if it is shorter (the new bytes
// are a hole) unless keepSize, and it reserves nothing. Weft has no space
// reservation: a later write of the range can fail with ErrNoSpace as any
// write can, and the range stores nothing until it is written. The size
// change is committed when Allocate returns. Errors: ErrReadOnly,
// ErrClosed, ErrInvalid (negative offset, length below 1), meta's.
func (f *File) Allocate(ctx context.Context, off, n int64, keepSize bool) error {
	if err := f.check(true); err != nil {
		return err
	}
	if err := f.checkRange("allocate", off, n); err != nil {
		return err
	}
	if keepSize {
		return nil
	}
	return f.ino.extend(ctx, off+n)
}

// extend grows the file to size bytes if it is shorter, in meta at once
// (meta.Extend: never shrinks what another client grew).
func (ino *inode) extend(ctx context.Context, size int64) error {
	ino.mu.Lock()
	cur := ino.size
	ino.mu.Unlock()
	if size <= cur {
		// This client knows the file is that long already (buffered
		// writes commit their own size).
		return nil
	}
	a, err := ino.c.meta.Extend(ctx, ino.lin, uint64(size))
	if err != nil {
		return fmt.Errorf("client: extend LIN %d to %d bytes: %w", ino.lin, size, err)
	}
	ino.mu.Lock()
	ino.size = max(ino.size, int64(a.Size))
	ino.mu.Unlock()
	return nil
}

// Zero makes the n bytes at off read as zeros: FALLOC_FL_PUNCH_HOLE
// (keepSize true) and FALLOC_FL_ZERO_RANGE (keepSize as its KEEP_SIZE
// flag; without it the file grows to off+n bytes). Stripes wholly inside
// the range (up to the end of file) become holes at once, committed in
// meta like a truncate, with their blocks freed through the delete queue;
// the parts of the stripes at its edges are overwritten with zeros through
// the write buffer, durable after the next Flush or Sync like any write
// (a stripe left with zeros only is then committed as a hole, and one
// with zeros after its data is stored up to its data). Buffered writes in
// the range are dropped or zeroed. Bytes past the end of file are zeros
// already.
//
// Write-outs in progress finish first and writes wait while the stripes
// are dropped, as for Truncate. Errors: ErrReadOnly, ErrClosed,
// ErrInvalid, the write path's (ErrUnavailable, ErrNoSpace, ErrConflict),
// meta's.
func (f *File) Zero(ctx context.Context, off, n int64, keepSize bool) error {
	if err := f.check(true); err != nil {
		return err
	}
	if err := f.checkRange("zeroing", off, n); err != nil {
		return err
	}
	ino := f.ino
	end := off + n
	size, err := ino.sizeForRead(ctx, end)
	if err != nil {
		return err
	}
	if zend := min(end, size); off < zend {
		ss := ino.ss
		first := (off + ss - 1) / ss // first stripe wholly inside
		last := zend / ss            // stripes [first, last) are
		if zend == size {
			last = (size + ss - 1) / ss // the stripe holding the end: all of its data
		}
		if first < last {
			if err := ino.dropStripes(ctx, first, last); err != nil {
				return err
			}
		}
		for _, idx := range []int64{off / ss, (zend - 1) / ss} {
			if idx >= first && idx < last {
				continue
			}
			lo, hi := max(off, idx*ss)-idx*ss, min(zend, (idx+1)*ss)-idx*ss
			if err := f.zeroWithin(ctx, idx, lo, hi); err != nil {
				return err
			}
			if off/ss == (zend-1)/ss {
				break // one edge stripe
			}
		}
	}
	if keepSize {
		return nil
	}
	return ino.extend(ctx, end)
}

// zeroWithin writes zeros over the bytes [lo, hi) of stripe idx that hold
// data (stored or buffered); the rest of the range reads as zeros already.
func (f *File) zeroWithin(ctx context.Context, idx, lo, hi int64) error {
	ino := f.ino
	s, ok, err := ino.stripe(ctx, idx, true)
	if err != nil {
		return err
	}
	var l int64
	if ok {
		l = int64(s.DataLen)
	}
	ino.mu.Lock()
	l = max(l, ino.bufferedEndLocked(idx))
	ino.mu.Unlock()
	hi = min(hi, l)
	if lo >= hi {
		return nil
	}
	_, err = f.WriteAt(ctx, make([]byte, hi-lo), idx*ino.ss+lo)
	return err
}

// bufferedEndLocked is the end of the bytes buffered for stripe idx
// (dirty or being written out), 0 if none.
func (ino *inode) bufferedEndLocked(idx int64) int64 {
	var end int
	if d := ino.dirty[idx]; d != nil {
		end = d.ext.end()
	}
	if d := ino.inflight[idx]; d != nil {
		end = max(end, d.ext.end())
	}
	return int64(end)
}

// dropStripes makes stripes [first, last) holes: it waits for the file's
// write-outs in progress, holds writes off, has meta drop their maps and
// then drops the buffered writes of those stripes.
func (ino *inode) dropStripes(ctx context.Context, first, last int64) error {
	done, err := ino.exclusive(ctx)
	if err != nil {
		return err
	}
	// The buffered writes of the range are dropped below, after the
	// commit: the size they would have committed (they may extend the
	// file) goes with it.
	var size int64
	for idx, d := range ino.dirty {
		if idx >= first && idx < last {
			size = max(size, idx*ino.ss+int64(d.ext.end()))
		}
	}
	ino.mu.Unlock()
	// Failpoint client/before-punch: nothing is dropped.
	err = failpoint.Eval("client/before-punch")
	if err == nil {
		_, err = ino.c.meta.DropStripes(ctx, ino.lin, uint64(first), uint64(last), uint64(size))
		// Failpoint client/after-punch: the stripes are dropped and
		// their blocks queued (in the same transactions), but the caller
		// is not told; its error is a reply lost after the commit.
		if err == nil {
			err = failpoint.Eval("client/after-punch")
		}
	}
	ino.mu.Lock()
	if err == nil {
		// The range's buffered writes go only now: a punch that failed
		// leaves them to be written out, over whatever it dropped.
		for idx, d := range ino.dirty {
			if idx >= first && idx < last {
				ino.dropLocked(d)
				delete(ino.dirty, idx)
			}
		}
	}
	// Either way the maps may have changed (a long range is dropped in
	// several transactions).
	ino.clearMapsLocked()
	ino.cache.clearLocked()
	done()
	if err != nil {
		return fmt.Errorf("client: punching stripes [%d, %d) of LIN %d: %w", first, last, ino.lin, err)
	}
	return nil
}

// seekPage is how many stripe maps a seek reads at once.
const seekPage = 256

// dataCursor finds the stripes of a file that hold data, from its stored
// maps (read in pages, holes absent) and the buffered writes of this
// Client (a snapshot taken by newDataCursor).
type dataCursor struct {
	ino      *inode
	page     []meta.Stripe
	from     int64 // page holds the stripes in [from, upto) with data
	upto     int64 // -1: every stripe from from on
	buffered []int64
	bufEnd   map[int64]int64
}

func (ino *inode) newDataCursor() *dataCursor {
	c := &dataCursor{ino: ino, from: -1, bufEnd: map[int64]int64{}}
	ino.mu.Lock()
	for idx := range ino.dirty {
		c.bufEnd[idx] = ino.bufferedEndLocked(idx)
	}
	for idx := range ino.inflight {
		c.bufEnd[idx] = ino.bufferedEndLocked(idx)
	}
	ino.mu.Unlock()
	for idx, end := range c.bufEnd {
		if end > 0 {
			c.buffered = append(c.buffered, idx)
		}
	}
	sort.Slice(c.buffered, func(i, j int) bool { return c.buffered[i] < c.buffered[j] })
	return c
}

// next returns the first stripe at or after idx that holds data, and the
// length of its data from the stripe's start; ok false if none does.
func (c *dataCursor) next(ctx context.Context, idx int64) (j, l int64, ok bool, err error) {
	j, ok = -1, false
	for {
		if c.from < 0 || idx < c.from || (c.upto >= 0 && idx >= c.upto) {
			ss, err := c.ino.c.meta.GetStripes(ctx, c.ino.lin, uint64(idx), seekPage)
			if err != nil {
				return 0, 0, false, fmt.Errorf("client: seeking in LIN %d from stripe %d: %w", c.ino.lin, idx, err)
			}
			c.page, c.from, c.upto = ss, idx, -1
			if len(ss) == seekPage {
				c.upto = int64(ss[len(ss)-1].Index) + 1
			}
		}
		i := sort.Search(len(c.page), func(i int) bool { return int64(c.page[i].Index) >= idx })
		for ; i < len(c.page) && c.page[i].DataLen == 0; i++ {
		}
		if i < len(c.page) {
			j, l, ok = int64(c.page[i].Index), int64(c.page[i].DataLen), true
			break
		}
		if c.upto < 0 {
			break
		}
		idx = c.upto
	}
	if i := sort.Search(len(c.buffered), func(i int) bool { return c.buffered[i] >= idx }); i < len(c.buffered) {
		b := c.buffered[i]
		switch {
		case !ok || b < j:
			j, l, ok = b, c.bufEnd[b], true
		case b == j:
			l = max(l, c.bufEnd[b])
		}
	}
	return j, l, ok, nil
}

// SeekData returns the first offset at or after off that holds data
// (lseek SEEK_DATA), with this Client's buffered writes: the start of the
// first stripe holding data at or after off, or off itself inside one.
// Zeros stored within a stripe count as data. Errors: ErrNoData when off
// is at or past the end of file or only holes follow it; ErrClosed;
// ErrInvalid (negative off); meta's.
func (f *File) SeekData(ctx context.Context, off int64) (int64, error) {
	if err := f.check(false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("%w: SEEK_DATA from offset %d", ErrInvalid, off)
	}
	ino := f.ino
	size, err := ino.sizeForRead(ctx, off)
	if err != nil {
		return 0, err
	}
	if off >= size {
		return 0, fmt.Errorf("%w: SEEK_DATA from offset %d of LIN %d, %d bytes long", ErrNoData, off, ino.lin, size)
	}
	c := ino.newDataCursor()
	for idx := off / ino.ss; ; {
		j, l, ok, err := c.next(ctx, idx)
		if err != nil {
			return 0, err
		}
		start := j * ino.ss
		if !ok || start >= size {
			return 0, fmt.Errorf("%w: SEEK_DATA from offset %d of LIN %d: only holes up to its end at %d", ErrNoData, off, ino.lin, size)
		}
		if start+l > off {
			return max(off, start), nil
		}
		idx = j + 1
	}
}

// SeekHole returns the first offset at or after off in a hole (lseek
// SEEK_HOLE), with this Client's buffered writes: off itself in a stripe
// without data or past its data, the end of a stripe's data when it does
// not fill the stripe, or the end of file (a hole by definition). Errors:
// ErrNoData when off is at or past the end of file; ErrClosed; ErrInvalid
// (negative off); meta's.
func (f *File) SeekHole(ctx context.Context, off int64) (int64, error) {
	if err := f.check(false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, fmt.Errorf("%w: SEEK_HOLE from offset %d", ErrInvalid, off)
	}
	ino := f.ino
	size, err := ino.sizeForRead(ctx, off)
	if err != nil {
		return 0, err
	}
	if off >= size {
		return 0, fmt.Errorf("%w: SEEK_HOLE from offset %d of LIN %d, %d bytes long", ErrNoData, off, ino.lin, size)
	}
	c := ino.newDataCursor()
	pos := off
	for idx := off / ino.ss; pos < size; idx++ {
		j, l, ok, err := c.next(ctx, idx)
		if err != nil {
			return 0, err
		}
		if !ok || j != idx || idx*ino.ss+l <= pos {
			return pos, nil
		}
		pos = idx*ino.ss + l
		if l < ino.ss {
			break
		}
	}
	return min(pos, size), nil
}
