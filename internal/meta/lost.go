package meta

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/weftfs/weft/internal/kv"
)

// The lost-data list ("l" keys, format 2): stripes a job found
// unrecoverable — too few of their units left to read them, for good (not
// merely on drives that are down). An entry stays until the stripe is
// replaced by a client commit (the data rewritten) or deleted (the file
// truncated below it or deleted); a restripe commit keeps it. `weft file
// lost list` shows the list and `weft status` counts it.

// LostStripe is one stripe of the lost-data list.
type LostStripe struct {
	Index uint64 `json:"stripe"`
	// Gen is the generation found lost, DataLen its file bytes then.
	Gen     uint64 `json:"gen"`
	DataLen uint64 `json:"data_len"`
	// Readable counts the units left that may still read, Needed those a
	// read needs.
	Readable int `json:"readable"`
	Needed   int `json:"needed"`
	// Reason says what was found (clipped to 300 bytes).
	Reason string `json:"reason"`
	// Since is when the stripe was first found lost.
	Since time.Time `json:"since"`
}

// LostFile is one file of the lost-data list.
type LostFile struct {
	LIN LIN `json:"lin"`
	// Size and StripeSize are the file's, as the list was read; Nlink 0
	// means the file is unlinked but still open somewhere.
	Size       uint64       `json:"size"`
	StripeSize uint64       `json:"stripe_size"`
	Nlink      uint32       `json:"nlink"`
	Stripes    []LostStripe `json:"stripes"`
	// Since is when the first of its stripes was found lost.
	Since time.Time `json:"since"`
}

// ByteRange is a range of a file's bytes.
type ByteRange struct {
	Offset uint64 `json:"offset"`
	Length uint64 `json:"length"`
}

// String formats r as "FIRST-LAST" (byte offsets, both included).
func (r ByteRange) String() string { return fmt.Sprintf("%d-%d", r.Offset, r.Offset+r.Length-1) }

// Ranges returns the file bytes of f's lost stripes, adjacent stripes
// merged, each cut at the file's size.
func (f LostFile) Ranges() []ByteRange {
	var out []ByteRange
	for _, s := range f.Stripes {
		off := s.Index * f.StripeSize
		if off >= f.Size {
			continue
		}
		n := min(s.DataLen, f.Size-off)
		if n == 0 {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k].Offset+out[k].Length == off {
			out[k].Length += n
			continue
		}
		out = append(out, ByteRange{Offset: off, Length: n})
	}
	return out
}

// Bytes is the sum of f's lost ranges.
func (f LostFile) Bytes() uint64 {
	var n uint64
	for _, r := range f.Ranges() {
		n += r.Length
	}
	return n
}

// RecordLost adds stripes of file lin to the lost-data list, each only if
// the file still has it at the generation found lost (a stripe rewritten
// or removed meanwhile is not lost any more); a stripe already listed
// keeps its entry and since. A zero Since means now. It reports whether
// the file was not in the list before and now is (first: the caller
// records one data-lost event per file), and how many stripes it added.
// Idempotent. Errors: ErrNotFound (the file is gone: nothing to list),
// ErrInvalid (not a regular file, or no stripes given), the store's.
func (m *Meta) RecordLost(ctx context.Context, lin LIN, stripes []LostStripe) (first bool, added int, err error) {
	if len(stripes) == 0 {
		return false, 0, fmt.Errorf("%w: no lost stripe to record for LIN %d", ErrInvalid, lin)
	}
	err = m.update(ctx, func(o *op) error {
		first, added = false, 0
		keys := make([][]byte, 0, 2*len(stripes))
		for _, s := range stripes {
			keys = append(keys, keyStripe(lin, s.Index), keyLost(lin, s.Index))
		}
		vals, err := o.load([]LIN{lin}, keys...)
		if err != nil {
			return err
		}
		n, err := o.inode(lin)
		if err != nil {
			return err
		}
		if n.typ != TypeFile {
			return fmt.Errorf("%w: LIN %d is a %s: only regular files have stripes", ErrInvalid, lin, n.typ)
		}
		start, end := linRange(pfxLost, lin)
		listed, _, err := o.tx.Scan(start, end, 1)
		if err != nil {
			return err
		}
		for i, l := range stripes {
			sv, lv := vals[2*i], vals[2*i+1]
			if sv == nil || lv != nil {
				continue
			}
			s, err := decodeStripe(keys[2*i], sv)
			if err != nil {
				return err
			}
			if s.Gen != l.Gen {
				continue
			}
			if l.Since.IsZero() {
				l.Since = time.Unix(0, o.now)
			}
			if l.DataLen == 0 {
				l.DataLen = s.DataLen
			}
			o.put(keyLost(lin, l.Index), encodeLost(l))
			added++
		}
		first = added > 0 && len(listed) == 0
		return nil
	})
	return first, added, err
}

// ListLost returns up to limit files of the lost-data list with LIN >
// after, in LIN order (limit < 1 means 1), with their size and stripe size
// as read after the list (a file deleted meanwhile is left out). The list
// is read in pages, not one snapshot. Errors: the store's; ErrCorrupt.
func (m *Meta) ListLost(ctx context.Context, after LIN, limit int) ([]LostFile, error) {
	limit = max(limit, 1)
	var files []LostFile
	err := m.eachIndexed(ctx, pfxLost, after, func(p kv.KV) (bool, error) {
		l, err := decodeLost(p.Key, p.Value)
		if err != nil {
			return false, err
		}
		lin := linAt(p.Key, 1)
		if len(files) == 0 || files[len(files)-1].LIN != lin {
			if len(files) == limit {
				return false, nil
			}
			files = append(files, LostFile{LIN: lin, Since: l.Since})
		}
		f := &files[len(files)-1]
		f.Stripes = append(f.Stripes, l)
		if l.Since.Before(f.Since) {
			f.Since = l.Since
		}
		return true, nil
	})
	if err != nil || len(files) == 0 {
		return nil, err
	}
	lins := make([]LIN, len(files))
	for i, f := range files {
		lins[i] = f.LIN
	}
	var out []LostFile
	err = m.view(ctx, func(o *op) error {
		out = out[:0]
		if _, err := o.load(lins); err != nil {
			return err
		}
		for _, f := range files {
			n := o.inodes[f.LIN]
			if n == nil {
				continue
			}
			f.Size, f.StripeSize, f.Nlink = n.size, n.stripeSize, n.nlink
			out = append(out, f)
		}
		return nil
	})
	return slices.Clip(out), err
}
