package meta

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// TestStoreErr checks that the store's error classes leave meta as meta's
// (errors.Is for both), with the store's message unchanged.
func TestStoreErr(t *testing.T) {
	for _, tc := range []struct {
		in   error
		want error // meta class; nil: returned as is
	}{
		{fmt.Errorf("%w: 200 writes", kv.ErrTooLarge), ErrTooLarge},
		{fmt.Errorf("%w: no quorum", kv.ErrUnavailable), ErrUnavailable},
		{fmt.Errorf("kv: gave up after 64 attempts: %w", kv.ErrConflict), ErrConflict},
		{fmt.Errorf("readdir LIN 5: %w", fmt.Errorf("%w: x", kv.ErrTooLarge)), ErrTooLarge},
		{fmt.Errorf("%w: LIN 5", ErrNotFound), nil},
		{kv.ErrClosed, nil},
		{nil, nil},
	} {
		got := storeErr(tc.in)
		if tc.want == nil {
			if got != tc.in {
				t.Errorf("storeErr(%v) = %v, want it unchanged", tc.in, got)
			}
			continue
		}
		if !errors.Is(got, tc.want) || !errors.Is(got, tc.in) {
			t.Errorf("storeErr(%v) = %v: errors.Is(%v) %v, errors.Is(original) %v", tc.in, got, tc.want, errors.Is(got, tc.want), errors.Is(got, tc.in))
		}
		if got.Error() != tc.in.Error() {
			t.Errorf("storeErr message = %q, want the store's %q", got.Error(), tc.in.Error())
		}
		if again := storeErr(got); again != got {
			t.Errorf("storeErr is not idempotent: %v became %v", got, again)
		}
	}
}

// TestTooLargeIsMeta checks a real oversized transaction: the caller sees
// ErrTooLarge without importing kv.
func TestTooLargeIsMeta(t *testing.T) {
	m := newMeta(t, memkv.New(kv.Options{Limits: kv.Limits{MaxOps: 128, MaxBytes: 4 << 10}}))
	a, err := m.Create(bg, RootLIN, "f", NewInode{})
	if err != nil {
		t.Fatal(err)
	}
	err = m.SetXattr(bg, a.LIN, "user.big", make([]byte, 8<<10), 0)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, kv.ErrTooLarge) {
		t.Fatalf("SetXattr of 8 KiB under a 4 KiB limit: %v, want ErrTooLarge", err)
	}
}
