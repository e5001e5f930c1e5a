package restripe

import (
	"errors"
	"fmt"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
)

// ErrLost marks the error of a stripe whose data is gone for good: fewer
// of its units are left than a read needs, counting as left every unit
// that may still read (on a drive that is down or did not answer), so
// that a node coming back cannot bring it back. Such an error is a
// *LostError and also wraps client.ErrUnavailable, which callers that
// only tell "too few units" see.
var ErrLost = errors.New("restripe: data lost")

// LostError is the error of a stripe found lost (errors.Is ErrLost and
// client.ErrUnavailable): the stripe as it was found, the units left and
// needed, and what became of the others. Stripe gives the entry of the
// namespace's lost-data list (meta.Meta.RecordLost).
type LostError struct {
	LIN    meta.LIN
	Stripe meta.LostStripe
}

func (e *LostError) Error() string {
	return fmt.Sprintf("%v: LIN %d stripe %d (generation %d): %d units left, %d needed (%s): its data cannot be rebuilt; restore the file from a backup",
		ErrLost, e.LIN, e.Stripe.Index, e.Stripe.Gen, e.Stripe.Readable, e.Stripe.Needed, e.Stripe.Reason)
}

// Is makes errors.Is hold for ErrLost and client.ErrUnavailable.
func (e *LostError) Is(target error) bool {
	return target == ErrLost || target == client.ErrUnavailable
}

// goneFor reports whether a unit read failed because its block is gone or
// damaged (not found, checksum, identity), as opposed to unreachable for
// now.
func goneFor(err error) bool {
	return errors.Is(err, drive.ErrNotFound) || errors.Is(err, drive.ErrCorrupt)
}

// lostOf returns the LostError of stripe s of lin if fewer than needed of
// its units may still read: gone says which units are known gone (not
// placed, damaged, not found), why why. Nil if the stripe may come back.
func lostOf(lin meta.LIN, s meta.Stripe, needed int, gone map[int]string) *LostError {
	left := len(s.Units) - len(gone)
	if left >= needed {
		return nil
	}
	return &LostError{LIN: lin, Stripe: meta.LostStripe{Index: s.Index, Gen: s.Gen, DataLen: s.DataLen,
		Readable: left, Needed: needed, Reason: unitReasons(gone)}}
}

// unitReasons formats why units failed, in unit order.
func unitReasons(why map[int]string) string {
	bad := make(map[int]error, len(why))
	for i, w := range why {
		bad[i] = errors.New(w)
	}
	return reasons(bad)
}
