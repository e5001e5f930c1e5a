package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
)

// inode is the state of one LIN open in a Client, shared by all its
// handles: the size as this client knows it (buffered writes included),
// the buffered ("dirty") and in-flight stripes, and the stripe map and
// data caches.
//
// A stripe index is at most once in dirty and at most once in inflight: a
// stripe being written out is in inflight, and writes that arrive
// meanwhile start a new dirty stripe over it. Readers overlay inflight,
// then dirty, on the committed data.
//
// Locking: mu guards every field below it; it is never held across I/O.
// refs is guarded by Client.mu. Waiters wait for changed to be closed
// (signalLocked replaces it after every state change).
type inode struct {
	c   *Client
	lin meta.LIN
	// pool is the pool new stripes go to (currentPool): the file's at
	// open, then the one a commit refused for names (the file moved).
	pool      atomic.Pointer[string]
	requested erasure.Protection // the file's protection, else its pool's
	fromPool  bool               // requested came from the pool
	geo       erasure.Geometry
	ss        int64 // file bytes per stripe

	refs int

	mu         sync.Mutex
	size       int64 // file size including buffered writes
	dirty      map[int64]*dstripe
	inflight   map[int64]*dstripe
	buffered   int64 // bytes of dirty and inflight buffers (dstripe.mem)
	truncating bool  // a Truncate is in progress: writes wait
	changed    chan struct{}
	maps       map[int64]mapEntry
	mapEpoch   uint64 // bumped by every local change of maps
	cache      stripeCache

	commits groupCommit // has its own lock
}

// dstripe is a buffered stripe: the bytes written to it and where.
type dstripe struct {
	idx int64
	buf []byte // stripe data; only the bytes in ext are meaningful
	ext spans
	// chunks holds the bytes of a sparse stripe in chunkSize pieces,
	// allocated as they are written (nchunks of them); nil for a dense
	// one, whose bytes are in buf (see put).
	chunks  []*chunk
	nchunks int
	err     error // why the last write-out failed, if it did
	// pid is the pid (qos.PIDOf) of the writes buffered in it when one
	// process made them all, 0 when unknown or several: its write-out
	// runs on the Client's context, not the writer's, and carries it in
	// the QoS tag of its block calls.
	pid int
}

// addPID notes a write by pid in d (pid 0: unknown).
func (d *dstripe) addPID(pid int) {
	if d.pid != pid {
		d.pid = 0
	}
}

// newInode returns the state of lin with geometry geo.
func newInode(c *Client, lin meta.LIN, a meta.Attr, req erasure.Protection, fromPool bool, geo erasure.Geometry) *inode {
	ino := &inode{
		c: c, lin: lin, requested: req, fromPool: fromPool, geo: geo, ss: geo.StripeDataSize(),
		size: int64(a.Size), dirty: map[int64]*dstripe{}, inflight: map[int64]*dstripe{},
		changed: make(chan struct{}), maps: map[int64]mapEntry{},
		cache: stripeCache{max: c.readahead + 2, entries: map[int64]*cacheEntry{}, bytes: &c.cached, limit: c.maxCache, unread: &c.st.prefetchUnread},
	}
	ino.setPool(a.Pool)
	return ino
}

// currentPool is the pool new stripes of the file go to.
func (ino *inode) currentPool() string { return *ino.pool.Load() }

// setPool makes new stripes go to pool p: the file moved there. Its
// protection stays what the handle read at open (a file on its pool's
// default keeps the old pool's until it is opened again; the mover's
// relayout re-encodes what it finds).
func (ino *inode) setPool(p string) { ino.pool.Store(&p) }

// geometry returns the geometry new stripes of a file get: its requested
// protection (else its pool's) with the client's unit size, or, once the
// file has a stripe size, the unit size that keeps it.
func (c *Client) geometry(ctx context.Context, a meta.Attr) (erasure.Geometry, erasure.Protection, bool, error) {
	p, err := toErasure(a.Protection)
	if err != nil {
		return erasure.Geometry{}, p, false, err
	}
	fromPool := p.IsZero()
	if fromPool {
		if p, err = c.topo.PoolProtection(ctx, a.Pool); err != nil {
			return erasure.Geometry{}, p, true, fmt.Errorf("client: LIN %d: protection of pool %q: %w", a.LIN, a.Pool, err)
		}
	}
	g, err := stripeGeometry(a, p, c.unitSize)
	return g, p, fromPool, err
}

// FileGeometry returns the geometry new stripes of a file with
// attributes a get under protection spec (mirror:N or ec:K+M), as a
// client writing it computes it: the protection with unitSize (0: the
// default), or, once the file has a stripe size, the unit size that keeps
// it (a file's stripes all hold StripeSize bytes of it, whatever their
// protection). Errors wrap ErrInvalid for a bad spec, or for a protection
// that cannot keep the file's stripe size (its units would not be a
// multiple of erasure.UnitAlign). It is pure.
func FileGeometry(a meta.Attr, spec string, unitSize int) (erasure.Geometry, error) {
	p, err := erasure.ParseProtection(spec)
	if err != nil {
		return erasure.Geometry{}, fmt.Errorf("%w: LIN %d: %w", ErrInvalid, a.LIN, err)
	}
	if unitSize == 0 {
		unitSize = erasure.DefaultUnitSize
	}
	return stripeGeometry(a, p, unitSize)
}

// stripeGeometry is FileGeometry with a parsed protection.
func stripeGeometry(a meta.Attr, p erasure.Protection, unitSize int) (erasure.Geometry, error) {
	g, err := erasure.NewGeometry(p, unitSize)
	if err != nil {
		return g, fmt.Errorf("%w: LIN %d: %w", ErrInvalid, a.LIN, err)
	}
	ss := int64(a.StripeSize)
	if ss == 0 || ss == g.StripeDataSize() {
		return g, nil
	}
	// The file was first written with another geometry: keep its stripe
	// size, with units of stripe size / K.
	k := int64(max(p.Data, 1))
	if p.Mirrors > 0 {
		k = 1
	}
	if ss%k == 0 {
		if g2, err := erasure.NewGeometry(p, int(ss/k)); err == nil {
			return g2, nil
		}
	}
	return g, fmt.Errorf("%w: LIN %d has a stripe size of %d bytes, which %v cannot keep (units of %d bytes are not a multiple of %d, or above %d): choose a protection whose data units divide the stripe",
		ErrInvalid, a.LIN, ss, p, ss/k, erasure.UnitAlign, erasure.MaxUnitSize)
}

// signalLocked wakes everyone waiting for a state change.
func (ino *inode) signalLocked() {
	close(ino.changed)
	ino.changed = make(chan struct{})
}

// waitLocked releases mu until the next state change (or ctx ends), then
// takes it again.
func (ino *inode) waitLocked(ctx context.Context) error {
	ch := ino.changed
	ino.mu.Unlock()
	defer ino.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeLocked copies p, written by pid (0: unknown), into the buffered
// stripe idx at offset off (within the stripe) and reports whether the
// stripe is now complete.
func (ino *inode) writeLocked(idx int64, off int, p []byte, pid int) (full bool) {
	d := ino.dirty[idx]
	if d == nil {
		d = &dstripe{idx: idx, pid: pid}
		ino.dirty[idx] = d
	}
	d.addPID(pid)
	ino.put(d, off, p)
	d.ext = d.ext.add(off, off+len(p))
	return d.ext.covers(0, int(ino.ss))
}

// hasStateLocked reports whether writes are buffered or being written out.
func (ino *inode) hasStateLocked() bool { return len(ino.dirty) > 0 || len(ino.inflight) > 0 }
