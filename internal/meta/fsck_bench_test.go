package meta

import (
	"fmt"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// BenchmarkFsckScan measures the namespace checks of the fsck job over a
// consistent tree of fsckBenchDirs directories of fsckBenchFiles files,
// each pass as the job makes it (the layout half's usage pass too; the
// tree's files have no stripes), one goroutine, against memkv (the
// checker's own CPU) and an embedded etcd of one member (client, member
// and benchmark share this machine's CPUs). The baseline "read" reads
// every inode once (ScanInodes pages of 256, what the job's entries phase
// lists its directories with), so results can be read as ratios. Each
// pass reports inodes/s (of the tree's inodes, whatever it reads). Run:
//
//	go test ./internal/meta -run '^$' -bench BenchmarkFsckScan -benchtime 3x
//
// docs/benchmarks.md ("fsck") records the numbers.
func BenchmarkFsckScan(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) kv.Store
	}{
		{"mem", func(b *testing.B) kv.Store { return memkv.New(kv.Options{Limits: etcdkv.EmbeddedLimits}) }},
		{"etcd-1", func(b *testing.B) kv.Store { return benchEtcd(b, 1) }},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			m := newMeta(b, st.open(b))
			dirs, inodes := fsckBenchTree(b, m)
			bound, err := m.LINBound(bg)
			if err != nil {
				b.Fatal(err)
			}
			passes := []struct {
				name string
				run  func(b *testing.B)
			}{
				{"read", func(b *testing.B) {
					for next := LIN(1); next != 0; {
						_, after, err := m.ScanInodes(bg, next, bound, 257)
						if err != nil {
							b.Fatal(err)
						}
						next = after
					}
				}},
				{"entries", func(b *testing.B) {
					for _, d := range dirs {
						for after := ""; ; {
							p, err := m.FsckEntries(bg, d, after, 0)
							if err != nil || len(p.Findings)+len(p.Unclaimed) > 0 {
								b.Fatal(err, p.Findings, p.Unclaimed)
							}
							if after = p.Next; after == "" {
								break
							}
						}
					}
				}},
				{"backpointers", func(b *testing.B) {
					for lo := LIN(0); lo < bound; lo += 256 {
						if _, fs, err := m.FsckBackpointersRange(bg, lo, lo+256); err != nil || len(fs) > 0 {
							b.Fatal(err, fs)
						}
					}
				}},
				{"usage", func(b *testing.B) {
					if r, err := m.FsckUsage(bg); err != nil || len(r.Findings) > 0 {
						b.Fatal(err, r.Findings)
					}
				}},
				{"links", func(b *testing.B) {
					for lo := LIN(0); lo < bound; lo += 256 {
						if _, fs, err := m.FsckLinksRange(bg, lo, lo+256, nil); err != nil || len(fs) > 0 {
							b.Fatal(err, fs)
						}
					}
				}},
			}
			for _, p := range passes {
				b.Run(p.name, func(b *testing.B) {
					start := time.Now()
					for range b.N {
						p.run(b)
					}
					b.ReportMetric(float64(inodes)*float64(b.N)/time.Since(start).Seconds(), "inodes/s")
				})
			}
		})
	}
}

// fsckBenchDirs and fsckBenchFiles shape BenchmarkFsckScan's tree.
const (
	fsckBenchDirs  = 20
	fsckBenchFiles = 1000
)

// fsckBenchTree makes the benchmark's tree under /fsckbench with Bulk and
// returns its directories (the root's and /fsckbench's first) and its
// inode count (the root's included).
func fsckBenchTree(b *testing.B, m *Meta) ([]LIN, int) {
	b.Helper()
	top := must(m.Mkdir(bg, RootLIN, "fsckbench", 0o755)).LIN
	dirs := []LIN{RootLIN, top}
	bulk := m.NewBulk(BulkOptions{})
	for d := range fsckBenchDirs {
		dir, err := bulk.Mkdir(bg, top, fmt.Sprintf("d%05d", d), 0o755)
		if err != nil {
			b.Fatal(err)
		}
		dirs = append(dirs, dir)
		for f := range fsckBenchFiles {
			if _, err := bulk.Create(bg, dir, fmt.Sprintf("f%06d.dat", f), NewInode{Mode: 0o644}); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := bulk.Flush(bg); err != nil {
		b.Fatal(err)
	}
	return dirs, 2 + fsckBenchDirs*(1+fsckBenchFiles)
}
