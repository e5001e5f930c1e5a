package client

import (
	"context"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/runner"
)

// Whole units, named by their stripe map entry, for callers that copy,
// rebuild or check stored units outside a file handle. They
// go through the same connections, short-circuit drives and counters as
// the file path, and take their drives' nodes and local paths from a
// Snapshot, so that one decision about a stripe sees one topology.

// UnitRef names one unit of a stripe map: unit Index of stripe Stripe of
// file LIN, stored as Unit (drive, block, length, CRC).
type UnitRef struct {
	LIN    meta.LIN
	Stripe uint64
	Index  int
	Unit   meta.Unit
}

// ref locates u with the snapshot's node and local path of its drive.
func (v *Snapshot) ref(u UnitRef) unitRef {
	return unitRef{lin: u.LIN, stripe: u.Stripe, index: u.Index, unit: u.Unit, node: v.Node(u.Unit.Drive), local: v.local(u.Unit.Drive), pool: v.pool(u.Unit.Drive)}
}

// ReadUnit reads unit u whole (u.Unit.Length bytes) from its drive —
// straight from the drive directory when t says the drive is on this
// machine, else through its node's block service — with the drive's
// header and segment checks, and checks that the block is the one the map
// names (its header names u's file, stripe and index) and that its bytes
// match u.Unit's CRC. A rebuild can start from what it returns.
//
// It changes nothing and is safe for concurrent use. Errors: wrapping
// drive.ErrCorrupt for a block that fails any check; drive.ErrNotFound
// when the drive has no such block (the map may be stale: re-read it);
// ErrUnavailable or a gRPC transport error when the node cannot be
// reached (the topology is invalidated then); ErrClosed; context errors.
func (c *Client) ReadUnit(ctx context.Context, t *Snapshot, u UnitRef) ([]byte, error) {
	// getUnit checks a whole unit against its map's CRC, whatever path
	// it came by: a rebuild must not start from a unit that is not the
	// one committed.
	return c.getUnit(ctx, t.ref(u), 0, int(u.Unit.Length))
}

// ReadBlock reads all of unit u's block as its drive stores it, with the
// drive's header and segment checks only, and returns its header: the
// caller compares the block with the map itself (the header's owner,
// stripe and unit; the length and CRC of u.Unit). It reads from the drive
// directory when t says the drive is on this machine, else through its
// node's block service.
//
// It changes nothing and is safe for concurrent use. Errors:
// drive.ErrNotFound when the drive has no such block; wrapping
// drive.ErrCorrupt (a *drive.CorruptError naming the segment, or the
// header when the file under the block's name holds another block) for a
// failed check; ErrUnavailable or a gRPC transport error when the node
// cannot be reached (the topology is invalidated then); ErrClosed;
// context errors.
func (c *Client) ReadBlock(ctx context.Context, t *Snapshot, u UnitRef) ([]byte, drive.BlockHeader, error) {
	return c.readWholeBlock(ctx, t.ref(u))
}

// readWholeBlock reads all of a unit's block (straight from the drive if
// it is on this machine, else through its node's block service) with the
// drive's header and segment checks, and returns its header.
func (c *Client) readWholeBlock(ctx context.Context, u unitRef) ([]byte, drive.BlockHeader, error) {
	if err := runner.Spend(ctx, int(u.unit.Length)); err != nil { // a job's byte rate, if it has one
		return nil, drive.BlockHeader{}, err
	}
	ctx = c.tagged(ctx, u)
	id := drive.BlockID(u.unit.Block)
	var (
		data []byte
		hdr  drive.BlockHeader
		err  error
	)
	if ld := c.localDrive(u); ld != nil {
		data, hdr, err = ld.Get(ctx, id, 0, -1)
		if err == nil {
			c.st.localReads.Add(1)
		}
	} else {
		bc, berr := c.blocks(ctx, u.node)
		if berr != nil {
			return nil, hdr, berr
		}
		rctx, cancel := context.WithTimeout(ctx, c.ioTimeout)
		defer cancel()
		data, hdr, err = bc.Get(rctx, drive.ID(u.unit.Drive), id, 0, -1)
	}
	if err != nil {
		return nil, hdr, c.unitErr(err)
	}
	c.st.unitBytesRead.Add(int64(len(data)))
	return data, hdr, nil
}

// PutUnit stores data as the block u.Unit names on the drive it names,
// with a header naming u's file, stripe and index and generation gen (the
// generation the stripe map will have once the block is committed). segs
// are data's segment CRCs (drive.AppendSegmentCRCs; nil: the node
// computes them). u.Unit.Block must be a new id (drive.NewBlockID): never
// one a stripe map may name. A drive on this machine (by t) is written in
// its directory and adopted by its node, others through their node's
// block service. The block is durable when PutUnit returns nil.
//
// A failed put may still have left the block on the drive: queue u.Unit
// for deletion (EnqueueOrphans) unless a committed map names it. Safe for
// concurrent use. Errors: drive.ErrNoSpace; other drive errors;
// ErrUnavailable or a gRPC transport error when the node cannot be
// reached (the topology is invalidated then); ErrClosed; context errors.
func (c *Client) PutUnit(ctx context.Context, t *Snapshot, u UnitRef, gen uint64, data []byte, segs []uint32) error {
	return c.putUnit(ctx, t.ref(u), gen, data, segs)
}
