package erasure

import (
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/reedsolomon"
)

// Codec turns a stripe's data into its units (shards or copies) and back.
// It is safe for concurrent use; it caches one Reed–Solomon encoder per
// (K, M) it has seen, so one Codec can serve files of any protection.
//
// Shards are the units of a stripe in unit order: data units 0..Data-1,
// then parity units (or, mirrored, the copies). A missing unit is a nil or
// zero-length slice. All present units have exactly layout.UnitLen bytes.
type Codec struct {
	mu   sync.RWMutex
	encs map[[2]int]reedsolomon.Encoder // (K, M) → encoder
}

// NewCodec returns a Codec with the encoder for p ready. It returns an
// error wrapping ErrBadProtection if p is invalid.
func NewCodec(p Protection) (*Codec, error) {
	if err := (Geometry{Protection: p}).Validate(); err != nil {
		return nil, err
	}
	c := &Codec{encs: make(map[[2]int]reedsolomon.Encoder)}
	if p.Mirrors == 0 {
		if _, err := c.encoder(p.Data, p.Parity); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// encoder returns the cached encoder for k+m, creating it on first use.
func (c *Codec) encoder(k, m int) (reedsolomon.Encoder, error) {
	key := [2]int{k, m}
	c.mu.RLock()
	enc, ok := c.encs[key]
	c.mu.RUnlock()
	if ok {
		return enc, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if enc, ok := c.encs[key]; ok {
		return enc, nil
	}
	enc, err := reedsolomon.New(k, m)
	if err != nil {
		return nil, fmt.Errorf("%w: reed-solomon %d+%d: %v", ErrBadGeometry, k, m, err)
	}
	if c.encs == nil {
		c.encs = make(map[[2]int]reedsolomon.Encoder)
	}
	c.encs[key] = enc
	return enc, nil
}

// Encode returns the l.Width() units of a stripe holding data, which must
// be exactly l.DataLen bytes (else ErrBadShards). It is EncodeInto with
// freshly allocated scratch memory.
//
// No data is copied where it can be avoided: a mirrored stripe's copies are
// all data itself, and the data units of an erasure-coded stripe that lie
// wholly inside data are sub-slices of it (capacity-limited, so appending
// to one never writes into data); only the padded tail unit(s) and the
// parity units are new memory. The caller must therefore not modify data
// while the returned units are in use, and must treat them as read-only.
func (c *Codec) Encode(data []byte, l StripeLayout) ([][]byte, error) {
	return c.EncodeInto(data, l, nil)
}

// EncodeInto is Encode with the padded data units and the parity units
// carved out of scratch when cap(scratch) ≥ l.ScratchLen() (allocated
// otherwise), so a writer can pool stripe buffers: allocating and zeroing
// the parity costs more than computing it. The returned units alias data
// and scratch; scratch must not be reused until they are written out.
func (c *Codec) EncodeInto(data []byte, l StripeLayout, scratch []byte) ([][]byte, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	if len(data) != l.DataLen {
		return nil, fmt.Errorf("%w: %d data bytes for a layout of %d (%v)", ErrBadShards, len(data), l.DataLen, l)
	}
	if l.Mirrored && l.UnitLen != l.DataLen {
		return nil, fmt.Errorf("%w: mirrored copies of %d bytes for %d data bytes (%v): encode with Geometry.Layout", ErrBadShards, l.UnitLen, l.DataLen, l)
	}
	shards := make([][]byte, l.Width())
	n := len(data)
	if l.Mirrored {
		for i := range shards {
			shards[i] = data[:n:n]
		}
		return shards, nil
	}
	u := l.UnitLen
	if u == 0 {
		for i := range shards {
			shards[i] = []byte{}
		}
		return shards, nil
	}
	whole := l.wholeUnits()
	buf := scratch[:0]
	if need := l.ScratchLen(); cap(buf) < need {
		buf = make([]byte, need)
	} else {
		buf = buf[:need]
	}
	for i := range shards {
		if i < whole {
			shards[i] = data[i*u : (i+1)*u : (i+1)*u]
			continue
		}
		s := buf[:u:u]
		buf = buf[u:]
		if i < l.Data {
			k := copy(s, data[min(i*u, n):])
			clear(s[k:]) // zero padding (scratch may hold old bytes)
		}
		shards[i] = s
	}
	enc, err := c.encoder(l.Data, l.Parity)
	if err != nil {
		return nil, err
	}
	if err := enc.Encode(shards); err != nil {
		return nil, fmt.Errorf("%w: encode %v: %v", ErrBadShards, l, err)
	}
	return shards, nil
}

// Reconstruct fills every missing unit of shards (len l.Width()) from the
// present ones. At least l.Needed() units must be present, else the error
// wraps ErrTooFewUnits and says how many were present and needed; shards
// of the wrong count or length give ErrBadShards. A missing unit with
// capacity ≥ l.UnitLen is filled in place, otherwise it is allocated; the
// missing copies of a mirrored stripe are set to a present copy (aliased,
// not copied). Integrity is not verified: checksums are the block layer's
// job.
func (c *Codec) Reconstruct(shards [][]byte, l StripeLayout) error {
	return c.reconstruct(shards, l, false)
}

// ReconstructData is Reconstruct restricted to the data units, for degraded
// reads: parity units that are missing stay missing. Errors are those of
// Reconstruct.
func (c *Codec) ReconstructData(shards [][]byte, l StripeLayout) error {
	return c.reconstruct(shards, l, true)
}

func (c *Codec) reconstruct(shards [][]byte, l StripeLayout, dataOnly bool) error {
	present, err := checkShards(shards, l)
	if err != nil {
		return err
	}
	want := l.Width()
	if dataOnly {
		want = l.Data
	}
	missing := 0
	for _, s := range shards[:want] {
		if len(s) == 0 {
			missing++
		}
	}
	switch {
	case missing == 0:
		return nil
	case present < l.Needed():
		return tooFew(present, l)
	case l.UnitLen == 0:
		for i := range shards[:want] {
			if shards[i] == nil {
				shards[i] = []byte{}
			}
		}
		return nil
	case l.Mirrored:
		src := firstPresent(shards)
		for i := range shards[:want] {
			if len(shards[i]) == 0 {
				shards[i] = src
			}
		}
		return nil
	}
	enc, err := c.encoder(l.Data, l.Parity)
	if err != nil {
		return err
	}
	if dataOnly {
		err = enc.ReconstructData(shards)
	} else {
		err = enc.Reconstruct(shards)
	}
	if err != nil {
		return fmt.Errorf("%w: reconstruct %v: %v", ErrBadShards, l, err)
	}
	return nil
}

// Join returns the l.DataLen data bytes of a stripe from its data units,
// which must be present (call ReconstructData first on a degraded stripe;
// else the error wraps ErrTooFewUnits). When the data sits in one unit
// (mirrored, or K = 1) the result aliases that unit; otherwise it is a new
// slice.
func Join(shards [][]byte, l StripeLayout) ([]byte, error) {
	if _, err := checkShards(shards, l); err != nil {
		return nil, err
	}
	if l.Data == 1 {
		s, err := dataUnit(shards, l, 0)
		if err != nil {
			return nil, err
		}
		return s[:l.DataLen:l.DataLen], nil
	}
	out := make([]byte, l.DataLen)
	if _, err := readAt(out, shards, l, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadAt copies the stripe data at offset off into dst from the data units
// of shards (or any copy when mirrored) and returns the bytes copied. Like
// io.ReaderAt it returns io.EOF when it copies fewer than len(dst) bytes
// because the stripe's data ends. A missing data unit in the range gives
// an error wrapping ErrTooFewUnits: call ReconstructData first.
func ReadAt(dst []byte, shards [][]byte, l StripeLayout, off int) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset %d", ErrBadShards, off)
	}
	if _, err := checkShards(shards, l); err != nil {
		return 0, err
	}
	n, err := readAt(dst, shards, l, off)
	if err != nil {
		return 0, err
	}
	if n < len(dst) {
		return n, io.EOF
	}
	return n, nil
}

// readAt copies the stripe bytes [off, off+len(dst)) ∩ [0, DataLen) into
// dst from already checked shards.
func readAt(dst []byte, shards [][]byte, l StripeLayout, off int) (int, error) {
	at := 0
	for _, e := range l.Locate(off, len(dst)) {
		s, err := dataUnit(shards, l, e.Unit)
		if err != nil {
			return 0, err
		}
		at += copy(dst[at:], s[e.Off:e.Off+e.Len])
	}
	return at, nil
}

// dataUnit returns data unit i of already checked shards (any present copy
// when mirrored), or an ErrTooFewUnits error if it is missing.
func dataUnit(shards [][]byte, l StripeLayout, i int) ([]byte, error) {
	s := shards[i]
	if l.Mirrored {
		s = firstPresent(shards)
	}
	if len(s) == 0 && l.UnitLen > 0 {
		return nil, fmt.Errorf("%w: data unit %d of %v is missing: reconstruct it first", ErrTooFewUnits, i, l)
	}
	return s, nil
}

// checkShards validates shards against l and counts the present units.
func checkShards(shards [][]byte, l StripeLayout) (present int, err error) {
	if err := l.validate(); err != nil {
		return 0, err
	}
	if len(shards) != l.Width() {
		return 0, fmt.Errorf("%w: %d units given, %v has %d", ErrBadShards, len(shards), l, l.Width())
	}
	for i, s := range shards {
		switch {
		case s == nil && l.UnitLen == 0:
		case len(s) == 0 && l.UnitLen > 0:
		case len(s) != l.UnitLen:
			return 0, fmt.Errorf("%w: unit %d is %d bytes, the %v layout wants %d", ErrBadShards, i, len(s), l, l.UnitLen)
		default:
			present++
		}
	}
	return present, nil
}

// tooFew is the error for a stripe with fewer than Needed units present.
func tooFew(present int, l StripeLayout) error {
	return fmt.Errorf("%w: %d of %d units of %v present, %d needed", ErrTooFewUnits, present, l.Width(), l, l.Needed())
}

// firstPresent returns the first non-empty unit, or nil.
func firstPresent(shards [][]byte) []byte {
	for _, s := range shards {
		if len(s) > 0 {
			return s
		}
	}
	return nil
}
