package clienttest

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
)

// RandBytes returns n deterministic pseudo-random bytes.
func RandBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for k := 0; k < 8; k++ {
			b[i+k] = byte(v >> (8 * k))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// WriteAll writes data at 0 in chunks of chunk bytes.
func WriteAll(tb testing.TB, f *client.File, data []byte, chunk int) {
	tb.Helper()
	for off := 0; off < len(data); off += chunk {
		end := min(off+chunk, len(data))
		if n, err := f.WriteAt(bg, data[off:end], int64(off)); err != nil || n != end-off {
			tb.Fatalf("WriteAt(%d bytes at %d) = %d, %v", end-off, off, n, err)
		}
	}
}

// ReadAll reads the whole file in chunks of chunk bytes, to EOF.
func ReadAll(tb testing.TB, f *client.File, chunk int) []byte {
	tb.Helper()
	var out []byte
	buf := make([]byte, chunk)
	for off := int64(0); ; {
		n, err := f.ReadAt(bg, buf, off)
		out = append(out, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			return out
		}
		if err != nil {
			tb.Fatalf("ReadAt(%d at %d): %v", chunk, off, err)
		}
	}
}

// MustEqual fails with the first differing offset.
func MustEqual(tb testing.TB, what string, got, want []byte) {
	tb.Helper()
	if bytes.Equal(got, want) {
		return
	}
	if len(got) != len(want) {
		tb.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			tb.Fatalf("%s: first difference at byte %d: %#x, want %#x", what, i, got[i], want[i])
		}
	}
}

// FlipByte flips the data byte at off of a block file on disk (after its
// header), so that the block fails its segment CRC.
func FlipByte(tb testing.TB, path string, off int64) {
	tb.Helper()
	fh, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	defer fh.Close()
	b := make([]byte, 1)
	at := drive.HeaderAlign + off
	if _, err := fh.ReadAt(b, at); err != nil {
		tb.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := fh.WriteAt(b, at); err != nil {
		tb.Fatal(err)
	}
}
