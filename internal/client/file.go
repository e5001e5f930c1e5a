package client

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/qos"
)

// File is one open handle of a regular file. Handles of the same LIN in
// one Client share the file's state (see Client), so a handle reads what
// another wrote, buffered or not. A File is safe for concurrent use.
//
// Writes are buffered per stripe (sparse for a random writer, see
// dstripe) and written out in the background as soon as a stripe is
// complete; partial stripes are written by Flush, Sync and Close, and
// the dirtiest of them in the background once the buffered bytes pass
// three quarters of MaxDirty or MaxDirtyTotal (see makeRoom). A write is
// durable once a Flush, Sync or Close that follows it returns nil.
type File struct {
	c        *Client
	ino      *inode
	writable bool

	mu      sync.Mutex // guards the fields below
	closed  bool
	pattern readPattern // what the handle's reads look like
	queued  int64       // the furthest record prefetched for a strided reader
}

// Open returns a handle of regular file lin, for reading and, if writable,
// writing. It does not track the open in meta (the vfs layer does); it
// reads the file's attributes, and drops this client's cached stripe maps
// and data of lin so that the handle sees what other clients committed
// before (close-to-open consistency).
//
// The file's protection is its requested one, else its pool's
// (Topology.PoolProtection). Errors: ErrClosed; ErrInvalid for a LIN that
// is not a regular file or a protection the client cannot write; meta's
// errors (meta.ErrNotFound) wrapped.
func (c *Client) Open(ctx context.Context, lin meta.LIN, writable bool) (*File, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	a, err := c.meta.GetAttr(ctx, lin)
	if err != nil {
		return nil, fmt.Errorf("client: open LIN %d: %w", lin, err)
	}
	return c.OpenAttr(ctx, a, writable)
}

// OpenAttr is Open for a caller that has just read the file's attributes
// (a create, a lookup): it saves Open's metadata read. a must be current.
func (c *Client) OpenAttr(ctx context.Context, a meta.Attr, writable bool) (*File, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	lin := a.LIN
	if a.Type != meta.TypeFile {
		return nil, fmt.Errorf("%w: LIN %d is a %s, not a regular file", ErrInvalid, lin, a.Type)
	}
	c.mu.Lock()
	ino := c.inodes[lin]
	if ino != nil {
		ino.refs++
	}
	c.mu.Unlock()
	if ino != nil {
		ino.reopen(a)
	} else {
		g, req, fromPool, err := c.geometry(ctx, a)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		ino = c.inodes[lin]
		fresh := ino == nil
		if fresh {
			ino = newInode(c, lin, a, req, fromPool, g)
			c.inodes[lin] = ino
		}
		ino.refs++
		c.mu.Unlock()
		if !fresh {
			ino.reopen(a)
		}
	}
	return &File{c: c, ino: ino, writable: writable}, nil
}

// reopen drops the caches of an inode opened again, and takes meta's size
// if it is larger than the one known here.
func (ino *inode) reopen(a meta.Attr) {
	ino.mu.Lock()
	defer ino.mu.Unlock()
	ino.size = max(ino.size, int64(a.Size))
	ino.clearMapsLocked()
	ino.cache.clearLocked()
}

// LIN returns the file's inode number.
func (f *File) LIN() meta.LIN { return f.ino.lin }

// check returns ErrClosed after Close, and ErrReadOnly for a write through
// a read-only handle.
func (f *File) check(write bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed:
		return fmt.Errorf("%w: LIN %d", ErrClosed, f.ino.lin)
	case write && !f.writable:
		return fmt.Errorf("%w: LIN %d", ErrReadOnly, f.ino.lin)
	}
	return f.c.closedErr()
}

// closedErr returns ErrClosed if the Client is closed.
func (c *Client) closedErr() error {
	if c.isClosed() {
		return ErrClosed
	}
	return nil
}

// Size returns the file size, including buffered writes of every handle of
// the file in this Client.
func (f *File) Size() int64 {
	f.ino.mu.Lock()
	defer f.ino.mu.Unlock()
	return f.ino.size
}

