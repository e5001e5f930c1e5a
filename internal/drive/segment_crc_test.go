package drive

import (
	"hash/crc32"
	"slices"
	"testing"
)

func TestAppendSegmentCRCs(t *testing.T) {
	for _, n := range []int{0, 1, 4 << 10, SegmentSize - 1, SegmentSize, SegmentSize + 1, 3*SegmentSize + 100, 1 << 20, 1<<20 - 4<<10, 5<<20 + 12345} {
		data := payload(n, uint64(n))
		segs, whole := AppendSegmentCRCs(nil, data)
		if want := crc32.Checksum(data, castagnoli()); whole != want {
			t.Errorf("%d bytes: whole CRC %08x, want %08x", n, whole, want)
		}
		var want []uint32
		for off := 0; off < n; off += SegmentSize {
			want = append(want, crc32.Checksum(data[off:min(off+SegmentSize, n)], castagnoli()))
		}
		if !slices.Equal(segs, want) || len(segs) != segmentCount(int64(n), SegmentSize) {
			t.Errorf("%d bytes: segment CRCs %x, want %x", n, segs, want)
		}
	}
}

func BenchmarkAppendSegmentCRCs(b *testing.B) {
	data := payload(1<<20, 1)
	segs := make([]uint32, 0, 16)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		segs, _ = AppendSegmentCRCs(segs[:0], data)
	}
}

func BenchmarkChecksum(b *testing.B) {
	data := payload(1<<20, 1)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		crc32.Checksum(data, castagnoli())
	}
}
