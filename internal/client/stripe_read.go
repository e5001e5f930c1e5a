package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
)

// StoredLayout returns the layout stripe s of lin was written with (its
// protection and unit length; erasure.StoredLayout: a truncate may have
// shortened its data since): what reading, rebuilding or checking its
// units works from. It is pure. Errors wrap ErrCorrupt for a map without
// any placed unit, with placed units of different lengths or a width
// that does not match its protection, and ErrInvalid for an unknown
// protection scheme.
func StoredLayout(lin meta.LIN, s meta.Stripe) (erasure.StripeLayout, error) {
	if s.IsInline() {
		return erasure.StripeLayout{}, fmt.Errorf("%w: LIN %d stripe %d is inline: it has no units", ErrInvalid, lin, s.Index)
	}
	p, err := toErasure(s.Protection)
	if err != nil {
		return erasure.StripeLayout{}, err
	}
	unitLen := -1
	for _, u := range s.Units {
		if !u.Placed() {
			continue
		}
		if unitLen >= 0 && int(u.Length) != unitLen {
			return erasure.StripeLayout{}, fmt.Errorf("%w: LIN %d stripe %d has units of %d and %d bytes", ErrCorrupt, lin, s.Index, unitLen, u.Length)
		}
		unitLen = int(u.Length)
	}
	if unitLen < 0 {
		return erasure.StripeLayout{}, fmt.Errorf("%w: LIN %d stripe %d has no placed unit", ErrCorrupt, lin, s.Index)
	}
	l, err := erasure.StoredLayout(p, unitLen, int(s.DataLen))
	if err != nil {
		return l, fmt.Errorf("%w: LIN %d stripe %d: %w", ErrCorrupt, lin, s.Index, err)
	}
	if l.Width() != len(s.Units) {
		return l, fmt.Errorf("%w: LIN %d stripe %d has %d units, %v needs %d", ErrCorrupt, lin, s.Index, len(s.Units), l, l.Width())
	}
	return l, nil
}

// readStripe fills dst with the stripe bytes [off, off+len(dst)) of s;
// bytes past the stripe's data read as zeros.
//
// It reads only the data units holding the range, in parallel. If one of
// them is missing, corrupt, unreachable or on a drive the topology says is
// down, it reads the same range of other units instead and reconstructs
// (a mirrored stripe: another copy), and notes the stripe as needing
// repair. A "block not found" may mean the map is stale (a restriper or
// another writer moved the stripe): the map is read again first, and the
// read retried once with the new one if its generation moved.
func (ino *inode) readStripe(ctx context.Context, s meta.Stripe, off, n int, dst []byte) error {
	dst = dst[:n]
	if s.IsInline() {
		m := 0
		if off < len(s.Inline) {
			m = copy(dst, s.Inline[off:])
		}
		clear(dst[m:])
		return nil
	}
	bad := map[int]error{}
	for refreshed := false; ; refreshed = true {
		stale, err := ino.readOnce(ctx, s, off, dst, bad, !refreshed)
		if !stale {
			if errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
				ino.c.noteUnreadable(ctx, ino.lin, s, err)
			}
			return err
		}
		fresh, ok, err := ino.stripe(ctx, int64(s.Index), true)
		if err != nil {
			return err
		}
		if !ok {
			clear(dst) // the stripe is gone (truncated): a hole now
			return nil
		}
		if fresh.Gen != s.Gen {
			clear(bad)
		}
		s = fresh
	}
}

// unitRead is one range of one unit to fetch.
type unitRead struct {
	unit    int
	off, n  int
	dst     []byte // where the bytes go, if the read can put them there (nil: anywhere)
	data    []byte
	err     error
	skipped bool // not tried: unplaced or on a down drive
	tryDown bool // try it even if the topology says its drive is down
}

// readOnce is one attempt of readStripe with map s. bad collects the
// units that failed (kept across a refresh that did not change the
// generation). With staleCheck, a "not found" from an up drive makes it
// return stale instead of reconstructing.
func (ino *inode) readOnce(ctx context.Context, s meta.Stripe, off int, dst []byte, bad map[int]error, staleCheck bool) (stale bool, err error) {
	l, err := StoredLayout(ino.lin, s)
	if err != nil {
		return false, err
	}
	if end := int(s.DataLen); off+len(dst) > end {
		clear(dst[max(0, end-off):])
	}
	exts := l.Locate(off, len(dst))
	if len(exts) == 0 {
		return false, nil
	}
	view, err := ino.c.view(ctx)
	if err != nil {
		return false, err
	}
	if l.Mirrored {
		return ino.readMirror(ctx, s, view, exts[0], dst, bad, staleCheck)
	}
	// Fast path: the data units holding the range.
	reads := make([]unitRead, len(exts))
	at := 0
	for i, e := range exts {
		reads[i] = unitRead{unit: e.Unit, off: e.Off, n: e.Len, dst: dst[at : at+e.Len]}
		at += e.Len
		if err, ok := bad[e.Unit]; ok {
			reads[i].err, reads[i].skipped = err, true
		}
	}
	ino.fetch(ctx, s, view, reads)
	if err := ctx.Err(); err != nil {
		return false, err
	}
	ok := true
	for i := range reads {
		r := &reads[i]
		if r.err == nil {
			continue
		}
		ok = false
		if !r.skipped || !s.Units[r.unit].Placed() {
			// A unit skipped for its down drive stays a last resort.
			bad[r.unit] = r.err
		}
		if staleCheck && !r.skipped && errors.Is(r.err, drive.ErrNotFound) {
			stale = true
		}
	}
	if ok {
		for i := range reads {
			if r := &reads[i]; len(r.data) > 0 && &r.data[0] != &r.dst[0] {
				copy(r.dst, r.data)
			}
		}
		return false, nil
	}
	if stale {
		return true, nil
	}
	return false, ino.reconstruct(ctx, s, l, view, exts, dst, bad)
}

