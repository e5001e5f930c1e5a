package meta

import (
	"context"
	"fmt"
	"slices"
)

// XattrFlags modify SetXattr, like setxattr(2)'s.
type XattrFlags uint8

// SetXattr flags.
const (
	// XattrCreate fails with ErrExists if the attribute exists.
	XattrCreate XattrFlags = 1 << iota
	// XattrReplace fails with ErrNoXattr if the attribute does not exist.
	XattrReplace
)

// GetXattr returns the value of extended attribute name of lin. Errors:
// ErrNotFound (no inode), ErrNoXattr, ErrInvalid or ErrXattrTooLarge (bad
// name). One round trip.
func (m *Meta) GetXattr(ctx context.Context, lin LIN, name string) ([]byte, error) {
	if err := validXattrName(name); err != nil {
		return nil, err
	}
	var v []byte
	err := m.view(ctx, func(o *op) error {
		vals, err := o.load([]LIN{lin}, keyXattr(lin, name))
		if err != nil {
			return err
		}
		if _, err := o.inode(lin); err != nil {
			return err
		}
		if v = vals[0]; v == nil {
			return fmt.Errorf("%w: %q on LIN %d", ErrNoXattr, name, lin)
		}
		return nil
	})
	return v, err
}

// ListXattr returns the names of lin's extended attributes, sorted. Errors:
// ErrNotFound.
func (m *Meta) ListXattr(ctx context.Context, lin LIN) ([]string, error) {
	var names []string
	err := m.view(ctx, func(o *op) error {
		n, err := o.inode(lin)
		if err != nil {
			return err
		}
		names = slices.Clone(n.xattrs)
		return nil
	})
	return names, err
}

// SetXattr sets extended attribute name of lin to value and changes ctime.
// Errors: ErrNotFound, ErrExists (XattrCreate), ErrNoXattr (XattrReplace),
// ErrXattrTooLarge (name over MaxXattrNameLen, value over MaxXattrValueLen,
// or the inode's names over MaxXattrListLen), ErrInvalid.
func (m *Meta) SetXattr(ctx context.Context, lin LIN, name string, value []byte, flags XattrFlags) error {
	if err := validXattrName(name); err != nil {
		return err
	}
	if len(value) > MaxXattrValueLen {
		return fmt.Errorf("%w: value of %d bytes for %q, the limit is %d", ErrXattrTooLarge, len(value), name, MaxXattrValueLen)
	}
	if flags == XattrCreate|XattrReplace || flags&^(XattrCreate|XattrReplace) != 0 {
		return fmt.Errorf("%w: xattr flags %#x", ErrInvalid, flags)
	}
	return m.update(ctx, func(o *op) error {
		n, err := o.inode(lin)
		if err != nil {
			return err
		}
		i, exists := slices.BinarySearch(n.xattrs, name)
		switch {
		case exists && flags&XattrCreate != 0:
			return fmt.Errorf("%w: xattr %q on LIN %d", ErrExists, name, lin)
		case !exists && flags&XattrReplace != 0:
			return fmt.Errorf("%w: %q on LIN %d", ErrNoXattr, name, lin)
		case !exists:
			if listLen(n.xattrs)+len(name)+1 > MaxXattrListLen {
				return fmt.Errorf("%w: the names of LIN %d's xattrs would exceed %d bytes", ErrXattrTooLarge, lin, MaxXattrListLen)
			}
			n.xattrs = slices.Insert(n.xattrs, i, name)
		}
		o.put(keyXattr(lin, name), value)
		o.change(n)
		return nil
	})
}

// RemoveXattr removes extended attribute name of lin. Errors: ErrNotFound,
// ErrNoXattr, ErrInvalid.
func (m *Meta) RemoveXattr(ctx context.Context, lin LIN, name string) error {
	if err := validXattrName(name); err != nil {
		return err
	}
	return m.update(ctx, func(o *op) error {
		n, err := o.inode(lin)
		if err != nil {
			return err
		}
		i, exists := slices.BinarySearch(n.xattrs, name)
		if !exists {
			return fmt.Errorf("%w: %q on LIN %d", ErrNoXattr, name, lin)
		}
		n.xattrs = slices.Delete(n.xattrs, i, i+1)
		o.del(keyXattr(lin, name))
		o.change(n)
		return nil
	})
}

func listLen(names []string) int {
	n := 0
	for _, s := range names {
		n += len(s) + 1
	}
	return n
}
