package erasure

import (
	"math/rand/v2"
	"testing"
)

// Benchmarks report throughput in data bytes (K × 1 MiB per full stripe).
// Compare them as ratios between runs on the same machine.

func benchStripe(b *testing.B, ps string) (*Codec, StripeLayout, []byte) {
	p := mustParse(b, ps)
	c, err := NewCodec(p)
	if err != nil {
		b.Fatal(err)
	}
	g := Geometry{Protection: p}
	l := g.Layout(int(g.StripeDataSize()))
	return c, l, randBytes(rand.New(rand.NewPCG(1, 2)), l.DataLen)
}

func BenchmarkEncode(b *testing.B) {
	for _, ps := range []string{"ec:4+2", "ec:8+2"} {
		b.Run(ps, func(b *testing.B) {
			c, l, data := benchStripe(b, ps)
			b.SetBytes(int64(l.DataLen))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Encode(data, l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReconstruct rebuilds the M first data units (the worst case)
// into reused buffers.
func BenchmarkReconstruct(b *testing.B) {
	for _, ps := range []string{"ec:4+2", "ec:8+2"} {
		b.Run(ps, func(b *testing.B) {
			c, l, data := benchStripe(b, ps)
			full, err := c.Encode(data, l)
			if err != nil {
				b.Fatal(err)
			}
			spare := make([][]byte, l.Parity)
			for i := range spare {
				spare[i] = make([]byte, 0, l.UnitLen)
			}
			shards := make([][]byte, l.Width())
			b.SetBytes(int64(l.DataLen))
			b.ReportAllocs()
			for b.Loop() {
				copy(shards, full)
				for i := range spare {
					shards[i] = spare[i][:0]
				}
				if err := c.Reconstruct(shards, l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeInto is Encode with pooled scratch memory, as a writer
// that reuses stripe buffers sees it.
func BenchmarkEncodeInto(b *testing.B) {
	for _, ps := range []string{"ec:4+2", "ec:8+2"} {
		b.Run(ps, func(b *testing.B) {
			c, l, data := benchStripe(b, ps)
			scratch := make([]byte, l.ScratchLen())
			b.SetBytes(int64(l.DataLen))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.EncodeInto(data, l, scratch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
