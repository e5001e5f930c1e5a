package block

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/qos"
)

// benchRoot is $WEFT_BENCH_DIR (to measure a chosen file system) or a temp
// dir.
func benchRoot(b *testing.B) string {
	if root := os.Getenv("WEFT_BENCH_DIR"); root != "" {
		return root
	}
	return b.TempDir()
}

// runStreams runs b.N calls of op spread over streams goroutines.
func runStreams(b *testing.B, streams int, op func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	b.ResetTimer()
	start := cpuTime()
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
	reportCPU(b, start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// cpuTime returns the CPU time (user and system) of this process so far:
// client and server both run in it.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per operation since start, the
// cost that a machine with spare cores hides from ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

const benchBlock = 1 << 20

// BenchmarkPut measures durable 1 MiB puts over gRPC on loopback, spread
// over the node's two drives.
func BenchmarkPut(b *testing.B) {
	for _, streams := range []int{1, 4} {
		b.Run(fmt.Sprintf("1MiB/streams=%d", streams), func(b *testing.B) {
			n := startNode(b, benchRoot(b), drive.SyncAlways)
			data := payload(benchBlock, 1)
			b.SetBytes(benchBlock)
			runStreams(b, streams, func(i int) error {
				return n.client.Put(context.Background(), drive.ID(1+i%2), drive.BlockHeader{ID: drive.NewBlockID()}, data)
			})
		})
	}
}

// BenchmarkGet measures whole 1 MiB gets over gRPC on loopback of blocks
// just written (mostly from the page cache).
func BenchmarkGet(b *testing.B) {
	for _, streams := range []int{1, 4} {
		b.Run(fmt.Sprintf("1MiB/streams=%d", streams), func(b *testing.B) {
			n := startNode(b, benchRoot(b), drive.SyncNever)
			ids := n.putBlocks(b, 64, benchBlock)
			b.SetBytes(benchBlock)
			runStreams(b, streams, func(i int) error {
				j := i % len(ids)
				_, _, err := n.client.Get(context.Background(), drive.ID(1+j%2), ids[j], 0, -1)
				return err
			})
		})
	}
}

// BenchmarkGetQoS measures gets from the page cache with the service's
// QoS gate off and on with every class unlimited (QoS enabled, nothing
// limited: each I/O still passes the gate and is counted in the fine
// statistics): the CPU the gate costs an I/O, which sequential writes
// through a mount measure only within the machine's swing
// (docs/benchmarks.md, QoS's cost). 4 KiB reads show it most.
func BenchmarkGetQoS(b *testing.B) {
	for _, size := range []int{4 << 10, benchBlock} {
		for _, gate := range []bool{false, true} {
			b.Run(fmt.Sprintf("%dKiB/gate=%v", size>>10, gate), func(b *testing.B) {
				n := startNode(b, benchRoot(b), drive.SyncNever)
				if gate {
					n.svc.SetGate(qos.NewGate(qos.NewStats()))
				}
				ids := n.putBlocks(b, 64, size)
				b.SetBytes(int64(size))
				runStreams(b, 4, func(i int) error {
					j := i % len(ids)
					_, _, err := n.client.Get(WithTag(context.Background(), qos.Tag{Class: qos.Other, Client: "m1", PID: 100 + i%8}), drive.ID(1+j%2), ids[j], 0, -1)
					return err
				})
			})
		}
	}
}

// putBlocks stores count blocks of size bytes, alternately on the node's
// two drives (block i on drive 1+i%2), and returns their ids.
func (n *testNode) putBlocks(b *testing.B, count, size int) []drive.BlockID {
	data := payload(size, 1)
	ids := make([]drive.BlockID, count)
	for i := range ids {
		ids[i] = drive.NewBlockID()
		if err := n.client.Put(context.Background(), drive.ID(1+i%2), drive.BlockHeader{ID: ids[i]}, data); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}
