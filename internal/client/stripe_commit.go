package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftfs/weft/internal/meta"
)

// CommitStripes commits the new maps ups of stripes of lin in one
// transaction, all of them or none, each only if its stripe is still at
// generation ExpectGen: the copy-on-write commit of a caller that changed
// where stripes' units are (moved, rebuilt) rather than their bytes. A
// restriper commits a file's stripes in batches: one transaction of
// several stripes costs about what one costs. Each update's Tolerance
// (Snapshot.StripeTolerance of its new map) keeps the protection index
// right; co goes to meta.Meta.CommitStripes (Restripe: keep the file's
// times). The units of a new map that its map at ExpectGen does not name
// must be stored already (PutUnit); fresh[i] lists those of ups[i]. On
// success this Client's cached maps of the stripes are dropped, so its
// readers see the new maps at once, and meta queues the replaced blocks
// for deletion in the same transaction.
//
// When the commit surely did not happen (a lost compare-and-swap, the
// file gone, an invalid map, a batch too large), every fresh unit is
// queued for deletion; when it may have happened (a lost reply), they are
// left for the collect job rather than risk deleting committed data. Not
// idempotent: retry from fresh maps. Safe for concurrent use.
//
// Errors: wrapping meta.ErrStripeConflict when a stripe is no longer at
// its ExpectGen (none was committed; counted in Stats.Conflicts: re-read
// and decide each stripe again); wrapping meta.ErrTooLarge when the batch
// is more than the backend takes in one transaction; meta's other errors
// (meta.ErrNotFound: the file was deleted) and context errors, wrapped.
func (c *Client) CommitStripes(ctx context.Context, lin meta.LIN, ups []meta.StripeUpdate, fresh [][]meta.Unit, co meta.CommitOptions) ([]meta.Stripe, error) {
	out, err := c.meta.CommitStripes(ctx, lin, ups, co)
	if err != nil {
		if errors.Is(err, meta.ErrStripeConflict) {
			c.st.conflicts.Add(1)
		}
		if errors.Is(err, meta.ErrStripeConflict) || definite(err) || errors.Is(err, meta.ErrTooLarge) {
			for i, up := range ups {
				c.enqueueOrphans(ctx, lin, up.Stripe.Index, fresh[i])
			}
		}
		if len(ups) == 1 {
			return nil, fmt.Errorf("client: committing LIN %d stripe %d at generation %d: %w", lin, ups[0].Stripe.Index, ups[0].ExpectGen, err)
		}
		return nil, fmt.Errorf("client: committing %d stripes of LIN %d from stripe %d: %w", len(ups), lin, ups[0].Stripe.Index, err)
	}
	for _, up := range ups {
		c.forgetMap(lin, up.Stripe.Index)
	}
	return out, nil
}

// forgetMap drops this Client's cached map of stripe idx of lin, if the
// file is open here, so its readers do not wait for MapTTL or a "not
// found" to see a stripe changed outside its file path.
func (c *Client) forgetMap(lin meta.LIN, idx uint64) {
	ino := c.openInode(lin)
	if ino == nil {
		return
	}
	ino.mu.Lock()
	ino.forgetMapLocked(int64(idx))
	ino.mu.Unlock()
}
