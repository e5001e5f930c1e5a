package jobs

import (
	"context"
	"math"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// LIN scans: a phase whose items are the LINs of regular files, split into
// ranges of the LIN space [meta.FirstLIN, LINBound).

// linPage is how many LINs one item of a page scan covers: the tier
// job's scan and the fsck job's LIN passes each read a page of inodes in
// one store read.
const linPage = 256

// linPages returns the pages [0, hi) that cover the LINs allocated so far
// (page 0 holds the root, below meta.FirstLIN), cut into about n tasks of
// scope.
func linPages(ctx context.Context, m *meta.Meta, scope string, n int) (hi uint64, tasks []job.TaskSpec, err error) {
	bound, err := m.LINBound(ctx)
	if err != nil {
		return 0, nil, err
	}
	hi = (uint64(bound) + linPage - 1) / linPage
	return hi, job.SplitRange(scope, 0, hi, n), nil
}

// pageItems is Items of a page scan: every page in [from, to), up to
// limit.
func pageItems(from, to uint64, limit int) []uint64 {
	var out []uint64
	for p := from; p < to && len(out) < limit; p++ {
		out = append(out, p)
	}
	return out
}

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
// which keep is true, in order (listInodes).
func listLINs(ctx context.Context, m *meta.Meta, from, to uint64, limit int, keep func(meta.Inode) bool) ([]uint64, error) {
	return listInodes(ctx, m, from, to, limit, func(in meta.Inode) bool { return in.Type == meta.TypeFile && keep(in) })
}

// listInodes returns up to limit LINs of inodes in [from, to) for which
// keep is true, in order. It reads pages until it has limit LINs or the
// range ends, so a short result means the range is exhausted.
func listInodes(ctx context.Context, m *meta.Meta, from, to uint64, limit int, keep func(meta.Inode) bool) ([]uint64, error) {
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
			if keep(in) {
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
