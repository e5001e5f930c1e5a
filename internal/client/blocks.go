package client

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/runner"
)

// BlockClient is the part of a node's block service the client uses;
// *block.Client implements it. Errors are the drive package's
// (drive.ErrNotFound, drive.ErrCorrupt, drive.ErrNoSpace, ...) or gRPC
// status errors for transport failures.
type BlockClient interface {
	Put(ctx context.Context, d drive.ID, hdr drive.BlockHeader, data []byte) error
	Get(ctx context.Context, d drive.ID, id drive.BlockID, off, length int64) ([]byte, drive.BlockHeader, error)
	Close() error
}

var _ BlockClient = (*block.Client)(nil)

// blocks returns the (cached) connection to node's block service.
func (c *Client) blocks(ctx context.Context, node string) (BlockClient, error) {
	if node == "" {
		return nil, fmt.Errorf("%w: drive on no known node", ErrUnavailable)
	}
	addr, err := c.topo.NodeAddr(ctx, node)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if bc := c.conns[addr]; bc != nil {
		return bc, nil
	}
	bc, err := c.dial(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: node %s at %s: %w", ErrUnavailable, node, addr, err)
	}
	c.conns[addr] = bc
	return bc, nil
}

// unitRef is one unit to read or write: where it is and what it is.
type unitRef struct {
	lin    meta.LIN
	stripe uint64
	index  int
	unit   meta.Unit
	node   string
	// local is the drive's directory if it is on this machine (reads may
	// bypass the block service), else "".
	local string
	// pool is the drive's pool, for QoS ("" if unknown).
	pool string
	// unsynced: the unit may be written without syncing it, if it is
	// staged on this machine (see unsynced.go).
	unsynced bool
}

// tagged returns ctx whose block calls carry the client's QoS tag for
// u (its class and id, u's pool, the job and the pid of ctx) where ctx
// does not say otherwise.
func (c *Client) tagged(ctx context.Context, u unitRef) context.Context {
	t := c.tag
	t.Pool = u.pool
	t.PID = qos.PIDOf(ctx)
	if c.jobOf != nil {
		t.Job = c.jobOf(ctx)
	}
	if c.meter != nil {
		t.P99 = c.meter.P99(time.Now(), u.pool)
	}
	return block.WithTag(ctx, block.OutgoingTag(ctx).Or(t))
}

// measure records, for the client's meter, a unit read or write of u
// that started at start and has just ended (with err: a call that failed
// or was cancelled says nothing of the latency the throttle protects).
func (c *Client) measure(u unitRef, start time.Time, err error) {
	if c.meter != nil && err == nil {
		now := time.Now()
		c.meter.Record(now, u.pool, now.Sub(start))
	}
}

// getUnit reads length bytes at off of a unit and checks that the block is
// the one the stripe map names; a whole-unit read is also checked against
// the unit's CRC from the stripe map. A mismatch is an error wrapping
// drive.ErrCorrupt.
func (c *Client) getUnit(ctx context.Context, u unitRef, off, length int) (_ []byte, rerr error) {
	return c.getUnitInto(ctx, u, off, length, nil)
}

// getUnitInto is getUnit that, given dst (length bytes), may read a unit
// of a drive on this machine straight into it (and returns it then): the
// stripe a reader assembles is filled without a copy per unit.
func (c *Client) getUnitInto(ctx context.Context, u unitRef, off, length int, dst []byte) (_ []byte, rerr error) {
	if err := runner.Spend(ctx, length); err != nil { // a job's byte rate, if it has one
		return nil, err
	}
	defer func(start time.Time) { c.measure(u, start, rerr) }(time.Now())
	ctx = c.tagged(ctx, u)
	id := drive.BlockID(u.unit.Block)
	var data []byte
	var hdr drive.BlockHeader
	local := false
	if ld := c.localDrive(u); ld != nil {
		local = true
		// A short-circuit read: same checks, no RPC.
		var err error
		if dst != nil {
			data, hdr, err = ld.GetInto(ctx, id, int64(off), dst[:length])
		} else {
			data, hdr, err = ld.Get(ctx, id, int64(off), int64(length))
		}
		if err != nil {
			return nil, c.unitErr(err)
		}
		c.st.localReads.Add(1)
	} else {
		bc, err := c.blocks(ctx, u.node)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(ctx, c.ioTimeout)
		defer cancel()
		if data, hdr, err = bc.Get(ctx, drive.ID(u.unit.Drive), id, int64(off), int64(length)); err != nil {
			return nil, c.unitErr(err)
		}
	}
	c.st.unitBytesRead.Add(int64(len(data)))
	var err error
	switch {
	case len(data) != length:
		err = fmt.Errorf("%w: drive %d block %v returned %d bytes of %d", drive.ErrCorrupt, u.unit.Drive, id, len(data), length)
	case hdr.Owner != uint64(u.lin) || hdr.Stripe != u.stripe || hdr.Unit != uint32(u.index):
		err = fmt.Errorf("%w: drive %d block %v belongs to LIN %d stripe %d unit %d, the stripe map says LIN %d stripe %d unit %d",
			drive.ErrCorrupt, u.unit.Drive, id, hdr.Owner, hdr.Stripe, hdr.Unit, u.lin, u.stripe, u.index)
	// A whole unit must be the one its stripe map names: the map's CRC.
	// It also guards the bytes on their way from a remote node; a local
	// read has just checked every segment's CRC itself, so their
	// combination is the CRC of what it read (no second pass).
	case off == 0 && length == int(u.unit.Length) && unitCRC(local, data, hdr) != u.unit.CRC:
		err = fmt.Errorf("%w: drive %d block %v does not match the CRC of its stripe map", drive.ErrCorrupt, u.unit.Drive, id)
	}
	if err != nil {
		c.st.corrupt.Add(1)
		c.st.unitErrors.Add(1)
		return nil, err
	}
	return data, nil
}

