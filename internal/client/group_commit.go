package client

import (
	"context"
	"errors"
	"sync"

	"github.com/weftfs/weft/internal/meta"
)

// maxCommitBatch bounds the stripes of one group commit: each stripe is a
// handful of writes in the transaction (its map, the old units queued for
// deletion), and a transaction holds at most 128 (etcd's default).
const maxCommitBatch = 8

// groupCommit commits the stripe maps of one file that its write-outs
// finish while a commit of the file is in progress together, in one
// CommitStripes transaction, when that commit ends. Concurrent commits of
// one file would otherwise each be a transaction on the same inode (size,
// mtime, usage), and all but one would fail their compare and be retried:
// with four stripes of a file in flight, about two transactions per stripe.
//
// A commit waits for no other write-out: the first one to arrive commits
// at once, and the ones arriving meanwhile go together in the next.
//
// Locking: mu guards the fields below it. A waiter blocks on cond until
// its request is done or it may lead the next commit.
type groupCommit struct {
	mu      sync.Mutex
	cond    *sync.Cond
	busy    bool // a commit is in progress
	pending []*commitReq
}

// commitReq is one stripe waiting in a groupCommit.
type commitReq struct {
	up   meta.StripeUpdate
	size uint64 // the file size the stripe implies
	done bool
	out  meta.Stripe
	err  error
}

// commitStripe commits up (a stripe of the file, expected at its
// generation, with its tolerance), growing the file to at least size
// bytes: meta.CommitStripes' contract, batched with the file's concurrent
// commits (see groupCommit). The commit that carries it runs under the
// ctx of whichever caller leads it.
func (ino *inode) commitStripe(ctx context.Context, up meta.StripeUpdate, size uint64) (meta.Stripe, error) {
	q := &ino.commits
	req := &commitReq{up: up, size: size}
	q.mu.Lock()
	if q.cond == nil {
		q.cond = sync.NewCond(&q.mu)
	}
	q.pending = append(q.pending, req)
	for q.busy && !req.done {
		q.cond.Wait()
	}
	if req.done {
		q.mu.Unlock()
		return req.out, req.err
	}
	// Lead: commit this request and what else is pending now.
	q.busy = true
	batch := []*commitReq{req}
	rest := q.pending[:0]
	for _, r := range q.pending {
		switch {
		case r == req:
		case len(batch) < maxCommitBatch:
			batch = append(batch, r)
		default:
			rest = append(rest, r)
		}
	}
	q.pending = rest
	q.mu.Unlock()
	ino.commitBatch(ctx, batch)
	q.mu.Lock()
	q.busy = false
	q.cond.Broadcast()
	q.mu.Unlock()
	return req.out, req.err
}

// commitBatch commits batch in as few transactions as it can and records
// each request's outcome (it marks them done; the caller wakes their
// owners). A stripe that lost its compare-and-swap gets the conflict and
// the others, of which nothing was committed, are committed without it.
// After an error that surely committed nothing and may come from one
// stripe (too large, invalid), each stripe is committed alone. Any other
// error is every stripe's: the transaction may have committed, so it must
// not be retried in another shape (a retry would lose its compare-and-swap
// to the commit it repeats, and the caller would free committed blocks).
func (ino *inode) commitBatch(ctx context.Context, batch []*commitReq) {
	defer ino.finish(batch)
	for len(batch) > 0 {
		ups := make([]meta.StripeUpdate, len(batch))
		co := meta.CommitOptions{StripeSize: uint64(ino.ss)}
		for i, r := range batch {
			ups[i] = r.up
			co.Size = max(co.Size, r.size)
		}
		out, err := ino.c.meta.CommitStripes(ctx, ino.lin, ups, co)
		var conflict *meta.StripeConflictError
		switch {
		case err == nil:
			for i, r := range batch {
				r.out = out[i]
			}
			return
		case len(batch) > 1 && errors.As(err, &conflict):
			rest := batch[:0:0]
			for _, r := range batch {
				if r.up.Stripe.Index == conflict.Index {
					r.err = err
				} else {
					rest = append(rest, r)
				}
			}
			if len(rest) == len(batch) { // names no stripe of the batch
				ino.commitEach(ctx, batch)
				return
			}
			batch = rest
		case len(batch) > 1 && (errors.Is(err, meta.ErrTooLarge) || errors.Is(err, meta.ErrInvalid)):
			ino.commitEach(ctx, batch)
			return
		default:
			for _, r := range batch {
				r.err = err
			}
			return
		}
	}
}

// commitEach commits the stripes of batch one transaction each.
func (ino *inode) commitEach(ctx context.Context, batch []*commitReq) {
	for _, r := range batch {
		co := meta.CommitOptions{StripeSize: uint64(ino.ss), Size: r.size}
		out, err := ino.c.meta.CommitStripes(ctx, ino.lin, []meta.StripeUpdate{r.up}, co)
		if err == nil {
			r.out = out[0]
		}
		r.err = err
	}
}

// finish marks the requests of batch done.
func (ino *inode) finish(batch []*commitReq) {
	ino.commits.mu.Lock()
	defer ino.commits.mu.Unlock()
	for _, r := range batch {
		r.done = true
	}
}
