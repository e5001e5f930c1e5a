package client

import "sync"

// Buffers of dirty stripes.
//
// A stripe written from its start (a sequential writer, a small file) is
// dense: its bytes are in one buffer that grows by doubling up to a whole
// pooled stripe buffer, which a complete stripe is written out from
// without a copy. A stripe whose first write lands past its start, or past
// the end of its dense buffer, is sparse: its bytes are in chunkSize
// chunks allocated as they are written, so that a random writer's 4 KiB
// writes over thousands of stripes hold about what they wrote, not a
// stripe buffer each, and MaxDirty (counted in dstripe.mem) buffers that
// many more writes before a write-out. Only the bytes in dstripe.ext are
// meaningful in either kind.

// chunkSize is the granule of a sparse stripe's buffer: a page, the size
// of the kernel's small writes.
const chunkSize = 4 << 10

// denseSmall is how far into a stripe a write may end and keep the
// stripe dense whatever its offset: a small buffer is cheaper than a
// chunk table there.
const denseSmall = 64 << 10

// chunk is one piece of a sparse stripe's buffer.
type chunk [chunkSize]byte

// chunks recycles chunks of sparse stripes.
var chunks = sync.Pool{New: func() any { return new(chunk) }}

// ptrSize is the size of one entry of a sparse stripe's chunk table.
const ptrSize = 8

// mem is the bytes of memory d's buffers hold.
func (d *dstripe) mem() int64 {
	return int64(cap(d.buf)) + int64(d.nchunks)*chunkSize + int64(cap(d.chunks))*ptrSize
}

// put copies p into d at offset off (within the stripe), allocating what
// it needs and counting it (account); the caller adds the range to
// d.ext. A dense stripe stays dense while the write starts inside or at
// the end of its buffer, or ends within its capacity or within the
// stripe's first denseSmall bytes (an eighth of the stripe at most: a
// small file written out of order);
// otherwise it becomes sparse (its bytes are moved into chunks).
func (ino *inode) put(d *dstripe, off int, p []byte) {
	end := off + len(p)
	if d.chunks == nil && (off <= len(d.buf) || end <= max(cap(d.buf), min(denseSmall, int(ino.ss)/8))) {
		ino.grow(d, end)
		copy(d.buf[off:], p)
		return
	}
	if d.chunks == nil {
		ino.sparsify(d)
	}
	for len(p) > 0 {
		i, o := off/chunkSize, off%chunkSize
		c := d.chunks[i]
		if c == nil {
			c = chunks.Get().(*chunk)
			d.chunks[i] = c
			d.nchunks++
			ino.account(chunkSize)
		}
		n := copy(c[o:], p)
		p, off = p[n:], off+n
	}
}

// sparsify turns dense stripe d into a sparse one holding the same bytes.
func (ino *inode) sparsify(d *dstripe) {
	d.chunks = make([]*chunk, (int(ino.ss)+chunkSize-1)/chunkSize)
	ino.account(int64(cap(d.chunks)) * ptrSize)
	old := d.buf
	d.buf = nil
	for _, r := range d.ext {
		ino.put(d, r.lo, old[r.lo:r.hi])
	}
	ino.account(-int64(cap(old)))
	if cap(old) == int(ino.ss) {
		ino.c.bufs.put(old)
	}
}

// each calls fn with the bytes of d in [lo, hi), which d.ext covers, in
// order: pieces of its buffers (not to be kept) and their offsets.
func (d *dstripe) each(lo, hi int, fn func(off int, b []byte)) {
	if d.chunks == nil {
		fn(lo, d.buf[lo:hi])
		return
	}
	for lo < hi {
		i, o := lo/chunkSize, lo%chunkSize
		n := min(hi-lo, chunkSize-o)
		fn(lo, d.chunks[i][o:o+n])
		lo += n
	}
}

// copyTo copies the bytes of d in [lo, hi), which d.ext covers, to dst.
func (d *dstripe) copyTo(dst []byte, lo, hi int) {
	d.each(lo, hi, func(off int, b []byte) { copy(dst[off-lo:], b) })
}

// grow makes dense d.buf at least n bytes long, keeping its contents.
// Buffers of a whole stripe come from the pool; a stripe holding less
// than a quarter of a stripe (a small file) gets what it needs, doubling.
func (ino *inode) grow(d *dstripe, n int) {
	if n <= len(d.buf) {
		return
	}
	if n <= cap(d.buf) {
		d.buf = d.buf[:n]
		return
	}
	ss := int(ino.ss)
	newCap := max(n, 2*cap(d.buf), 4<<10)
	if newCap >= ss/4 {
		newCap = ss
	}
	var nb []byte
	if newCap == ss {
		nb = ino.c.bufs.get(ss)
	} else {
		nb = make([]byte, newCap)
	}
	copy(nb, d.buf)
	ino.account(int64(cap(nb) - cap(d.buf)))
	ino.release(d)
	d.buf = nb[:n]
}

// release returns d's buffers to their pools; the caller updates
// buffered.
func (ino *inode) release(d *dstripe) {
	if cap(d.buf) == int(ino.ss) {
		ino.c.bufs.put(d.buf)
	}
	d.buf = nil
	for _, c := range d.chunks {
		if c != nil {
			chunks.Put(c)
		}
	}
	d.chunks, d.nchunks = nil, 0
}

// dropLocked forgets a buffered stripe.
func (ino *inode) dropLocked(d *dstripe) {
	ino.account(-d.mem())
	ino.release(d)
}

// account counts n more bytes of buffers (negative: fewer) in the file's
// and the Client's totals.
func (ino *inode) account(n int64) {
	ino.buffered += n
	ino.c.dirty.Add(n)
}
