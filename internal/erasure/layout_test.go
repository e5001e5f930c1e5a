package erasure

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestLocate(t *testing.T) {
	ec := Geometry{Protection: Protection{Data: 4, Parity: 2}}
	full := ec.Layout(4 * mib)
	part := ec.Layout(mib + 1) // units of 260 KiB
	small := ec.Layout(4095)
	for _, tc := range []struct {
		name   string
		l      StripeLayout
		off, n int
		want   []Extent
	}{
		{"empty range", full, 10, 0, nil},
		{"inside unit 0", full, 10, 20, []Extent{{0, 10, 20}}},
		{"across 0|1", full, mib - 10, 20, []Extent{{0, mib - 10, 10}, {1, 0, 10}}},
		{"exactly unit 1", full, mib, mib, []Extent{{1, 0, mib}}},
		{"whole stripe", full, 0, 4 * mib, []Extent{{0, 0, mib}, {1, 0, mib}, {2, 0, mib}, {3, 0, mib}}},
		{"last byte", full, 4*mib - 1, 1, []Extent{{3, mib - 1, 1}}},
		{"past end clipped", full, 4*mib - 1, 100, []Extent{{3, mib - 1, 1}}},
		{"at end", full, 4 * mib, 1, nil},
		{"partial across 0|1", part, 260*kib - 1, 2, []Extent{{0, 260*kib - 1, 1}, {1, 0, 1}}},
		{"partial tail clipped", part, mib - 1, 10, []Extent{{3, mib - 1 - 3*260*kib, 2}}},
		{"mirrored", small, 5, 10, []Extent{{0, 5, 10}}},
		{"mirrored clipped", small, 4000, 1000, []Extent{{0, 4000, 95}}},
	} {
		if got := tc.l.Locate(tc.off, tc.n); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Locate(%d, %d) = %v, want %v", tc.name, tc.off, tc.n, got, tc.want)
		}
	}
}

func TestTolerance(t *testing.T) {
	ec42 := Geometry{Protection: Protection{Data: 4, Parity: 2}}
	m3 := Geometry{Protection: Protection{Mirrors: 3}}
	m1 := Geometry{Protection: Protection{Mirrors: 1}}
	for _, tc := range []struct {
		name                  string
		l                     StripeLayout
		placed                int
		want, minPlaced, need int
	}{
		{"ec:4+2 all", ec42.Layout(mib), 6, 2, 5, 4},
		{"ec:4+2 five", ec42.Layout(mib), 5, 1, 5, 4},
		{"ec:4+2 four", ec42.Layout(mib), 4, 0, 5, 4},
		{"ec:4+2 three", ec42.Layout(mib), 3, -1, 5, 4},
		{"ec:4+2 over-placed", ec42.Layout(mib), 9, 2, 5, 4},
		{"ec:4+2 small stripe", ec42.Layout(10), 3, 2, 2, 1},
		{"ec:4+2 small stripe two", ec42.Layout(10), 2, 1, 2, 1},
		{"mirror:3", m3.Layout(mib), 3, 2, 2, 1},
		{"mirror:3 one", m3.Layout(mib), 1, 0, 2, 1},
		{"mirror:1", m1.Layout(mib), 1, 0, 1, 1},
	} {
		l := tc.l
		if got := l.AchievedTolerance(tc.placed); got != tc.want {
			t.Errorf("%s: AchievedTolerance(%d) = %d, want %d", tc.name, tc.placed, got, tc.want)
		}
		if l.MinPlaced() != tc.minPlaced || l.Needed() != tc.need {
			t.Errorf("%s: MinPlaced %d Needed %d, want %d %d", tc.name, l.MinPlaced(), l.Needed(), tc.minPlaced, tc.need)
		}
	}
}

func TestLayoutString(t *testing.T) {
	ec42 := Geometry{Protection: Protection{Data: 4, Parity: 2}}
	m3 := Geometry{Protection: Protection{Mirrors: 3}}
	for _, tc := range []struct {
		l    StripeLayout
		want string
	}{
		{ec42.Layout(mib), "ec:4+2"},
		{ec42.Layout(4095), "3 copies (small stripe of ec:4+2)"},
		{m3.Layout(7), "mirror:3"},
	} {
		if got := tc.l.String(); got != tc.want {
			t.Errorf("String = %q, want %q", got, tc.want)
		}
	}
}

// TestStoredLayout reads stripes back from stripe-map facts, including after
// a truncate shortened their data.
func TestStoredLayout(t *testing.T) {
	ec42 := Geometry{Protection: Protection{Data: 4, Parity: 2}}
	c, _ := NewCodec(ec42.Protection)
	for _, tc := range []struct {
		name    string
		written StripeLayout
		dataLen int // after truncate
	}{
		{"full", ec42.Layout(4 * mib), 4 * mib},
		{"full truncated below one unit", ec42.Layout(4 * mib), 100},
		{"partial truncated", ec42.Layout(mib + 1), mib - 5},
		{"small stripe", ec42.Layout(4000), 4000},
		{"small stripe truncated", ec42.Layout(4000), 10},
		{"empty", ec42.Layout(0), 0},
	} {
		data := make([]byte, tc.written.DataLen)
		for i := range data {
			data[i] = byte(i * 7)
		}
		shards, err := c.Encode(data, tc.written)
		if err != nil {
			t.Fatal(err)
		}
		l, err := StoredLayout(tc.written.StripeProtection(), tc.written.UnitLen, tc.dataLen)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if l.Mirrored != tc.written.Mirrored || l.Width() != tc.written.Width() || l.Needed() != tc.written.Needed() {
			t.Fatalf("%s: stored layout %+v differs from written %+v", tc.name, l, tc.written)
		}
		shards[0] = nil
		if err := c.ReconstructData(shards, l); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := Join(shards, l)
		if err != nil || !bytes.Equal(got, data[:tc.dataLen]) {
			t.Fatalf("%s: Join = %d bytes, %v", tc.name, len(got), err)
		}
	}
	if _, err := StoredLayout(Protection{Data: 4, Parity: 2}, 4096, 4*4096+1); !errors.Is(err, ErrBadShards) {
		t.Errorf("data longer than the units: %v", err)
	}
	if _, err := StoredLayout(Protection{Mirrors: 3}, 10, 11); !errors.Is(err, ErrBadShards) {
		t.Errorf("mirror data longer than a copy: %v", err)
	}
	if _, err := StoredLayout(Protection{}, 10, 1); !errors.Is(err, ErrBadProtection) {
		t.Errorf("zero protection: %v", err)
	}
	if p := ec42.Layout(10).StripeProtection(); p != (Protection{Mirrors: 3}) {
		t.Errorf("small stripe of ec:4+2 is stored as %v, want mirror:3", p)
	}
}