// WriteAt writes p at offset off, growing the file if it ends past the
// end; a gap before off reads as zeros. The data is buffered: it is
// visible at once to every handle of the file in this Client and durable
// after the next Flush, Sync or Close that returns nil. WriteAt waits
// while the file's buffered bytes would pass MaxDirty (or the Client's
// MaxDirtyTotal), for write-outs of its dirtiest stripes.
//
// It returns len(p), or 0 and an error: ErrReadOnly, ErrClosed, ErrInvalid
// (negative offset), or the write-out error that kept the buffered bytes
// over MaxDirty (ErrUnavailable, ErrNoSpace, ErrConflict), in which case
// nothing of p was buffered.
func (f *File) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := f.check(true); err != nil {
		return 0, err
	}
	if off < 0 || off+int64(len(p)) < off {
		return 0, fmt.Errorf("%w: write of %d bytes at offset %d", ErrInvalid, len(p), off)
	}
	ino := f.ino
	for n := 0; n < len(p); {
		pos := off + int64(n)
		idx, within := pos/ino.ss, int(pos%ino.ss)
		m := min(len(p)-n, int(ino.ss)-within)
		if err := ino.makeRoom(ctx, m); err != nil {
			if n == 0 {
				return 0, err
			}
			return n, err
		}
		ino.mu.Lock()
		for ino.truncating {
			if err := ino.waitLocked(ctx); err != nil {
				ino.mu.Unlock()
				return n, err
			}
		}
		full := ino.writeLocked(idx, within, p[n:n+m], qos.PIDOf(ctx))
		ino.size = max(ino.size, pos+int64(m))
		ino.mu.Unlock()
		f.c.st.bytesWritten.Add(int64(m))
		if full {
			// Stream the complete stripe out; if ctx ends while waiting for
			// a slot, the stripe stays buffered for the next flush.
			ino.startWrite(ctx, idx)
		}
		n += m
	}
	return len(p), nil
}

// ReadAt reads len(p) bytes at offset off, like os.File.ReadAt: it returns
// fewer bytes and io.EOF when the file ends first (0, io.EOF at or past the
// end), and holes read as zeros. It sees the buffered writes of every
// handle of the file in this Client.
//
// A unit that is missing, corrupt, or on a down or unreachable drive is
// reconstructed from the others (the stripe is noted as needing repair,
// see NeedsRepair). Errors: ErrUnavailable when too few units of a stripe
// can be read; ErrClosed; ErrInvalid (negative offset); meta errors.
func (f *File) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	b, err := f.read(ctx, p, off, false)
	return len(b), err
}

// ReadAtView is ReadAt, except that the bytes it returns may be, instead
// of p filled, a view of the Client's stripe cache: a read within one
// stripe the cache holds, with nothing buffered over it, is not copied.
// A view is never written again (cached stripes are replaced, not
// changed), so the caller may keep it; it must not write to it. A FUSE
// gateway replies from it, sparing the copy of every byte a sequential
// reader reads (docs/benchmarks.md: 6 % of the mount's CPU a byte).
func (f *File) ReadAtView(ctx context.Context, p []byte, off int64) ([]byte, error) {
	return f.read(ctx, p, off, true)
}

// read is ReadAt, or ReadAtView when view.
func (f *File) read(ctx context.Context, p []byte, off int64, view bool) ([]byte, error) {
	if err := f.check(false); err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("%w: read at offset %d", ErrInvalid, off)
	}
	if len(p) == 0 {
		return p[:0], nil
	}
	ino := f.ino
	size, err := ino.sizeForRead(ctx, off)
	if err != nil {
		return nil, err
	}
	if off >= size {
		return p[:0], io.EOF
	}
	n := int(min(int64(len(p)), size-off))
	kind, stride, slack, queued := f.observe(off, n)
	seq := kind == accessSequential
	out := p[:n]
	for pos := off; pos < off+int64(n); {
		idx, within := pos/ino.ss, int(pos%ino.ss)
		m := int(min(off+int64(n)-pos, ino.ss-int64(within)))
		dst := p[pos-off : pos-off+int64(m)]
		got, err := ino.readChunk(ctx, dst, idx, within, seq, view && m == n)
		if err != nil {
			return nil, err
		}
		if got != nil {
			out = got
		}
		pos += int64(m)
	}
	switch kind {
	case accessSequential:
		ino.prefetch((off+int64(n)-1)/ino.ss+1, size)
	case accessStrided:
		ino.prefetchStrided(off, n, stride, slack, size, &queued)
		f.mu.Lock()
		f.queued = max(f.queued, queued)
		f.mu.Unlock()
	}
	f.c.st.bytesRead.Add(int64(n))
	if n < len(p) {
		return out, io.EOF
	}
	return out, nil
}

