package erasure

import (
	"errors"
	"math/rand/v2"
	"testing"
)

const (
	kib = 1 << 10
	mib = 1 << 20
)

func mustParse(t testing.TB, s string) Protection {
	t.Helper()
	p, err := ParseProtection(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGeometryFileSizes cuts files of various sizes into stripes and checks
// the count, the last stripe's layout and the bytes stored.
func TestGeometryFileSizes(t *testing.T) {
	const U = mib
	for _, tc := range []struct {
		prot     string
		unit     int
		size     int64
		stripes  int64
		lastLen  int  // data bytes of the last stripe
		mirrored bool // last stripe
		width    int  // last stripe
		unitLen  int  // last stripe
		stored   int64
	}{
		{"ec:4+2", 0, 0, 0, 0, false, 0, 0, 0},
		{"ec:4+2", 0, 1, 1, 1, true, 3, 1, 3},
		{"ec:4+2", 0, 4095, 1, 4095, true, 3, 4095, 3 * 4095},
		{"ec:4+2", 0, 4096, 1, 4096, true, 3, 4096, 3 * 4096},
		{"ec:4+2", 0, U - 1, 1, U - 1, true, 3, U - 1, 3 * (U - 1)},
		{"ec:4+2", 0, U, 1, U, false, 6, 256 * kib, 6 * 256 * kib},
		{"ec:4+2", 0, U + 1, 1, U + 1, false, 6, 260 * kib, 6 * 260 * kib},
		{"ec:4+2", 0, 4*U - 1, 1, 4*U - 1, false, 6, U, 6 * U},
		{"ec:4+2", 0, 4 * U, 1, 4 * U, false, 6, U, 6 * U},
		{"ec:4+2", 0, 4*U + 1, 2, 1, true, 3, 1, 6*U + 3},
		{"ec:4+2", 0, 5*U + 5, 2, U + 5, false, 6, 260 * kib, 6*U + 6*260*kib},
		{"ec:4+2", 0, 100 * U, 25, 4 * U, false, 6, U, 25 * 6 * U},
		{"ec:8+2", 64 * kib, 64 * kib, 1, 64 * kib, false, 10, 8 * kib, 10 * 8 * kib},
		{"ec:8+2", 64 * kib, 64*kib + 1, 1, 64*kib + 1, false, 10, 12 * kib, 10 * 12 * kib},
		{"ec:8+2", 64 * kib, 64*kib - 1, 1, 64*kib - 1, true, 3, 64*kib - 1, 3 * (64*kib - 1)},
		{"ec:1+1", 0, U - 1, 1, U - 1, true, 2, U - 1, 2 * (U - 1)},
		{"ec:1+1", 0, U, 1, U, false, 2, U, 2 * U},
		{"ec:1+1", 0, U + 1, 2, 1, true, 2, 1, 2*U + 2},
		{"mirror:3", 0, 1, 1, 1, true, 3, 1, 3},
		{"mirror:3", 0, U, 1, U, true, 3, U, 3 * U},
		{"mirror:3", 0, U + 1, 2, 1, true, 3, 1, 3*U + 3},
		{"mirror:1", 0, 10 * U, 10, U, true, 1, U, 10 * U},
	} {
		g, err := NewGeometry(mustParse(t, tc.prot), tc.unit)
		if err != nil {
			t.Fatal(err)
		}
		n := g.StripeCount(tc.size)
		if n != tc.stripes {
			t.Errorf("%s size %d: %d stripes, want %d", tc.prot, tc.size, n, tc.stripes)
			continue
		}
		var stored, data int64
		var last StripeLayout
		for s := range n {
			last = g.Layout(g.StripeDataLen(tc.size, s))
			stored += last.StoredBytes()
			data += int64(last.DataLen)
		}
		if data != tc.size {
			t.Errorf("%s size %d: stripes hold %d bytes", tc.prot, tc.size, data)
		}
		if stored != tc.stored {
			t.Errorf("%s size %d: stored %d, want %d", tc.prot, tc.size, stored, tc.stored)
		}
		if n == 0 {
			continue
		}
		if last.DataLen != tc.lastLen || last.Mirrored != tc.mirrored || last.Width() != tc.width || last.UnitLen != tc.unitLen {
			t.Errorf("%s size %d: last stripe %+v (width %d), want len %d mirrored %v width %d unit %d",
				tc.prot, tc.size, last, last.Width(), tc.lastLen, tc.mirrored, tc.width, tc.unitLen)
		}
		if last.Tolerance() != g.Protection.Tolerance() {
			t.Errorf("%s size %d: tolerance %d, want the protection's %d", tc.prot, tc.size, last.Tolerance(), g.Protection.Tolerance())
		}
	}
}

func TestStripeOf(t *testing.T) {
	g := Geometry{Protection: Protection{Data: 4, Parity: 2}}
	m := Geometry{Protection: Protection{Mirrors: 2}, UnitSize: 64 * kib}
	for _, tc := range []struct {
		g              Geometry
		off            int64
		stripe, within int64
	}{
		{g, 0, 0, 0},
		{g, mib, 0, mib},
		{g, 4*mib - 1, 0, 4*mib - 1},
		{g, 4 * mib, 1, 0},
		{g, 100*mib + 7, 25, 7},
		{m, 64*kib - 1, 0, 64*kib - 1},
		{m, 64 * kib, 1, 0},
		{m, 1 << 40, 1 << 24, 0},
	} {
		s, w := tc.g.StripeOf(tc.off)
		if s != tc.stripe || w != tc.within {
			t.Errorf("%v StripeOf(%d) = %d, %d; want %d, %d", tc.g.Protection, tc.off, s, w, tc.stripe, tc.within)
		}
	}
}

func TestStripeDataLen(t *testing.T) {
	g := Geometry{Protection: Protection{Data: 2, Parity: 1}, UnitSize: 4 * kib}
	for _, tc := range []struct {
		size, stripe int64
		want         int
	}{
		{0, 0, 0}, {1, 0, 1}, {8 * kib, 0, 8 * kib}, {8*kib + 3, 0, 8 * kib},
		{8*kib + 3, 1, 3}, {8*kib + 3, 2, 0}, {8 * kib, 1, 0}, {5, -1, 0},
	} {
		if got := g.StripeDataLen(tc.size, tc.stripe); got != tc.want {
			t.Errorf("StripeDataLen(%d, %d) = %d, want %d", tc.size, tc.stripe, got, tc.want)
		}
	}
}

func TestGeometryValidate(t *testing.T) {
	ec := Protection{Data: 4, Parity: 2}
	for _, tc := range []struct {
		g    Geometry
		want error
	}{
		{Geometry{Protection: ec}, nil},
		{Geometry{Protection: ec, UnitSize: UnitAlign}, nil},
		{Geometry{Protection: ec, UnitSize: MaxUnitSize}, nil},
		{Geometry{Protection: ec, UnitSize: 1000}, ErrBadGeometry},
		{Geometry{Protection: ec, UnitSize: -4096}, ErrBadGeometry},
		{Geometry{Protection: ec, UnitSize: MaxUnitSize + UnitAlign}, ErrBadGeometry},
		{Geometry{Protection: ec, UnitSize: 6 * kib}, ErrBadGeometry},
		{Geometry{}, ErrBadProtection},
		{Geometry{Protection: Protection{Data: 4}}, ErrBadProtection},
		{Geometry{Protection: Protection{Mirrors: 2, Data: 1}}, ErrBadProtection},
		{Geometry{Protection: Protection{Data: 33, Parity: 1}}, ErrBadProtection},
	} {
		err := tc.g.Validate()
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%+v: Validate = %v, want %v", tc.g, err, tc.want)
		}
	}
}

func TestLayoutPanicsOutsideStripe(t *testing.T) {
	g := Geometry{Protection: Protection{Data: 2, Parity: 1}, UnitSize: 4 * kib}
	for _, n := range []int{-1, 8*kib + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Layout(%d) did not panic", n)
				}
			}()
			g.Layout(n)
		}()
	}
}

