package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/weftfs/weft/internal/gateway/nfs/nfstest"
)

// BenchmarkNFS drives the in-process gateway with this package's client,
// one operation kind per sub-benchmark, for CPU profiles of the NFS path
// (go test -bench NFS/create -cpuprofile cpu.out). Absolute numbers are
// of an in-process cluster; compare profiles, not rates.
func BenchmarkNFS(b *testing.B) {
	f := nfstest.New(b, 1)
	s, err := nfsTarget(f).Session(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	names, live := 0, []string{} // live: created and not removed
	create := func() {
		names++
		n := fmt.Sprintf("c%d", names)
		if _, err := s.Create(n); err != nil {
			b.Fatal(err)
		}
		live = append(live, n)
	}
	for range 100 { // for stat and remove when run alone
		create()
	}
	b.Run("create", func(b *testing.B) {
		for range b.N {
			create()
		}
	})
	b.Run("stat", func(b *testing.B) {
		for i := range b.N {
			if _, err := s.Stat(live[i%len(live)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remove", func(b *testing.B) {
		for range b.N {
			if len(live) == 0 {
				b.StopTimer()
				create()
				b.StartTimer()
			}
			n := live[len(live)-1]
			live = live[:len(live)-1]
			if err := s.Remove(n); err != nil {
				b.Fatal(err)
			}
		}
	})
	const size = 16 << 20
	file, err := s.Create("data")
	if err != nil {
		b.Fatal(err)
	}
	fill := pattern()
	rec := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(rec)) { // for the reads when run alone
		fill(rec, 0, off)
		if _, err := file.WriteAt(rec, off); err != nil {
			b.Fatal(err)
		}
	}
	if err := file.Sync(); err != nil {
		b.Fatal(err)
	}
	b.Run("write1m", func(b *testing.B) {
		b.SetBytes(int64(len(rec)))
		for i := range b.N {
			off := int64(i%(size/len(rec))) * int64(len(rec))
			fill(rec, 0, off)
			if _, err := file.WriteAt(rec, off); err != nil {
				b.Fatal(err)
			}
		}
		if err := file.Sync(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("read1m", func(b *testing.B) {
		b.SetBytes(int64(len(rec)))
		for i := range b.N {
			if _, err := file.ReadAt(rec, int64(i%(size/len(rec)))*int64(len(rec))); err != nil {
				b.Fatal(err)
			}
		}
	})
	blk := make([]byte, 4096)
	b.Run("read4k", func(b *testing.B) {
		b.SetBytes(4096)
		for i := range b.N {
			if _, err := file.ReadAt(blk, int64((i*7919)%(size/4096))*4096); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write4k", func(b *testing.B) {
		b.SetBytes(4096)
		for i := range b.N {
			if _, err := file.WriteAt(blk, int64((i*7919)%(size/4096))*4096); err != nil {
				b.Fatal(err)
			}
		}
		if err := file.Sync(); err != nil {
			b.Fatal(err)
		}
	})
}
