package client_test

import (
	"context"
	"fmt"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/meta"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/drive"
)

// Benchmarks of the data path on the fixture (3 nodes × 4 drives on
// loopback, tmpfs, no syncs), in file bytes per second. Compare them as
// ratios with the "raw" baselines measured in the same run: the same
// units put to / got from the block services directly, with no encoding,
// no metadata and no client buffering — the ceiling of the client.
//
//	go test -run '^$' -bench Sequential -benchtime 3x ./internal/client/

const benchSize = 256 * mib

func BenchmarkSequentialWrite(b *testing.B) {
	f := clienttest.New(b)
	c := f.Client(0)
	lin := f.Create("bench", "ec:4+2")
	data := clienttest.RandBytes(benchSize, 1)
	b.SetBytes(benchSize)
	for b.Loop() {
		fh, err := c.Open(bg, lin, true)
		if err != nil {
			b.Fatal(err)
		}
		clienttest.WriteAll(b, fh, data, mib)
		if err := fh.Close(bg); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		fh, _ = c.Open(bg, lin, true)
		if err := fh.Truncate(bg, 0); err != nil {
			b.Fatal(err)
		}
		fh.Close(bg)
		f.DrainDeletes()
		b.StartTimer()
	}
}

func BenchmarkSequentialRead(b *testing.B) {
	f := clienttest.New(b)
	lin := f.Create("bench", "ec:4+2")
	fh, _ := f.Client(0).Open(bg, lin, true)
	clienttest.WriteAll(b, fh, clienttest.RandBytes(benchSize, 1), mib)
	if err := fh.Close(bg); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, mib)
	b.SetBytes(benchSize)
	for b.Loop() {
		c := f.Client(0)
		fh, err := c.Open(bg, lin, false)
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < benchSize; off += mib {
			if _, err := fh.ReadAt(bg, buf, off); err != nil {
				b.Fatal(err)
			}
		}
		fh.Close(bg)
		c.Close()
	}
}

