package client

import "testing"

func TestDataEnd(t *testing.T) {
	at := func(n int, set ...int) []byte {
		b := make([]byte, n)
		for _, i := range set {
			b[i] = 0xff
		}
		return b
	}
	const big = 200 << 10 // several of dataEnd's chunks
	for _, tc := range []struct {
		name string
		b    []byte
		want int
	}{
		{"empty", nil, 0},
		{"one zero", at(1), 0},
		{"one byte", at(1, 0), 1},
		{"zeros", at(big), 0},
		{"first byte", at(big, 0), 1},
		{"last byte", at(big, big-1), big},
		{"chunk edge", at(big, 64<<10-1), 64 << 10},
		{"after chunk edge", at(big, 64<<10), 64<<10 + 1},
		{"middle", at(big, 5, 100_000), 100_001},
	} {
		if got := dataEnd(tc.b); got != tc.want {
			t.Errorf("%s: dataEnd = %d, want %d", tc.name, got, tc.want)
		}
		if got := allZero(tc.b); got != (tc.want == 0) {
			t.Errorf("%s: allZero = %v", tc.name, got)
		}
	}
}

// BenchmarkDataEnd measures the zero check a stripe write-out makes on a
// 4 MiB stripe: dense data (the common case, answered at its last byte),
// a stripe with data in its first byte only, and zeros only (scanned
// whole).
func BenchmarkDataEnd(b *testing.B) {
	const ss = 4 << 20
	dense := make([]byte, ss)
	for i := range dense {
		dense[i] = byte(i*7 + 1)
	}
	head := make([]byte, ss)
	head[0] = 1
	for _, bc := range []struct {
		name string
		b    []byte
	}{{"dense", dense}, {"first byte", head}, {"zeros", make([]byte, ss)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(ss)
			for i := 0; i < b.N; i++ {
				dataEnd(bc.b)
			}
		})
	}
}
