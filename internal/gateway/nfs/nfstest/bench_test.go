package nfstest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/weftfs/weft/internal/vfs"
	"github.com/weftfs/weft/internal/vfs/vfstest"
)

// BenchmarkWrite writes 16 MiB in 1 MiB records through the gateway
// (UNSTABLE then one COMMIT; FILE_SYNC each) and, as the baseline in the
// same run, through vfs directly (writes, then Fsync). Run with
// -benchtime=Nx; compare the ratios, not the absolute numbers.
func BenchmarkWrite(b *testing.B) {
	const total, rec = 16 << 20, 1 << 20
	f := New(b, 1)
	c, root := mountRoot(b, f, authSys(0, 0))
	data := vfstest.RandBytes(rec, 1)
	files := 0 // names, unique across the runs of each sub-benchmark
	b.Run("nfs-unstable+commit", func(b *testing.B) {
		b.SetBytes(total)
		for range b.N {
			files++
			fh := c.create(root, fmt.Sprintf("u%d", files), 0o644, nfs3Ok)
			for off := 0; off < total; off += rec {
				if st, _ := c.write(fh, uint64(off), data, 0); st != 0 {
					b.Fatal(st)
				}
			}
			if st, _ := c.call(pCommit, fh, uint64(0), uint32(0)); st != 0 {
				b.Fatal(st)
			}
		}
	})
	b.Run("nfs-file_sync", func(b *testing.B) {
		b.SetBytes(total)
		for range b.N {
			files++
			fh := c.create(root, fmt.Sprintf("s%d", files), 0o644, nfs3Ok)
			for off := 0; off < total; off += rec {
				if st, _ := c.write(fh, uint64(off), data, 2); st != 0 {
					b.Fatal(st)
				}
			}
		}
	})
	b.Run("vfs", func(b *testing.B) {
		b.SetBytes(total)
		ctx := context.Background()
		for range b.N {
			files++
			_, h, err := f.FS.Create(ctx, vfs.RootLIN, fmt.Sprintf("v%d", files), vfs.CreateArgs{Mode: 0o644}, true, os.O_RDWR)
			if err != nil {
				b.Fatal(err)
			}
			for off := 0; off < total; off += rec {
				if _, err := h.Write(ctx, data, int64(off)); err != nil {
					b.Fatal(err)
				}
			}
			if err := h.Fsync(ctx); err != nil {
				b.Fatal(err)
			}
			if err := f.FS.Release(ctx, h.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRead reads a 16 MiB file in 1 MiB READs, against vfs reads.
func BenchmarkRead(b *testing.B) {
	const total, rec = 16 << 20, 1 << 20
	f := New(b, 1)
	c, root := mountRoot(b, f, authSys(0, 0))
	data := vfstest.RandBytes(rec, 1)
	fh := c.create(root, "r", 0o644, nfs3Ok)
	for off := 0; off < total; off += rec {
		c.write(fh, uint64(off), data, 2)
	}
	b.Run("nfs", func(b *testing.B) {
		b.SetBytes(total)
		for range b.N {
			for off := 0; off < total; off += rec {
				if st, r := c.read(fh, uint64(off), rec); st != 0 || len(r.Data) != rec {
					b.Fatal(st, len(r.Data))
				}
			}
		}
	})
	b.Run("vfs", func(b *testing.B) {
		b.SetBytes(total)
		ctx := context.Background()
		lin, _ := linOf(b, c, fh)
		buf := make([]byte, rec)
		for range b.N {
			h, err := f.FS.Open(ctx, lin, os.O_RDONLY)
			if err != nil {
				b.Fatal(err)
			}
			for off := 0; off < total; off += rec {
				if n, err := h.Read(ctx, buf, int64(off)); n != rec {
					b.Fatal(n, err)
				}
			}
			f.FS.Release(ctx, h.ID)
		}
	})
}
