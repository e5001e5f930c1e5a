package client

import (
	"math/rand/v2"
	"testing"
)

// kinds feeds reads (offset, length) to a fresh readPattern and returns
// what it said of each, and the stride of the last.
func kinds(reads [][2]int64) ([]access, int64, *readPattern) {
	var p readPattern
	var out []access
	var stride int64
	for _, r := range reads {
		var k access
		k, stride = p.observe(r[0], int(r[1]))
		out = append(out, k)
	}
	return out, stride, &p
}

func TestPatternSequential(t *testing.T) {
	var reads [][2]int64
	for i := range int64(6) {
		reads = append(reads, [2]int64{i << 20, 1 << 20})
	}
	got, _, _ := kinds(reads)
	if got[0] != accessRandom {
		t.Errorf("first read at 0: %v, want random (nothing to continue)", got[0])
	}
	for i, k := range got[1:] {
		if k != accessSequential {
			t.Errorf("read %d continuing the previous one: %v, want sequential", i+1, k)
		}
	}
	// The kernel's asynchronous readahead delivers a sequential stream's
	// reads out of order: still sequential.
	reads = append(reads, [2]int64{7 << 20, 1 << 20}, [2]int64{6 << 20, 1 << 20}, [2]int64{8 << 20, 1 << 20})
	got, _, _ = kinds(reads)
	for i, k := range got[6:] {
		if k != accessSequential {
			t.Errorf("reordered read %d: %v, want sequential", i, k)
		}
	}
}

func TestPatternDetectsStride(t *testing.T) {
	const rec, tasks = 47008, 4
	for _, tc := range []struct {
		name string
		at   func(k int64) (int64, int64) // offset and length of the k-th read
	}{
		{"exact records", func(k int64) (int64, int64) { return (k*tasks + 1) * rec, rec }},
		{"page-rounded by the kernel", func(k int64) (int64, int64) {
			lo, hi := (k*tasks+1)*rec, (k*tasks+2)*rec
			lo, hi = lo&^4095, (hi+4095)&^4095
			return lo, hi - lo
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reads [][2]int64
			for k := range int64(20) {
				off, n := tc.at(k)
				reads = append(reads, [2]int64{off, n})
			}
			got, stride, p := kinds(reads)
			for i, k := range got {
				want := accessStrided
				if i < strideHits {
					want = accessRandom // not enough reads to tell yet
				}
				if k != want {
					t.Errorf("read %d: %v, want %v", i, k, want)
				}
			}
			if d := stride - tasks*rec; d < -pageSlack || d > pageSlack {
				t.Errorf("stride %d, want about %d", stride, tasks*rec)
			}
			if p.slack > pageSlack {
				t.Errorf("slack %d, more than a page", p.slack)
			}
		})
	}
}

func TestPatternGivesUpOnRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var reads [][2]int64
	for range 2000 {
		reads = append(reads, [2]int64{rng.Int64N(1<<30/4096) * 4096, 4096})
	}
	got, _, _ := kinds(reads)
	n := map[access]int{}
	for _, k := range got {
		n[k]++
	}
	// A random offset lands exactly where the stride of the two reads
	// before puts it almost never; a few chance hits are tolerated.
	if n[accessStrided] > 2 || n[accessSequential] > 2 {
		t.Errorf("random 4 KiB reads classified %v, want (nearly) all random", n)
	}
	// A strided run broken by a random read stops prefetching at once.
	reads = nil
	for k := range int64(5) {
		reads = append(reads, [2]int64{k * 100000, 4096})
	}
	reads = append(reads, [2]int64{77 << 20, 4096})
	got, _, _ = kinds(reads)
	if got[4] != accessStrided || got[5] != accessRandom {
		t.Errorf("strided run then a random read: %v, want strided then random", got)
	}
	// Backwards strides are not followed.
	reads = nil
	for k := range int64(5) {
		reads = append(reads, [2]int64{(10 - k) * 100000, 4096})
	}
	got, _, _ = kinds(reads)
	for i, k := range got {
		if k != accessRandom {
			t.Errorf("backward read %d: %v, want random", i, k)
		}
	}
}

// A handle that read strided gets whole stripes read ahead only after a
// stripe's worth of sequential reads: short sequential runs between its
// records (the kernel's readahead where tasks' records meet) do not.
func TestPatternStridedThenSequential(t *testing.T) {
	var p readPattern
	for k := range int64(5) {
		p.observe(k*200000, 47008)
	}
	if !p.strided {
		t.Fatal("strided run not noticed")
	}
	const ss = 4 << 20
	off := int64(5 * 200000)
	p.observe(off, 131072)
	for i := int64(1); i < 32; i++ {
		k, _ := p.observe(off+i*131072, 131072)
		if k != accessSequential {
			t.Fatalf("read %d of a sequential run: %v", i, k)
		}
		if got, want := p.stripeReadahead(ss), (i+1)*131072 > ss; got != want && i*131072 != ss {
			t.Errorf("after %d bytes of sequential reads: stripe readahead %v, want %v", (i+1)*131072, got, want)
		}
	}
	var fresh readPattern
	fresh.observe(0, 131072)
	fresh.observe(131072, 131072)
	if !fresh.stripeReadahead(ss) {
		t.Error("a handle that never read strided waits for stripe readahead")
	}
}
