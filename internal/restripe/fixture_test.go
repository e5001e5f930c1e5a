package restripe_test

import (
	"context"
	"sync"

	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// The tests of this package run on a clienttest.Fixture: 3 nodes × 4
// drives of real block services on loopback, a memkv namespace and a fake
// topology.

var bg = context.Background()

const (
	kib = clienttest.KiB
	// testUnit is the unit size of most tests: small stripes, many of them.
	testUnit = clienttest.Unit
)

// newRestriper returns a Restriper over data (a client of f, or one
// wrapped) and f's namespace.
func newRestriper(f *clienttest.Fixture, data restripe.DataPath) *restripe.Restriper {
	f.TB.Helper()
	r, err := restripe.New(restripe.Config{Meta: f.Meta, Client: data})
	if err != nil {
		f.TB.Fatal(err)
	}
	return r
}

// hookedData is a DataPath whose CommitStripes runs a hook first, for
// each stripe it commits: a fault injection point for races with other
// writers.
type hookedData struct {
	restripe.DataPath
	mu     sync.Mutex
	before func(lin meta.LIN, s meta.Stripe)
}

func (h *hookedData) CommitStripes(ctx context.Context, lin meta.LIN, ups []meta.StripeUpdate, fresh [][]meta.Unit, co meta.CommitOptions) ([]meta.Stripe, error) {
	h.mu.Lock()
	fn := h.before
	h.mu.Unlock()
	if fn != nil {
		for _, up := range ups {
			fn(lin, up.Stripe)
		}
	}
	return h.DataPath.CommitStripes(ctx, lin, ups, fresh, co)
}

func (h *hookedData) setBefore(fn func(meta.LIN, meta.Stripe)) {
	h.mu.Lock()
	h.before = fn
	h.mu.Unlock()
}

var _ restripe.DataPath = (*hookedData)(nil)