// TestLayoutInvariants checks, for random geometries and lengths, that units
// are equal, aligned, no larger than the unit size, hold all the data, and
// that Locate tiles the data exactly.
func TestLayoutInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		var p Protection
		if rng.IntN(4) == 0 {
			p = Protection{Mirrors: 1 + rng.IntN(MaxMirrors)}
		} else {
			p = Protection{Data: 1 + rng.IntN(MaxDataUnits), Parity: 1 + rng.IntN(MaxParityUnits)}
		}
		g := Geometry{Protection: p, UnitSize: UnitAlign * (1 + rng.IntN(64))}
		n := rng.IntN(int(g.StripeDataSize()) + 1)
		l := g.Layout(n)
		switch {
		case l.Mirrored != g.IsMirrored(n):
			t.Fatalf("%v: Mirrored %v disagrees with IsMirrored", l, l.Mirrored)
		case l.Mirrored && (l.UnitLen != n || l.Width() != g.Copies() || l.Needed() != 1):
			t.Fatalf("%+v: bad mirrored layout for %d", l, n)
		case !l.Mirrored && (l.UnitLen%UnitAlign != 0 || l.UnitLen > g.Unit() || l.Data*l.UnitLen < n ||
			l.Width() != p.Width() || l.Needed() != p.Data):
			t.Fatalf("%+v: bad coded layout for %d (unit %d)", l, n, g.Unit())
		case !l.Mirrored && p.Mirrors == 0 && n < g.Unit():
			t.Fatalf("%+v: small stripe of %d not mirrored", l, n)
		case l.Tolerance() != p.Tolerance():
			t.Fatalf("%+v: tolerance %d, protection %d", l, l.Tolerance(), p.Tolerance())
		}
		off := rng.IntN(n + 1)
		ln := rng.IntN(n + 1)
		covered := off
		for _, e := range l.Locate(off, ln) {
			if e.Unit*l.UnitLen+e.Off != covered || e.Len <= 0 || e.Off+e.Len > l.UnitLen || e.Unit >= l.Data {
				t.Fatalf("%+v: Locate(%d, %d) bad extent %+v at %d", l, off, ln, e, covered)
			}
			covered += e.Len
		}
		if want := min(off+ln, n); covered != max(want, off) {
			t.Fatalf("%+v: Locate(%d, %d) covers to %d, want %d", l, off, ln, covered, want)
		}
	}
}
