package kv

import (
	"bytes"
	"testing"
	"time"
)

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{[]byte("a"), []byte("b")},
		{[]byte("ab"), []byte("ac")},
		{[]byte{'a', 0xff}, []byte("b")},
		{[]byte{0xff, 0xff}, nil},
		{[]byte{}, nil},
	} {
		if got := PrefixEnd(tc.in); !bytes.Equal(got, tc.want) {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := After([]byte("ab")); !bytes.Equal(got, []byte("ab\x00")) {
		t.Errorf("After = %q", got)
	}
}

func TestBackoff(t *testing.T) {
	o := Options{MinBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond}
	for _, tc := range []struct {
		attempt int
		lo, hi  time.Duration
	}{
		{0, 500 * time.Microsecond, time.Millisecond},
		{1, time.Millisecond, 2 * time.Millisecond},
		{3, 4 * time.Millisecond, 8 * time.Millisecond},
		{30, 4 * time.Millisecond, 8 * time.Millisecond},
	} {
		for i := 0; i < 100; i++ {
			if d := backoff(o, tc.attempt); d < tc.lo || d > tc.hi {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", tc.attempt, d, tc.lo, tc.hi)
			}
		}
	}
}

func TestCheckLimits(t *testing.T) {
	tx := &Txn{}
	for i := 0; i < 4; i++ {
		tx.Put([]byte{byte('a' + i)}, []byte("v"))
	}
	for _, tc := range []struct {
		l  Limits
		ok bool
	}{
		{Limits{}, true},
		{Limits{MaxOps: 4}, true},
		{Limits{MaxOps: 3}, false},
		{Limits{MaxBytes: 10}, false},
		{Limits{MaxBytes: 1 << 20}, true},
	} {
		if err := tx.CheckLimits(tc.l, 0); (err == nil) != tc.ok {
			t.Errorf("CheckLimits(%+v) = %v, want ok=%v", tc.l, err, tc.ok)
		}
	}
}
