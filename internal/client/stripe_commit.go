package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftfs/weft/internal/meta"
)

// CommitStripe commits up.Stripe as the map of its stripe of lin if the
// stripe is still at generation up.ExpectGen: the copy-on-write commit of
// a caller that changed where a stripe's units are (moved, rebuilt)
// rather than its bytes. up.Tolerance (Snapshot.StripeTolerance of the
// new map) keeps the protection index right; co goes to
// meta.Meta.CommitStripes (Restripe: keep the file's times). The units of
// the new map that the map at ExpectGen does not name must be stored
// already (PutUnit); fresh lists them. On success this Client's cached
// map of the stripe is dropped, so its readers see the new map at once,
// and meta queues the replaced blocks for deletion in the same
// transaction.
//
// When the commit surely did not happen (a lost compare-and-swap, the
// file gone, an invalid map), fresh are queued for deletion; when it may
// have happened (a lost reply), they are left for the collect job rather
// than risk deleting committed data. Not idempotent: retry from a fresh
// map. Safe for concurrent use.
//
// Errors: wrapping meta.ErrStripeConflict when the stripe is no longer at
// expectGen (counted in Stats.Conflicts: re-read the stripe and decide
// again); meta's other errors (meta.ErrNotFound: the file was deleted)
// and context errors, wrapped.
func (c *Client) CommitStripe(ctx context.Context, lin meta.LIN, up meta.StripeUpdate, fresh []meta.Unit, co meta.CommitOptions) (meta.Stripe, error) {
	out, err := c.CommitStripes(ctx, lin, []meta.StripeUpdate{up}, [][]meta.Unit{fresh}, co)
	if err != nil {
		return meta.Stripe{}, err
	}
	return out[0], nil
}

// CommitStripes is CommitStripe of several stripes of lin in one
// transaction: all of them or none, each on its own ExpectGen (fresh[i]
// are the units up[i] names that its old map does not). One stripe whose
// generation moved fails them all (meta.ErrStripeConflict): every fresh
// unit is then queued for deletion, as for a failed CommitStripe, and the
// caller decides each stripe again. A restriper commits a file's stripes
// in batches: one transaction for several stripes costs about what one
// costs. Errors are CommitStripe's; ErrTooLarge-wrapping meta errors when
// the batch is more than the backend takes in one transaction.
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
