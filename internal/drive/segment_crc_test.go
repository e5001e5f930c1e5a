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

// DataCRC combines a header's segment CRCs into the CRC of the whole data,
// for every length shape (empty, inside one segment, exact segments, a
// short last one), and refuses a header whose CRCs do not cover its length.
func TestDataCRC(t *testing.T) {
	for _, n := range []int{0, 1, 100, SegmentSize - 1, SegmentSize, SegmentSize + 1, 3*SegmentSize + 12345, 16 * SegmentSize} {
		data := payload(n, uint64(n)+1)
		segs, whole := AppendSegmentCRCs(nil, data)
		h := BlockHeader{Length: int64(n), SegmentSize: SegmentSize, SegmentCRCs: segs}
		got, ok := DataCRC(h)
		if want := crc32.Checksum(data, castagnoli()); !ok || got != want || got != whole {
			t.Fatalf("%d bytes: DataCRC %#x, %v; want %#x", n, got, ok, want)
		}
	}
	if _, ok := DataCRC(BlockHeader{Length: 2 * SegmentSize, SegmentSize: SegmentSize, SegmentCRCs: []uint32{1}}); ok {
		t.Fatal("a header with one CRC for two segments: ok")
	}
	if _, ok := DataCRC(BlockHeader{Length: 10}); ok {
		t.Fatal("a header without segment CRCs: ok")
	}
}