// unitCRC returns the CRC32C of a whole unit read: from the block's
// segment CRCs when the read was local (the drive checked every segment
// against the bytes), else from the bytes.
func unitCRC(local bool, data []byte, hdr drive.BlockHeader) uint32 {
	if local {
		if crc, ok := drive.DataCRC(hdr); ok {
			return crc
		}
	}
	return crc32.Checksum(data, castagnoli())
}

// putUnit writes one unit as block u.unit.Block on drive u.unit.Drive,
// carrying its segment CRCs segs (drive.AppendSegmentCRCs of data; nil:
// the node computes them). A unit for a drive on this machine is staged in
// the drive directory and adopted by its node (see stageUnit).
func (c *Client) putUnit(ctx context.Context, u unitRef, gen uint64, data []byte, segs []uint32) (rerr error) {
	if err := runner.Spend(ctx, len(data)); err != nil { // a job's byte rate, if it has one
		return err
	}
	defer func(start time.Time) { c.measure(u, start, rerr) }(time.Now())
	ctx = c.tagged(ctx, u)
	bc, err := c.blocks(ctx, u.node)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.ioTimeout)
	defer cancel()
	hdr := drive.BlockHeader{
		ID: drive.BlockID(u.unit.Block), Owner: uint64(u.lin), Stripe: u.stripe, Unit: uint32(u.index), Generation: gen,
	}
	if segs != nil {
		hdr.SegmentSize, hdr.SegmentCRCs = drive.SegmentSize, segs
	}
	if staged, err := c.stageUnit(ctx, u, bc, hdr, data); staged {
		if err != nil {
			return c.unitErr(err)
		}
	} else if err := bc.Put(ctx, drive.ID(u.unit.Drive), hdr, data); err != nil {
		return c.unitErr(err)
	}
	c.st.unitBytesWritten.Add(int64(len(data)))
	return nil
}

// blockAdopter is implemented by block clients that can ask a node to
// adopt a staged block (*block.Client does).
type blockAdopter interface {
	Adopt(ctx context.Context, d drive.ID, hdr drive.BlockHeader, length int64, staged string) error
	AdoptUnsynced(ctx context.Context, d drive.ID, hdr drive.BlockHeader, length int64, staged string) error
}

