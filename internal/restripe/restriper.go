package restripe

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/runner"
)

// Errors: a Restriper returns the data path's error classes, wrapped with
// the file and stripe, so that a caller tells retryable from corrupt the
// same way for reads, writes and restripes: client.ErrUnavailable (too few
// units readable to rebuild; bring drives or nodes back), client.ErrCorrupt
// (a malformed stripe map, or surviving units that disagree),
// client.ErrConflict (the stripe kept changing), client.ErrInvalid (not a
// regular file) and client.ErrClosed; meta's errors (meta.ErrNotFound: the
// file was deleted) and context errors pass through wrapped.

// Namespace is the part of the namespace a Restriper reads: a file's
// attributes, its stripe maps and its entries of the protection index,
// which RepairFile keeps right for stripes it checks but does not commit
// (meta.Meta.SetStripeTolerance). *meta.Meta implements it.
type Namespace interface {
	GetAttr(ctx context.Context, lin meta.LIN) (meta.Attr, error)
	GetStripes(ctx context.Context, lin meta.LIN, from uint64, n int) ([]meta.Stripe, error)
	UnderProtectedStripes(ctx context.Context, lin meta.LIN) ([]meta.UnderStripe, error)
	SetStripeTolerance(ctx context.Context, lin meta.LIN, index, gen uint64, t meta.StripeTolerance) (bool, error)
}

var _ Namespace = (*meta.Meta)(nil)

// DataPath is the part of the file data path a Restriper works through:
// a topology snapshot, whole-unit reads and puts, the copy-on-write
// commit and the delete queue. *client.Client implements it; see its
// methods for the contracts.
type DataPath interface {
	Snapshot(ctx context.Context) (*client.Snapshot, error)
	FreshSnapshot(ctx context.Context) (*client.Snapshot, error)
	ReadUnit(ctx context.Context, t *client.Snapshot, u client.UnitRef) ([]byte, error)
	ReadBlock(ctx context.Context, t *client.Snapshot, u client.UnitRef) ([]byte, drive.BlockHeader, error)
	PutUnit(ctx context.Context, t *client.Snapshot, u client.UnitRef, gen uint64, data []byte, segs []uint32) error
	CommitStripes(ctx context.Context, lin meta.LIN, ups []meta.StripeUpdate, fresh [][]meta.Unit, co meta.CommitOptions) ([]meta.Stripe, error)
	EnqueueOrphans(ctx context.Context, lin meta.LIN, stripe uint64, units []meta.Unit) error
}

var _ DataPath = (*client.Client)(nil)

// Config configures a Restriper.
type Config struct {
	// Meta is the namespace Client commits to; required.
	Meta Namespace
	// Client is the data path; required.
	Client DataPath
	// Log receives a debug line per stripe committed and warnings about
	// blocks left for the collect job; nil discards them.
	Log *slog.Logger
}

// Restriper re-protects, moves and verifies stripes, one stripe (or one
// file) per call. It keeps no state between calls but a codec and a
// random source, and is safe for concurrent use: calls on the same stripe
// race only through the stripe generation, as any two writers do.
type Restriper struct {
	meta  Namespace
	data  DataPath
	log   *slog.Logger
	codec *erasure.Codec
	seed  uint64
	seq   atomic.Uint64 // random stream ids
}

// New returns a Restriper. It fails with an error wrapping
// client.ErrInvalid when Meta or Client is missing.
func New(cfg Config) (*Restriper, error) {
	if cfg.Meta == nil || cfg.Client == nil {
		return nil, fmt.Errorf("%w: restripe: Config.Meta and Config.Client are required", client.ErrInvalid)
	}
	codec, err := erasure.NewCodec(erasure.Protection{Data: 4, Parity: 2})
	if err != nil {
		return nil, err
	}
	// Inline stripes have no units: a restriper never sees them.
	ns := blockNamespace{Namespace: cfg.Meta, blocks: meta.BlockStripes(cfg.Meta)}
	r := &Restriper{meta: ns, data: cfg.Client, log: cfg.Log, codec: codec, seed: rand.Uint64()}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// blockNamespace is a Namespace whose GetStripes leaves inline stripes
// out (meta.BlockStripes).
type blockNamespace struct {
	Namespace
	blocks meta.StripeReader
}

func (b blockNamespace) GetStripes(ctx context.Context, lin meta.LIN, from uint64, n int) ([]meta.Stripe, error) {
	return b.blocks.GetStripes(ctx, lin, from, n)
}

// rng returns a fresh random source for one placement (placement.Request
// wants one per goroutine).
func (r *Restriper) rng() *rand.Rand {
	return rand.New(rand.NewPCG(r.seed, r.seq.Add(1)))
}

// stripePage is how many stripe maps RepairFile and VerifyFile read at
// once.
const stripePage = 256

// eachStripe calls fn for every stripe map of lin, in index order, read in
// pages; it stops at fn's first error.
func (r *Restriper) eachStripe(ctx context.Context, lin meta.LIN, fn func(meta.Stripe) error) error {
	var ferr error
	err := meta.EachStripe(ctx, r.meta, lin, stripePage, func(s meta.Stripe) error {
		// A file is one item of a job: rest between its stripes at the
		// worker's duty cycle, not only after the whole file.
		if ferr = runner.Rest(ctx); ferr != nil {
			return ferr
		}
		ferr = fn(s)
		return ferr
	})
	if err != nil && err != ferr {
		return fmt.Errorf("restripe: stripe maps of LIN %d: %w", lin, err)
	}
	return err
}

// enqueueOrphans queues blocks this Restriper stored and will not commit
// for deletion. It runs even if ctx is canceled (for up to a minute), and
// a failure is only logged: the collect job finds unreferenced blocks
// anyway.
func (r *Restriper) enqueueOrphans(ctx context.Context, lin meta.LIN, stripe uint64, units []meta.Unit) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := r.data.EnqueueOrphans(ctx, lin, stripe, units); err != nil {
		r.log.Warn("orphaned blocks left for the collect job", "err", err)
	}
}

// reasons says why units failed, for messages.
func reasons(bad map[int]error) string {
	out := make([]string, 0, len(bad))
	for i := 0; i < meta.MaxWidth; i++ {
		if err, ok := bad[i]; ok {
			out = append(out, fmt.Sprintf("unit %d: %v", i, err))
		}
	}
	return strings.Join(out, "; ")
}
