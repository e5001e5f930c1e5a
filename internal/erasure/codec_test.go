package erasure

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func clone(shards [][]byte) [][]byte {
	out := make([][]byte, len(shards))
	for i, s := range shards {
		out[i] = bytes.Clone(s)
	}
	return out
}

// roundTrip encodes data, checks the units, drops the units in mask,
// reconstructs and joins, and compares.
func roundTrip(t *testing.T, c *Codec, l StripeLayout, data []byte, mask uint) {
	t.Helper()
	shards, err := c.Encode(data, l)
	if err != nil {
		t.Fatalf("%v: Encode: %v", l, err)
	}
	if len(shards) != l.Width() {
		t.Fatalf("%v: %d units, want %d", l, len(shards), l.Width())
	}
	for i, s := range shards {
		if len(s) != l.UnitLen {
			t.Fatalf("%v: unit %d is %d bytes, want %d", l, i, len(s), l.UnitLen)
		}
	}
	want := clone(shards)
	got := clone(shards)
	for i := range got {
		if mask&(1<<i) != 0 {
			got[i] = nil
		}
	}
	degraded := clone(got)
	if err := c.Reconstruct(got, l); err != nil {
		t.Fatalf("%v: Reconstruct without units %b: %v", l, mask, err)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%v: unit %d differs after Reconstruct without %b", l, i, mask)
		}
	}
	if err := c.ReconstructData(degraded, l); err != nil {
		t.Fatalf("%v: ReconstructData without units %b: %v", l, mask, err)
	}
	joined, err := Join(degraded, l)
	if err != nil {
		t.Fatalf("%v: Join: %v", l, err)
	}
	if !bytes.Equal(joined, data) {
		t.Fatalf("%v: joined data differs (mask %b)", l, mask)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const U = 64 * kib
	for _, ps := range []string{"ec:4+2", "ec:8+2", "ec:2+1", "ec:1+1", "mirror:3", "mirror:1", "ec:32+8"} {
		p := mustParse(t, ps)
		g := Geometry{Protection: p, UnitSize: U}
		c, err := NewCodec(p)
		if err != nil {
			t.Fatal(err)
		}
		k := int(g.StripeDataSize() / U)
		for _, n := range []int{0, 1, 4095, 4096, U - 1, U, U + 1, k*U - 1, k * U} {
			if n < 0 || int64(n) > g.StripeDataSize() {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", ps, n), func(t *testing.T) {
				l := g.Layout(n)
				data := randBytes(rng, n)
				roundTrip(t, c, l, data, 0)
				// Drop the first Tolerance units: the data units, the worst case.
				roundTrip(t, c, l, data, 1<<l.Tolerance()-1)
			})
		}
	}
}

// TestCodecLargeUnits runs one full stripe with default 1 MiB units.
func TestCodecLargeUnits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	p := mustParse(t, "ec:4+2")
	g := Geometry{Protection: p}
	c, _ := NewCodec(p)
	for _, n := range []int{mib, 4 * mib, 4*mib - 1, 3*mib + 17} {
		roundTrip(t, c, g.Layout(n), randBytes(rng, n), 0b100001)
	}
}

