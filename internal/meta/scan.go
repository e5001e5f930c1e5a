package meta

import (
	"context"
	"fmt"
	"math"

	"github.com/weftfs/weft/internal/kv"
)

// ScanInodes returns up to limit inodes with from <= LIN < to (to 0: no
// bound) in LIN order, with back-pointers, and the LIN to pass as from for
// the next page (0 when the range is exhausted; a full page that ends
// just at the range's end may return a LIN whose page is empty). It
// reads one snapshot per call, a window of LINs at a time
// (scanInodeKeys); jobs page through LIN ranges with it. limit < 2 means
// 2.
func (m *Meta) ScanInodes(ctx context.Context, from, to LIN, limit int) ([]Inode, LIN, error) {
	if limit < 2 {
		limit = 2
	}
	if to == 0 {
		to = math.MaxUint64
	}
	var out []Inode
	var next LIN
	err := m.view(ctx, func(o *op) error {
		out, next = nil, 0
		kvs, more, err := o.scanInodeKeys(from, to, limit)
		if err != nil {
			return err
		}
		var last *inode
		var lastTimes *dirTimes
		emit := func() {
			if last != nil {
				out = append(out, last.full(lastTimes))
			}
			last, lastTimes = nil, nil
		}
		for _, p := range kvs {
			lin := linAt(p.Key, 1)
			if len(p.Key) == 10 && p.Key[9] == dirTimesSuffix {
				if last != nil && last.lin == lin {
					t, err := decodeDirTimes(lin, p.Value)
					if err != nil {
						return err
					}
					lastTimes = &t
				}
				continue
			}
			if len(p.Key) != 9 {
				continue // an open record
			}
			emit()
			if last, err = decodeInode(lin, p.Value); err != nil {
				return err
			}
		}
		if more && last != nil && last.typ == TypeDir && lastTimes == nil {
			// Its times record may be on the next page: read it again there.
			next = last.lin
			last = nil
		} else if more {
			next = linAt(kvs[len(kvs)-1].Key, 1) + 1
		}
		emit()
		return nil
	})
	return out, next, err
}

// scanInodeKeys returns up to limit records of the inode table with
// from <= LIN < to, in key order, and whether records may
// follow them in the range (false: the range is exhausted). It reads
// them in o's snapshot, in windows of LINs: the first of limit LINs,
// each next one twice as wide, until it has limit records or reaches to.
//
// Why windows: etcd answers a Range with a limit by visiting every key
// of its index from the start to the end of the range (to count them
// all, whatever the limit), so a page read up to a far bound costs as
// much as reading the whole rest of the range, and paging through n
// inodes that way costs n²/limit visits (a 1M-inode scan with pages of
// 256: about 2e9). A window bounds each read's visits by about twice the
// records it returns, at the cost of a few more round trips where LINs
// are sparse.
func (o *op) scanInodeKeys(from, to LIN, limit int) ([]kv.KV, bool, error) {
	if from >= to {
		return nil, false, nil
	}
	var out []kv.KV
	win := LIN(max(limit, 1))
	for lo := from; len(out) < limit; {
		hi := to
		if to-lo > win {
			hi = lo + win
		}
		kvs, more, err := o.tx.Scan(keyInode(lo), keyInode(hi), limit-len(out))
		if err != nil {
			return nil, false, err
		}
		out = append(out, kvs...)
		switch {
		case more != nil:
			return out, true, nil
		case hi == to:
			return out, false, nil
		}
		lo = hi
		if win < math.MaxUint64/4 {
			win *= 2
		}
	}
	// Full at a window's end below to: more may follow (or none: the
	// next page is then empty).
	return out, true, nil
}

// LINBound returns a LIN above every LIN allocated so far (the shared
// counter; clients hold unused batches below it). Jobs split [FirstLIN,
// LINBound) into ranges.
func (m *Meta) LINBound(ctx context.Context) (LIN, error) {
	var next LIN
	err := m.view(ctx, func(o *op) error {
		b, err := o.tx.Get(keyNextLIN())
		if err != nil {
			return err
		}
		if b == nil {
			return fmt.Errorf("%w: no LIN counter", ErrNotFormatted)
		}
		next, err = decodeNextLIN(b)
		return err
	})
	return next, err
}
