package client_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/meta"
)

// TestConcurrentFiles writes six files at once through one client, in
// chunks of random sizes, and reads them back.
func TestConcurrentFiles(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	const n, size = 6, 600 * kib
	lins := make([]meta.LIN, n)
	for i := range lins {
		lins[i] = f.Create(fmt.Sprintf("f%d", i), []string{"ec:4+2", "mirror:3", "ec:2+1"}[i%3])
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			data := clienttest.RandBytes(size, uint64(i))
			fh, err := c.Open(bg, lins[i], true)
			if err != nil {
				t.Error(err)
				return
			}
			for off := 0; off < size; {
				m := min(size-off, 1+rng.IntN(90*kib))
				if _, err := fh.WriteAt(bg, data[off:off+m], int64(off)); err != nil {
					t.Error(err)
					return
				}
				off += m
			}
			if err := fh.Close(bg); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i, lin := range lins {
		clienttest.MustEqual(t, fmt.Sprintf("file %d", i), f.ReadBack(lin), clienttest.RandBytes(size, uint64(i)))
	}
}

// TestConcurrentOneFile has four writers fill interleaved 10 KiB blocks of
// one file, in random order, through handles of one client and through
// four clients (whose commits of shared stripes race and are retried on
// generation conflicts). No acknowledged write may be lost.
func TestConcurrentOneFile(t *testing.T) {
	for _, shared := range []bool{true, false} {
		name := "four clients"
		if shared {
			name = "one client"
		}
		t.Run(name, func(t *testing.T) {
			f := clienttest.New(t)
			lin := f.Create("f", "ec:4+2")
			const writers, block, blocks = 4, 10 * kib, 100 // 1000 KiB: 4 stripes
			want := clienttest.RandBytes(block*blocks, 77)
			one := f.Client(testUnit)
			var wg sync.WaitGroup
			var conflicts int64
			var mu sync.Mutex
			for w := range writers {
				c := one
				if !shared {
					c = f.Client(testUnit)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					fh, err := c.Open(bg, lin, true)
					if err != nil {
						t.Error(err)
						return
					}
					rng := rand.New(rand.NewPCG(uint64(w), 3))
					var mine []int
					for b := w; b < blocks; b += writers {
						mine = append(mine, b)
					}
					rng.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
					for _, b := range mine {
						if _, err := fh.WriteAt(bg, want[b*block:(b+1)*block], int64(b*block)); err != nil {
							t.Error(err)
							return
						}
					}
					if err := fh.Close(bg); err != nil {
						t.Errorf("writer %d: %v", w, err)
					}
					if !shared {
						mu.Lock()
						conflicts += c.Stats().Conflicts
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			clienttest.MustEqual(t, "file", f.ReadBack(lin), want)
			if shared {
				// Handles of one client share the stripes: they never race.
				if n := one.Stats().Conflicts; n != 0 {
					t.Fatalf("%d conflicts within one client", n)
				}
				return
			}
			t.Logf("%d stripe conflicts resolved", conflicts)
		})
	}
}