// TestReconstructEveryLoss drops every combination of up to M units of an
// ec:4+2 stripe, and checks that M+1 losses fail with ErrTooFewUnits.
func TestReconstructEveryLoss(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	p := mustParse(t, "ec:4+2")
	g := Geometry{Protection: p, UnitSize: 64 * kib}
	c, _ := NewCodec(p)
	for _, n := range []int{256 * kib, 200*kib + 3} {
		l := g.Layout(n)
		data := randBytes(rng, n)
		shards, err := c.Encode(data, l)
		if err != nil {
			t.Fatal(err)
		}
		tried := 0
		for mask := uint(0); mask < 1<<l.Width(); mask++ {
			lost := bits.OnesCount(mask)
			if lost <= p.Parity {
				roundTrip(t, c, l, data, mask)
				tried++
				continue
			}
			got := clone(shards)
			for i := range got {
				if mask&(1<<i) != 0 {
					got[i] = nil
				}
			}
			err := c.Reconstruct(got, l)
			if !errors.Is(err, ErrTooFewUnits) {
				t.Fatalf("mask %06b: Reconstruct = %v, want ErrTooFewUnits", mask, err)
			}
			if lost == p.Parity+1 && !strings.Contains(err.Error(), "3 of 6 units") {
				t.Errorf("error %q does not say how many units are present", err)
			}
			if err := c.ReconstructData(got, l); !errors.Is(err, ErrTooFewUnits) && mask&0b1111 != 0 {
				t.Fatalf("mask %06b: ReconstructData = %v, want ErrTooFewUnits", mask, err)
			}
		}
		if tried != 1+6+15 {
			t.Fatalf("tried %d combinations, want 22", tried)
		}
	}
}

func TestMirroredReconstruct(t *testing.T) {
	p := mustParse(t, "mirror:3")
	c, _ := NewCodec(p)
	l := Geometry{Protection: p}.Layout(5)
	shards, _ := c.Encode([]byte("hello"), l)
	for i := range shards {
		if &shards[i][0] != &shards[0][0] {
			t.Errorf("copy %d is not shared with copy 0", i)
		}
	}
	got := [][]byte{nil, nil, []byte("hello")}
	if err := c.Reconstruct(got, l); err != nil {
		t.Fatal(err)
	}
	for i, s := range got {
		if string(s) != "hello" {
			t.Errorf("copy %d = %q", i, s)
		}
	}
	err := c.Reconstruct([][]byte{nil, nil, nil}, l)
	if !errors.Is(err, ErrTooFewUnits) || !strings.Contains(err.Error(), "0 of 3 units") || !strings.Contains(err.Error(), "1 needed") {
		t.Errorf("all copies lost: %v", err)
	}
}

// TestEncodeAliasesData checks that aligned data units are not copied.
func TestEncodeAliasesData(t *testing.T) {
	p := mustParse(t, "ec:4+2")
	c, _ := NewCodec(p)
	l := Geometry{Protection: p, UnitSize: 4 * kib}.Layout(16*kib - 100)
	data := randBytes(rand.New(rand.NewPCG(1, 1)), l.DataLen)
	shards, err := c.Encode(data, l)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if &shards[i][0] != &data[i*l.UnitLen] || cap(shards[i]) != l.UnitLen {
			t.Errorf("data unit %d is a copy or has spare capacity", i)
		}
	}
	if !bytes.Equal(shards[3][:4*kib-100], data[12*kib:]) || !bytes.Equal(shards[3][4*kib-100:], make([]byte, 100)) {
		t.Error("tail unit is not data followed by zero padding")
	}
}

func TestCodecBadInput(t *testing.T) {
	p := mustParse(t, "ec:4+2")
	c, _ := NewCodec(p)
	l := Geometry{Protection: p, UnitSize: 4 * kib}.Layout(16 * kib)
	if _, err := c.Encode(make([]byte, 10), l); !errors.Is(err, ErrBadShards) {
		t.Errorf("Encode short data: %v", err)
	}
	shards, _ := c.Encode(make([]byte, 16*kib), l)
	if err := c.Reconstruct(shards[:5], l); !errors.Is(err, ErrBadShards) {
		t.Errorf("Reconstruct 5 units: %v", err)
	}
	bad := clone(shards)
	bad[2] = bad[2][:100]
	if err := c.Reconstruct(bad, l); !errors.Is(err, ErrBadShards) {
		t.Errorf("Reconstruct short unit: %v", err)
	}
	bad = clone(shards)
	bad[1] = nil
	if _, err := Join(bad, l); !errors.Is(err, ErrTooFewUnits) {
		t.Errorf("Join with a data unit missing: %v", err)
	}
	if _, err := c.Encode(nil, StripeLayout{Data: 0}); !errors.Is(err, ErrBadShards) {
		t.Errorf("Encode invalid layout: %v", err)
	}
	if _, err := NewCodec(Protection{}); !errors.Is(err, ErrBadProtection) {
		t.Errorf("NewCodec zero protection: %v", err)
	}
}

func TestReadAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, ps := range []string{"ec:4+2", "mirror:2"} {
		p := mustParse(t, ps)
		c, _ := NewCodec(p)
		g := Geometry{Protection: p, UnitSize: 4 * kib}
		l := g.Layout(int(g.StripeDataSize()) - 7)
		data := randBytes(rng, l.DataLen)
		shards, _ := c.Encode(data, l)
		shards[l.Width()-1] = nil // a lost parity unit or copy does not matter
		for range 200 {
			off := rng.IntN(l.DataLen + 10)
			dst := make([]byte, rng.IntN(3*kib))
			n, err := ReadAt(dst, shards, l, off)
			want := data[min(off, len(data)):min(off+len(dst), len(data))]
			if n != len(want) || !bytes.Equal(dst[:n], want) {
				t.Fatalf("%s ReadAt(%d, %d) = %d bytes, want %d", ps, len(dst), off, n, len(want))
			}
			if wantEOF := n < len(dst); wantEOF != (err == io.EOF) || (!wantEOF && err != nil) {
				t.Fatalf("%s ReadAt(%d, %d) err = %v", ps, len(dst), off, err)
			}
		}
	}
}

// TestCodecProperty encodes random data under random protections, loses up
// to M random units, and recovers the data.
func TestCodecProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	c := &Codec{} // the zero Codec works too: encoders are made on first use
	for range 300 {
		var p Protection
		if rng.IntN(5) == 0 {
			p = Protection{Mirrors: 1 + rng.IntN(4)}
		} else {
			p = Protection{Data: 1 + rng.IntN(12), Parity: 1 + rng.IntN(4)}
		}
		g := Geometry{Protection: p, UnitSize: UnitAlign * (1 + rng.IntN(4))}
		n := rng.IntN(int(g.StripeDataSize()) + 1)
		l := g.Layout(n)
		var mask uint
		for _, i := range rng.Perm(l.Width())[:rng.IntN(l.Tolerance()+1)] {
			mask |= 1 << i
		}
		roundTrip(t, c, l, randBytes(rng, n), mask)
	}
}

// TestCodecConcurrent shares one Codec between goroutines (run with -race).
func TestCodecConcurrent(t *testing.T) {
	c, _ := NewCodec(mustParse(t, "ec:4+2"))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 0))
			ps := []string{"ec:4+2", "ec:8+2", "ec:2+1"}[w%3]
			g := Geometry{Protection: mustParse(t, ps), UnitSize: 8 * kib}
			for range 50 {
				n := g.Unit() + rng.IntN(int(g.StripeDataSize())-g.Unit()+1)
				roundTrip(t, c, g.Layout(n), randBytes(rng, n), 1<<rng.IntN(g.Width()))
			}
		}()
	}
	wg.Wait()
}

// TestEncodeIntoReusesScratch checks that dirty scratch memory is used and
// that the padding is zeroed anyway.
func TestEncodeIntoReusesScratch(t *testing.T) {
	p := mustParse(t, "ec:4+2")
	c, _ := NewCodec(p)
	rng := rand.New(rand.NewPCG(13, 14))
	l := Geometry{Protection: p, UnitSize: 4 * kib}.Layout(13*kib + 5)
	data := randBytes(rng, l.DataLen)
	want, _ := c.Encode(data, l)
	scratch := randBytes(rng, l.ScratchLen())
	got, err := c.EncodeInto(data, l, scratch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("unit %d differs with dirty scratch", i)
		}
	}
	if &got[3][0] != &scratch[0] || &got[5][0] != &scratch[2*l.UnitLen] {
		t.Error("scratch memory not used for the tail and parity units")
	}
	if l.ScratchLen() != 3*l.UnitLen {
		t.Errorf("ScratchLen = %d, want 3 units", l.ScratchLen())
	}
}
