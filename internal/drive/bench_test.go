package drive

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// benchDir returns a fresh directory under $WEFT_BENCH_DIR (so benchmarks
// can run on the file system being measured), or b.TempDir().
func benchDir(b *testing.B) string {
	root := os.Getenv("WEFT_BENCH_DIR")
	if root == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(root, "weft-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// runStreams runs b.N calls of op spread over streams goroutines.
func runStreams(b *testing.B, streams int, op func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	b.ResetTimer()
	for s := 0; s < streams; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := op(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

const benchBlock = 1 << 20

// BenchmarkPut measures durable (SyncAlways) 1 MiB puts.
func BenchmarkPut(b *testing.B) {
	for _, streams := range []int{1, 4} {
		b.Run(fmt.Sprintf("1MiB/streams=%d", streams), func(b *testing.B) {
			d := openAt(b, benchDir(b))
			data := payload(benchBlock, 1)
			b.SetBytes(benchBlock)
			runStreams(b, streams, func(int) error {
				return d.Put(context.Background(), BlockHeader{ID: NewBlockID()}, bytes.NewReader(data), benchBlock)
			})
		})
	}
}

// BenchmarkGet measures whole-block 1 MiB gets (with CRC checks) of blocks
// just written, so mostly from the page cache.
func BenchmarkGet(b *testing.B) {
	for _, streams := range []int{1, 4} {
		b.Run(fmt.Sprintf("1MiB/streams=%d", streams), func(b *testing.B) {
			d := openAt(b, benchDir(b), func(o *Options) { o.Sync = SyncNever })
			data := payload(benchBlock, 1)
			ids := make([]BlockID, 64)
			for i := range ids {
				ids[i] = putTest(b, d, data)
			}
			b.SetBytes(benchBlock)
			runStreams(b, streams, func(i int) error {
				_, _, err := d.Get(context.Background(), ids[i%len(ids)], 0, -1)
				return err
			})
		})
	}
}
