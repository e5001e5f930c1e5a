package meta

import (
	"context"
	"fmt"
)

// Holes. A stripe without a map is a hole: it stores nothing and reads as
// zeros. Holes need no record of their own, so punching one or extending a
// file over one changes no format.

// DropStripes makes stripes [from, to) of regular file lin holes: their
// maps, protection-index and lost-data entries are deleted and their
// blocks go to the delete queue, as a truncate does with the stripes past
// the end; the size stays. A range with more stripes than fit in one
// transaction is dropped in several, from the lowest up (concurrent
// readers may see part of it as holes first); the last transaction sets
// mtime and ctime, and grows the file to size bytes if it is shorter (0:
// no change): the size buffered writes in the range would have committed,
// which the caller drops instead of writing. It is idempotent. It returns
// the new attributes.
//
// Errors: ErrNotFound; ErrIsDir, or ErrInvalid for another type that is
// not a regular file or for from > to.
func (m *Meta) DropStripes(ctx context.Context, lin LIN, from, to, size uint64) (Attr, error) {
	if from > to {
		return Attr{}, fmt.Errorf("%w: drop stripes [%d, %d) of LIN %d: the range ends before it starts", ErrInvalid, from, to, lin)
	}
	for {
		var res *Attr
		err := m.update(ctx, func(o *op) error {
			res = nil
			o.withUsage()
			n, t, err := o.loadAttr(lin)
			if err != nil {
				return err
			}
			if err := fileOnly(n, "drop stripes of"); err != nil {
				return err
			}
			if from < to && n.stripeSize > 0 {
				finished, err := o.deleteStripeRange(n, keyStripe(lin, from), keyStripe(lin, to))
				if err != nil || !finished {
					return err
				}
			}
			if size > n.size {
				o.addUsage(n.pool, Usage{Bytes: int64(size - n.size)})
				n.size = size
			}
			n.mtime = o.now
			o.change(n)
			a := n.attr(t)
			res = &a
			return nil
		})
		if err != nil {
			return Attr{}, err
		}
		if res != nil { // else one chunk committed: go on
			return *res, nil
		}
	}
}

// Extend grows regular file lin to size bytes if it is shorter (the new
// bytes are a hole), setting mtime and ctime; a file already that long is
// left as it is. Unlike SetAttr(SetSize) it never shrinks a file, so a
// writer that extends it meanwhile (from another client) keeps its data.
// It returns the new attributes. Errors: ErrNotFound; ErrIsDir, or
// ErrInvalid for another type that is not a regular file.
func (m *Meta) Extend(ctx context.Context, lin LIN, size uint64) (Attr, error) {
	var a Attr
	err := m.update(ctx, func(o *op) error {
		o.withUsage()
		n, t, err := o.loadAttr(lin)
		if err != nil {
			return err
		}
		if err := fileOnly(n, "extend"); err != nil {
			return err
		}
		if size > n.size {
			o.addUsage(n.pool, Usage{Bytes: int64(size - n.size)})
			n.size = size
			n.mtime = o.now
			o.change(n)
		}
		a = n.attr(t)
		return nil
	})
	return a, err
}

// fileOnly refuses an inode that is not a regular file for what.
func fileOnly(n *inode, what string) error {
	switch {
	case n.typ == TypeDir:
		return fmt.Errorf("%w: cannot %s directory LIN %d", ErrIsDir, what, n.lin)
	case n.typ != TypeFile:
		return fmt.Errorf("%w: cannot %s %s LIN %d: not a regular file", ErrInvalid, what, n.typ, n.lin)
	}
	return nil
}