// readMirror reads extent e from the first copy that answers, up drives
// first. A read while a copy is missing, failing or on a down drive is a
// degraded read.
func (ino *inode) readMirror(ctx context.Context, s meta.Stripe, view *Snapshot, e erasure.Extent, dst []byte, bad map[int]error, staleCheck bool) (bool, error) {
	order := ino.unitOrder(s, view, bad, len(s.Units))
	notFound := false
	for _, i := range order {
		r := []unitRead{{unit: i, off: e.Off, n: e.Len, tryDown: true}}
		ino.fetch(ctx, s, view, r)
		if r[0].err == nil {
			copy(dst, r[0].data)
			for j, u := range s.Units {
				if _, failed := bad[j]; !failed && (!u.Placed() || !view.Up(u.Drive)) {
					bad[j] = fmt.Errorf("copy %d is unplaced or on a down drive", j)
				}
			}
			if len(bad) > 0 {
				ino.c.noteDegraded(ino.lin, s, reasons(bad))
			}
			return false, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		bad[i] = r[0].err
		notFound = notFound || errors.Is(r[0].err, drive.ErrNotFound)
	}
	if staleCheck && notFound {
		return true, nil
	}
	return false, ino.unavailable(s, bad, 1)
}

// reconstruct reads the column range of exts from enough units other than
// the bad ones and rebuilds the data units from them (Reed–Solomon works
// byte column by byte column, so a range of every unit is a smaller code
// of the same shape).
func (ino *inode) reconstruct(ctx context.Context, s meta.Stripe, l erasure.StripeLayout, view *Snapshot, exts []erasure.Extent, dst []byte, bad map[int]error) error {
	lo, hi := exts[0].Off, 0
	for _, e := range exts {
		lo, hi = min(lo, e.Off), max(hi, e.Off+e.Len)
	}
	shards := make([][]byte, l.Width())
	have := 0
	order := ino.unitOrder(s, view, bad, l.Width())
	for have < l.Data && len(order) > 0 {
		take := order[:min(l.Data-have, len(order))]
		order = order[len(take):]
		reads := make([]unitRead, len(take))
		for i, u := range take {
			reads[i] = unitRead{unit: u, off: lo, n: hi - lo, tryDown: true}
		}
		ino.fetch(ctx, s, view, reads)
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, r := range reads {
			if r.err != nil {
				bad[r.unit] = r.err
				continue
			}
			shards[r.unit] = r.data
			have++
		}
	}
	if have < l.Data {
		return ino.unavailable(s, bad, l.Data)
	}
	sub := erasure.StripeLayout{Protection: l.Protection, Data: l.Data, Parity: l.Parity, UnitLen: hi - lo}
	if err := ino.c.codec.ReconstructData(shards, sub); err != nil {
		return fmt.Errorf("%w: LIN %d stripe %d: %w", ErrUnavailable, ino.lin, s.Index, err)
	}
	at := 0
	for _, e := range exts {
		at += copy(dst[at:], shards[e.Unit][e.Off-lo:e.Off-lo+e.Len])
	}
	ino.c.noteDegraded(ino.lin, s, reasons(bad))
	return nil
}

// unitOrder lists the units worth trying, in order of preference: placed
// units on up drives (data units first), then units on drives the topology
// says are down (it may be stale), as a last resort. Units in bad and
// unplaced ones are left out.
func (ino *inode) unitOrder(s meta.Stripe, view *Snapshot, bad map[int]error, width int) []int {
	var up, down []int
	for i := 0; i < width && i < len(s.Units); i++ {
		u := s.Units[i]
		if _, ok := bad[i]; ok || !u.Placed() {
			continue
		}
		if view.Up(u.Drive) {
			up = append(up, i)
		} else {
			down = append(down, i)
		}
	}
	return append(up, down...)
}

// fetch runs the reads in parallel. A unit that is unplaced, or on a drive
// the topology says is down (unless tryDown), is not tried: its err is
// set and it is marked skipped.
func (ino *inode) fetch(ctx context.Context, s meta.Stripe, view *Snapshot, reads []unitRead) {
	var wg sync.WaitGroup
	for i := range reads {
		r := &reads[i]
		if r.skipped {
			continue
		}
		u := s.Units[r.unit]
		switch {
		case !u.Placed():
			r.err, r.skipped = fmt.Errorf("unit %d is not placed (under-protected stripe)", r.unit), true
			continue
		case !view.Up(u.Drive) && !r.tryDown:
			r.err, r.skipped = fmt.Errorf("unit %d is on drive %d, which is down", r.unit, u.Drive), true
			continue
		}
		ref := unitRef{lin: ino.lin, stripe: s.Index, index: r.unit, unit: u, node: view.Node(u.Drive), local: view.local(u.Drive), pool: view.pool(u.Drive)}
		if len(reads) == 1 {
			r.data, r.err = ino.c.getUnitInto(ctx, ref, r.off, r.n, r.dst)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.data, r.err = ino.c.getUnitInto(ctx, ref, r.off, r.n, r.dst)
		}()
	}
	wg.Wait()
}

// unavailable is the error for a stripe with fewer than needed readable
// units.
func (ino *inode) unavailable(s meta.Stripe, bad map[int]error, needed int) error {
	return fmt.Errorf("%w: LIN %d stripe %d: %d of %d units readable, %d needed (%s); bring the drives or nodes back up",
		ErrUnavailable, ino.lin, s.Index, len(s.Units)-len(bad), len(s.Units), needed, reasons(bad))
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