// stageUnit writes a unit of a drive on this machine without sending its
// bytes to the node: it writes the block file into the drive directory
// itself (drive.Drive.Stage, through the handle of the short-circuit
// reads) and asks the node to adopt it, which checks and accounts for it
// as for a Put. staged reports whether it took the unit; if not (no local
// drive, local writes refused), the caller puts it through the node. A
// drive whose directory refuses the staging (permissions, a read-only
// mount) is written through its node for localRetry. A unit that may be
// written unsynced (u.unsynced) is staged and adopted so, and recorded for
// the next data barrier.
func (c *Client) stageUnit(ctx context.Context, u unitRef, bc BlockClient, hdr drive.BlockHeader, data []byte) (staged bool, err error) {
	ad, ok := bc.(blockAdopter)
	if !ok {
		return false, nil
	}
	ld := c.localDrive(u)
	if ld == nil {
		return false, nil
	}
	c.mu.Lock()
	until, off := c.noStage[u.unit.Drive]
	c.mu.Unlock()
	if off && time.Now().Before(until) {
		return false, nil
	}
	unsynced := u.unsynced && c.beginUnsynced(u.unit.Drive, ld)
	stage, adopt := ld.Stage, ad.Adopt
	if unsynced {
		stage, adopt = ld.StageUnsynced, ad.AdoptUnsynced
	}
	name, err := stage(ctx, hdr, data)
	if err != nil {
		if errors.Is(err, drive.ErrNoSpace) || ctx.Err() != nil {
			return true, err // an answer about this put, not about staging
		}
		c.mu.Lock()
		c.noStage[u.unit.Drive] = time.Now().Add(localRetry)
		c.mu.Unlock()
		c.log.Debug("local writes off for a drive", "drive", u.unit.Drive, "path", ld.Path(), "err", err)
		return false, nil
	}
	if err := adopt(ctx, drive.ID(u.unit.Drive), hdr, int64(len(data)), name); err != nil {
		// The node removes what it refuses; after a transport error the
		// file may be left, and goes now (or at the node's next start).
		ld.Unstage(hdr.ID, name)
		return true, err
	}
	if unsynced {
		c.doneUnsynced(u.unit.Drive)
	}
	c.st.localWrites.Add(1)
	return true, nil
}

// unitErr counts a failed unit RPC and, if it says the node or drive is
// unreachable, invalidates the topology so the next view is current.
func (c *Client) unitErr(err error) error {
	c.st.unitErrors.Add(1)
	if errors.Is(err, drive.ErrCorrupt) {
		c.st.corrupt.Add(1)
	}
	if unreachable(err) {
		c.invalidate()
	}
	return err
}

// unreachable reports whether err says a node or drive cannot be reached
// (transport failure, timeout, unknown or closed drive), as opposed to an
// answer about the block itself.
func unreachable(err error) bool {
	if errors.Is(err, block.ErrUnknownDrive) || errors.Is(err, drive.ErrClosed) || errors.Is(err, ErrUnavailable) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// castagnoli returns the CRC32C table; crc32.MakeTable returns one shared,
// hardware-accelerated table for it, so the call is cheap.
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// bufPool recycles stripe-sized buffers (write-behind buffers, parity
// scratch), keyed by capacity. Small buffers are not pooled.
type bufPool struct {
	mu    sync.Mutex
	pools map[int]*sync.Pool
}

// minPooled is the smallest capacity worth pooling.
const minPooled = 64 << 10

// get returns a buffer of length n with arbitrary contents.
func (b *bufPool) get(n int) []byte {
	if n < minPooled {
		return make([]byte, n)
	}
	if p := b.pool(n); p != nil {
		if v, ok := p.Get().(*[]byte); ok {
			return (*v)[:n]
		}
	}
	return make([]byte, n)
}

// put returns buf for reuse; the caller must not use it afterwards.
func (b *bufPool) put(buf []byte) {
	if cap(buf) < minPooled {
		return
	}
	buf = buf[:cap(buf)]
	b.pool(cap(buf)).Put(&buf)
}

// pool returns the pool of buffers of capacity n.
func (b *bufPool) pool(n int) *sync.Pool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pools == nil {
		b.pools = map[int]*sync.Pool{}
	}
	p := b.pools[n]
	if p == nil {
		p = &sync.Pool{}
		b.pools[n] = p
	}
	return p
}

// localRetry is how long a drive that could not be opened for local reads
// is read through its block service before the client tries again.
const localRetry = 30 * time.Second

// localDrive returns, when local I/O is on, the drive of u if this
// process serves it (Config.OwnDrive), else the drive opened read-only
// when it is on this machine, or nil (through the block service). A drive
// whose directory cannot be opened as that drive of this cluster (another
// machine's path, a replaced disk) is not tried again for a while.
func (c *Client) localDrive(u unitRef) *drive.Drive {
	if c.localIO != nil && !c.localIO() {
		return nil
	}
	if c.ownDrive != nil {
		if d := c.ownDrive(u.unit.Drive); d != nil {
			return d
		}
	}
	if u.local == "" || c.clusterID == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.local[u.unit.Drive]; d != nil {
		return d
	}
	if until, ok := c.noLocal[u.unit.Drive]; ok && time.Now().Before(until) {
		return nil
	}
	d, err := drive.OpenReadOnly(u.local, c.clusterID, drive.ID(u.unit.Drive))
	if err != nil {
		c.noLocal[u.unit.Drive] = time.Now().Add(localRetry)
		c.log.Debug("local reads off for a drive", "drive", u.unit.Drive, "path", u.local, "err", err)
		return nil
	}
	c.local[u.unit.Drive] = d
	return d
}
