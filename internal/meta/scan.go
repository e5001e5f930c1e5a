package meta

import (
	"context"
	"fmt"
	"math"
)

// ScanInodes returns up to limit inodes with from <= LIN < to (to 0: no
// bound) in LIN order, with back-pointers, and the LIN to pass as from for
// the next page (0 when the range is exhausted). It reads one snapshot per
// call; jobs page through LIN ranges with it. limit < 2 means 2.
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
		kvs, more, err := o.tx.Scan(keyInode(from), keyInode(to), limit)
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
		if more != nil && last != nil && last.typ == TypeDir && lastTimes == nil {
			// Its times record may be on the next page: read it again there.
			next = last.lin
			last = nil
		} else if more != nil {
			next = linAt(kvs[len(kvs)-1].Key, 1) + 1
		}
		emit()
		return nil
	})
	return out, next, err
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