// BenchmarkSequentialRaw puts the units of a 256 MiB ec:4+2 file — 384
// blocks of 1 MiB, 24 at a time like the client's 4 stripes in flight —
// straight to the block services, then gets its 256 data units, and
// reports file bytes per second.
func BenchmarkSequentialRaw(b *testing.B) {
	f := clienttest.New(b)
	unit := clienttest.RandBytes(mib, 2)
	clients := map[string]*block.Client{}
	for _, n := range f.Nodes {
		bc, err := block.Dial(n.Addr)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { bc.Close() })
		clients[n.Name] = bc
	}
	type put struct {
		bc   *block.Client
		d    drive.ID
		id   drive.BlockID
		data bool // a data unit (the client reads only those)
	}
	const stripes = benchSize / (4 * mib)
	var blocks []put
	for s := range stripes {
		for u := range 6 {
			d := f.Topo.States()[(s*6+u)%12]
			blocks = append(blocks, put{clients[d.Node], drive.ID(d.ID), drive.NewBlockID(), u < 4})
		}
	}
	run := func(b *testing.B, op func(ctx context.Context, p put) error) {
		sem := make(chan struct{}, 4*6)
		var wg sync.WaitGroup
		for _, p := range blocks {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := op(bg, p); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	b.Run("put", func(b *testing.B) {
		b.SetBytes(benchSize)
		for b.Loop() {
			run(b, func(ctx context.Context, p put) error {
				return p.bc.Put(ctx, p.d, drive.BlockHeader{ID: p.id, Owner: 1}, unit)
			})
			b.StopTimer()
			run(b, func(ctx context.Context, p put) error { return p.bc.Delete(ctx, p.d, p.id) })
			b.StartTimer()
		}
	})
	run(b, func(ctx context.Context, p put) error {
		return p.bc.Put(ctx, p.d, drive.BlockHeader{ID: p.id, Owner: 1}, unit)
	})
	b.Run("get", func(b *testing.B) {
		b.SetBytes(benchSize)
		for b.Loop() {
			run(b, func(ctx context.Context, p put) error {
				if !p.data {
					return nil
				}
				_, _, err := p.bc.Get(ctx, p.d, p.id, 0, mib)
				return err
			})
		}
	})
}

// localReadFixture writes a benchSize ec:4+2 file on a fixture whose
// drives are all "on this machine", as on a `weft local up` mount, and
// returns a Client that reads them straight from their directories.
func localReadFixture(b *testing.B, tweak ...func(*client.Config)) (*client.Client, meta.LIN) {
	f := clienttest.New(b)
	f.Topo.Set(func(*client.DriveState) bool { return true }, func(d *client.DriveState) {
		d.LocalPath = f.Drive(d.ID).Path()
	})
	lin := f.Create("bench", "ec:4+2")
	fh, _ := f.Client(0).Open(bg, lin, true)
	clienttest.WriteAll(b, fh, clienttest.RandBytes(benchSize, 1), mib)
	if err := fh.Close(bg); err != nil {
		b.Fatal(err)
	}
	return f.Client(0, append([]func(*client.Config){func(cfg *client.Config) { cfg.ClusterID = "c-test" }}, tweak...)...), lin
}

// BenchmarkLocalSequentialRead reads the file in 1 MiB reads from drives
// on this machine (short-circuit reads), by one reader and by four
// readers of a quarter each, as fio does on a local mount.
func BenchmarkLocalSequentialRead(b *testing.B) {
	for _, readers := range []int{1, 4} {
		b.Run(fmt.Sprintf("readers=%d", readers), func(b *testing.B) {
			c, lin := localReadFixture(b)
			b.SetBytes(benchSize)
			for b.Loop() {
				var wg sync.WaitGroup
				part := int64(benchSize / readers)
				for r := range readers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						fh, err := c.Open(bg, lin, false)
						if err != nil {
							b.Error(err)
							return
						}
						defer fh.Close(bg)
						buf := make([]byte, mib)
						for off := int64(r) * part; off < int64(r+1)*part; off += mib {
							if _, err := fh.ReadAt(bg, buf, off); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
			}
		})
	}
}

// BenchmarkLocalRandomRead reads 4 KiB at random 4 KiB-aligned offsets of
// the file from drives on this machine, and reports the unit bytes read
// per file byte (1 would be no read amplification in the client).
func BenchmarkLocalRandomRead(b *testing.B) {
	c, lin := localReadFixture(b)
	fh, err := c.Open(bg, lin, false)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close(bg)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 4*kib)
	before := c.Stats()
	n := 0
	for b.Loop() {
		off := rng.Int64N(benchSize/(4*kib)) * 4 * kib
		if _, err := fh.ReadAt(bg, buf, off); err != nil {
			b.Fatal(err)
		}
		n++
	}
	after := c.Stats()
	b.SetBytes(4 * kib)
	b.ReportMetric(float64(after.UnitBytesRead-before.UnitBytesRead)/float64(n*4*kib), "unit-bytes/byte")
}

// BenchmarkRandomWrite writes 4 KiB at random 4 KiB-aligned offsets of a
// 256 MiB ec:4+2 file (written sequentially first), randWrites per
// iteration, then syncs; it reports the writes per second, the sync
// included (fio's randwrite with end_fsync on a mount). The blocks that
// copy-on-write replaced are deleted every drainEvery writes, off the
// clock, so that tmpfs does not fill.
//
//	go test -run '^$' -bench RandomWrite -benchtime 3x ./internal/client/
func BenchmarkRandomWrite(b *testing.B) {
	const (
		randWrites = 65536
		drainEvery = 4096
	)
	f := clienttest.New(b)
	c := f.Client(0)
	lin := f.Create("bench", "ec:4+2")
	fh, err := c.Open(bg, lin, true)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close(bg)
	clienttest.WriteAll(b, fh, clienttest.RandBytes(benchSize, 1), mib)
	if err := fh.Sync(bg); err != nil {
		b.Fatal(err)
	}
	f.DrainDeletes()
	p := clienttest.RandBytes(4*kib, 2)
	rng := rand.New(rand.NewPCG(1, 2))
	before := c.Stats().StripesWritten
	var syncs time.Duration
	for b.Loop() {
		for i := range randWrites {
			off := rng.Int64N(benchSize/(4*kib)) * 4 * kib
			if _, err := fh.WriteAt(bg, p, off); err != nil {
				b.Fatal(err)
			}
			if i%drainEvery == drainEvery-1 {
				b.StopTimer()
				f.DrainDeletes()
				b.StartTimer()
			}
		}
		t0 := time.Now()
		if err := fh.Sync(bg); err != nil {
			b.Fatal(err)
		}
		syncs += time.Since(t0)
		b.StopTimer()
		f.DrainDeletes()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*randWrites)/b.Elapsed().Seconds(), "writes/s")
	b.ReportMetric(syncs.Seconds()/float64(b.N), "sync-s/op")
	b.ReportMetric(float64(b.N*randWrites)/float64(c.Stats().StripesWritten-before), "writes/stripe")
}