// observe records a read of n bytes at off and says what to prefetch: a
// sequential reader's next stripes, a strided reader's next records (its
// stride, how far its reads stray from it, and the furthest record
// already prefetched for it), or nothing (random, or readahead is off).
func (f *File) observe(off int64, n int) (kind access, stride, slack, queued int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kind, stride = f.pattern.observe(off, n)
	if f.c.readahead == 0 || (kind == accessSequential && !f.pattern.stripeReadahead(f.ino.ss)) {
		return accessRandom, 0, 0, 0
	}
	if kind != accessStrided {
		f.queued = 0
	}
	return kind, stride, f.pattern.slack, f.queued
}

// sizeForRead returns the file size for a read at off. A read at or past
// the end of a file with nothing buffered asks meta, in case another
// client made the file longer.
func (ino *inode) sizeForRead(ctx context.Context, off int64) (int64, error) {
	ino.mu.Lock()
	size, state := ino.size, ino.hasStateLocked()
	ino.mu.Unlock()
	if off < size || state {
		return size, nil
	}
	a, err := ino.c.meta.GetAttr(ctx, ino.lin)
	if err != nil {
		return 0, fmt.Errorf("client: LIN %d: %w", ino.lin, err)
	}
	ino.mu.Lock()
	defer ino.mu.Unlock()
	if !ino.hasStateLocked() && int64(a.Size) > ino.size {
		ino.size = int64(a.Size)
	}
	return ino.size, nil
}

// Flush writes out every buffered stripe of the file (of all its handles
// in this Client) and commits them, retrying a stripe whose background
// write-out failed once more. It returns the first write-out error
// (ErrUnavailable, ErrNoSpace, ErrConflict, meta errors); the stripes that
// failed stay buffered for a later Flush, until the last handle closes.
func (f *File) Flush(ctx context.Context) error {
	if err := f.check(false); err != nil {
		return err
	}
	return f.ino.flush(ctx)
}

// Sync is Flush: a stripe is committed only after all its units were
// durably stored by their block services (which sync before they
// acknowledge), and a commit is durable in meta when it returns, so a
// successful Flush already makes the data durable.
func (f *File) Sync(ctx context.Context) error { return f.Flush(ctx) }

// Close flushes the file's buffered writes (if the handle is writable, or
// it is the file's last handle in this Client and writes are buffered)
// and releases the handle. When the last handle closes after a failed
// flush, the buffered writes are dropped and the error returned. A second
// Close returns ErrClosed.
func (f *File) Close(ctx context.Context) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return fmt.Errorf("%w: LIN %d", ErrClosed, f.ino.lin)
	}
	f.closed = true
	f.mu.Unlock()
	ino, c := f.ino, f.c
	var err error
	if f.writable {
		err = ino.flush(ctx)
	}
	c.mu.Lock()
	ino.refs--
	last := ino.refs == 0 && c.inodes[ino.lin] == ino
	if last {
		delete(c.inodes, ino.lin)
	}
	c.mu.Unlock()
	if !last {
		return err
	}
	ino.mu.Lock()
	state := ino.hasStateLocked()
	ino.mu.Unlock()
	if state && err == nil {
		err = ino.flush(ctx)
	}
	ino.mu.Lock()
	defer ino.mu.Unlock()
	for idx, d := range ino.dirty {
		ino.dropLocked(d)
		delete(ino.dirty, idx)
	}
	ino.cache.clearLocked()
	return err
}
