package jobs

import (
	"context"
	"math"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// LIN scans: a phase whose items are the LINs of regular files, split into
// ranges of the LIN space [meta.FirstLIN, LINBound).

// scanPage is how many inodes one ScanInodes call reads.
const scanPage = 256

// splitLINs splits the LIN space into about n ranges (at least 1).
func splitLINs(ctx context.Context, m *meta.Meta, n int) ([]job.TaskSpec, error) {
	bound, err := m.LINBound(ctx)
	if err != nil {
		return nil, err
	}
	lo, hi := uint64(meta.FirstLIN), uint64(bound)
	if hi <= lo {
		return nil, nil
	}
	n = max(n, 1)
	width := max((hi-lo+uint64(n)-1)/uint64(n), 1)
	var out []job.TaskSpec
	for from := lo; from < hi; from += width {
		out = append(out, job.TaskSpec{Scope: "lin", From: from, To: min(from+width, hi)})
	}
	return out, nil
}

// listLINs returns up to limit LINs of regular files in [from, to) for
// which keep is true, in order. It reads pages until it has limit LINs or
// the range ends, so a short result means the range is exhausted.
func listLINs(ctx context.Context, m *meta.Meta, from, to uint64, limit int, keep func(meta.Inode) bool) ([]uint64, error) {
	var out []uint64
	next := meta.LIN(from)
	for next != 0 && uint64(next) < to && len(out) < limit {
		inodes, after, err := m.ScanInodes(ctx, next, meta.LIN(to), min(scanPage, limit-len(out)+1))
		if err != nil {
			return nil, err
		}
		for _, in := range inodes {
			if len(out) == limit {
				return out, nil
			}
			if in.Type == meta.TypeFile && keep(in) {
				out = append(out, uint64(in.LIN))
			}
		}
		next = after
	}
	return out, nil
}

// underProtected returns the LINs in [from, to) with stripes in the
// protection index (units not placed, or below their pool's target
// tolerance): the WDL does not show those.
func underProtected(ctx context.Context, m *meta.Meta, from, to uint64) (map[meta.LIN]bool, error) {
	out := map[meta.LIN]bool{}
	after := meta.StripeRef{LIN: meta.LIN(from) - 1, Index: math.MaxUint64}
	for {
		refs, err := m.ListUnderProtected(ctx, after, scanPage)
		if err != nil {
			return nil, err
		}
		for _, r := range refs {
			if uint64(r.LIN) >= to {
				return out, nil
			}
			out[r.LIN] = true
		}
		if len(refs) < scanPage {
			return out, nil
		}
		after = refs[len(refs)-1]
	}
}
