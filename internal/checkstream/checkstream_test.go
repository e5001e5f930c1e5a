package checkstream

import (
	"bytes"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

const testID = 0x0123456789abcdef

func gen(t testing.TB, s Stream) []byte {
	t.Helper()
	var b bytes.Buffer
	n, err := s.WriteTo(&b)
	if err != nil || n != s.Size || int64(b.Len()) != s.Size {
		t.Fatalf("WriteTo %+v: %d bytes, %v (buffer %d)", s, n, err, b.Len())
	}
	return b.Bytes()
}

func check(t *testing.T, r io.Reader, o Options) *Report {
	t.Helper()
	rep, err := Check(r, o)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return rep
}

func TestValidStreams(t *testing.T) {
	for _, s := range []Stream{
		{ID: testID, Size: HeaderSize, Block: MinBlock},
		{ID: testID, Size: 1 << 20, Block: 64 << 10},
		{ID: testID, Size: 1<<20 + 12345, Block: 64 << 10},
		{ID: 1, Size: 3*4096 + 10, Block: 4096}, // a tail shorter than a header joins the block before
		{ID: 2, Size: 3*4096 + HeaderSize, Block: 4096},
		{ID: 3, Size: 100, Block: 4096},
	} {
		data := gen(t, s)
		rep := check(t, bytes.NewReader(data), Options{})
		want := []Extent{{Class: Valid, Offset: 0, Bytes: s.Size}}
		if !rep.OK || !reflect.DeepEqual(rep.Extents, want) || rep.Valid != s.Size || rep.Read != s.Size {
			t.Errorf("%+v: got %+v, want one valid extent", s, rep)
		}
		if rep.Stream == nil || rep.Stream.Size != s.Size || rep.Stream.Block != s.Block || rep.Stream.Blocks != s.Blocks() {
			t.Errorf("%+v: stream %+v", s, rep.Stream)
		}
		if want := "checkstream: VALID " + strconv.FormatInt(s.Size, 10) + " bytes"; !strings.HasPrefix(rep.Verdict(), want) {
			t.Errorf("%+v: verdict %q, want %q…", s, rep.Verdict(), want)
		}
	}
}

// TestGeometry: every block has a header, the last is never shorter
// than one, and the blocks tile the stream.
func TestGeometry(t *testing.T) {
	for _, size := range []int64{48, 511, 512, 512 + 47, 512 + 48, 5*512 - 1, 5 * 512, 5*512 + 1, 5*512 + 47, 5*512 + 48} {
		s := Stream{Size: size, Block: 512}
		var next int64
		for k := int64(0); k < s.Blocks(); k++ {
			off, n := s.BlockAt(k)
			if off != next || n < HeaderSize || n >= 512+HeaderSize {
				t.Fatalf("size %d: block %d at %d of %d bytes (want offset %d)", size, k, off, n, next)
			}
			next = off + int64(n)
		}
		if next != size {
			t.Fatalf("size %d: blocks end at %d", size, next)
		}
	}
}

func TestInvalidParameters(t *testing.T) {
	for _, s := range []Stream{{Size: 47, Block: 4096}, {Size: 1 << 20, Block: 1000}, {Size: 1 << 20, Block: 256}, {Size: 1 << 20, Block: 32 << 20}} {
		if _, err := s.WriteTo(io.Discard); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
}

// damage generates a 1 MiB stream of 64 KiB blocks, applies f and checks
// the result against want.
func damage(t *testing.T, f func(b []byte, s Stream) []byte, want []Extent) *Report {
	t.Helper()
	s := Stream{ID: testID, Size: 1 << 20, Block: 64 << 10}
	data := f(gen(t, s), s)
	rep := check(t, bytes.NewReader(data), Options{})
	if rep.OK {
		t.Errorf("damaged stream reported OK: %+v", rep)
	}
	if !reflect.DeepEqual(rep.Extents, want) {
		t.Errorf("extents\n got %+v\nwant %+v", rep.Extents, want)
	}
	if !strings.HasPrefix(rep.Verdict(), "checkstream: FAILED ") {
		t.Errorf("verdict %q", rep.Verdict())
	}
	var sum int64
	for _, e := range rep.Extents {
		sum += e.Bytes
	}
	if sum != rep.Valid+rep.Zero+rep.Corrupt+rep.Missing {
		t.Errorf("extents add up to %d, totals to %d", sum, rep.Valid+rep.Zero+rep.Corrupt+rep.Missing)
	}
	return rep
}

const size = 1 << 20

func TestZeroExtent(t *testing.T) {
	// Across two block boundaries and a whole header: exact.
	damage(t, func(b []byte, _ Stream) []byte { clear(b[100000:300000]); return b },
		[]Extent{{Valid, 0, 100000, ""}, {Zero, 100000, 200000, ""}, {Valid, 300000, size - 300000, ""}})
}

func TestUnalignedZeroExtent(t *testing.T) {
	// Inside one block.
	damage(t, func(b []byte, _ Stream) []byte { clear(b[70001:70101]); return b },
		[]Extent{{Valid, 0, 70001, ""}, {Zero, 70001, 100, ""}, {Valid, 70101, size - 70101, ""}})
	// A whole block.
	damage(t, func(b []byte, _ Stream) []byte { clear(b[131072:196608]); return b },
		[]Extent{{Valid, 0, 131072, ""}, {Zero, 131072, 65536, ""}, {Valid, 196608, size - 196608, ""}})
	// The first block: the stream is learnt from the second.
	damage(t, func(b []byte, _ Stream) []byte { clear(b[:65536+1000]); return b },
		[]Extent{{Zero, 0, 66536, ""}, {Valid, 66536, size - 66536, ""}})
}

// TestLargeBlocks: with 4 MiB blocks and the first one zeroed, the
// stream is learnt from the second, beyond the first megabyte read.
func TestLargeBlocks(t *testing.T) {
	s := Stream{ID: testID, Size: 12<<20 + 5, Block: 4 << 20}
	data := gen(t, s)
	clear(data[:4<<20+100])
	rep := check(t, iotest.HalfReader(bytes.NewReader(data)), Options{})
	want := []Extent{{Zero, 0, 4<<20 + 100, ""}, {Valid, 4<<20 + 100, s.Size - 4<<20 - 100, ""}}
	if !reflect.DeepEqual(rep.Extents, want) || rep.Stream == nil || rep.Stream.Block != 4<<20 {
		t.Errorf("got %+v %+v", rep.Extents, rep.Stream)
	}
}

func TestFlippedByte(t *testing.T) {
	rep := damage(t, func(b []byte, _ Stream) []byte { b[200000] ^= 0x5a; return b },
		[]Extent{{Valid, 0, 200000, ""}, {Corrupt, 200000, 1, "differs from the stream's data"}, {Valid, 200001, size - 200001, ""}})
	if rep.Corrupt != 1 {
		t.Errorf("corrupt %d", rep.Corrupt)
	}
	// In a header (the offset field).
	damage(t, func(b []byte, _ Stream) []byte { b[3*65536+24] ^= 0x01; return b },
		[]Extent{{Valid, 0, 3*65536 + 24, ""}, {Corrupt, 3*65536 + 24, 1, "differs from the stream's data"}, {Valid, 3*65536 + 25, size - 3*65536 - 25, ""}})
}

func TestMisplacedBlock(t *testing.T) {
	damage(t, func(b []byte, _ Stream) []byte { copy(b[7*65536:8*65536], b[3*65536:4*65536]); return b },
		[]Extent{{Valid, 0, 7 * 65536, ""}, {Corrupt, 7 * 65536, 65536, "misplaced: holds the block of offset 196608"}, {Valid, 8 * 65536, size - 8*65536, ""}})
}

func TestForeignBlock(t *testing.T) {
	damage(t, func(b []byte, s Stream) []byte {
		s.ID = 42
		copy(b[2*65536:], s.BlockData(2))
		return b
	}, []Extent{{Valid, 0, 2 * 65536, ""}, {Corrupt, 2 * 65536, 65536, "a block of another stream (000000000000002a)"}, {Valid, 3 * 65536, size - 3*65536, ""}})
}

func TestGarbage(t *testing.T) {
	// Every byte of [5000, 9000) differs and none is zero.
	damage(t, func(b []byte, _ Stream) []byte {
		for i := 5000; i < 9000; i++ {
			b[i] ^= 0x5a
		}
		return b
	}, []Extent{{Valid, 0, 5000, ""}, {Corrupt, 5000, 4000, "differs from the stream's data"}, {Valid, 9000, size - 9000, ""}})
	// Text written over a block boundary and its header.
	msg := bytes.Repeat([]byte("overwritten by someone else "), 100)
	damage(t, func(b []byte, _ Stream) []byte { copy(b[65536-1000:], msg); return b },
		[]Extent{{Valid, 0, 64536, ""}, {Corrupt, 64536, 2800, "differs from the stream's data"}, {Valid, 67336, size - 67336, ""}})
}

func TestTruncated(t *testing.T) {
	damage(t, func(b []byte, _ Stream) []byte { return b[:500000] },
		[]Extent{{Valid, 0, 500000, ""}, {Missing, 500000, size - 500000, "the data ends at 500000; its blocks say the stream is 1048576 bytes"}})
	// Inside a header.
	damage(t, func(b []byte, _ Stream) []byte { return b[:7*65536+20] },
		[]Extent{{Valid, 0, 7*65536 + 20, ""}, {Missing, 7*65536 + 20, size - 7*65536 - 20, "the data ends at 458772; its blocks say the stream is 1048576 bytes"}})
	// At a block boundary.
	damage(t, func(b []byte, _ Stream) []byte { return b[:4*65536] },
		[]Extent{{Valid, 0, 4 * 65536, ""}, {Missing, 4 * 65536, size - 4*65536, "the data ends at 262144; its blocks say the stream is 1048576 bytes"}})
}

func TestTrailingData(t *testing.T) {
	damage(t, func(b []byte, _ Stream) []byte { return append(b, make([]byte, 100)...) },
		[]Extent{{Valid, 0, size, ""}, {Corrupt, size, 100, "past the stream's end (1048576 bytes)"}})
}

func TestNotAStream(t *testing.T) {
	data := append(make([]byte, 1000), bytes.Repeat([]byte("x"), 3000)...)
	rep := check(t, bytes.NewReader(data), Options{})
	want := []Extent{{Zero, 0, 1000, ""}, {Corrupt, 1000, 3000, "no valid block of a stream found"}}
	if rep.OK || rep.Stream != nil || !reflect.DeepEqual(rep.Extents, want) || rep.Read != 4000 {
		t.Errorf("got %+v", rep)
	}
	rep = check(t, bytes.NewReader(nil), Options{})
	if rep.OK || len(rep.Extents) != 0 {
		t.Errorf("empty input: %+v", rep)
	}
}

func TestExpectedID(t *testing.T) {
	s := Stream{ID: testID, Size: 256 << 10, Block: 4096}
	data := gen(t, s)
	id := uint64(testID)
	if rep := check(t, bytes.NewReader(data), Options{ID: &id}); !rep.OK {
		t.Errorf("right id: %+v", rep)
	}
	other := uint64(7)
	if rep := check(t, bytes.NewReader(data), Options{ID: &other}); rep.OK || rep.Stream != nil || rep.Corrupt+rep.Zero != s.Size || rep.Valid != 0 {
		t.Errorf("wrong id: %+v", rep.Verdict())
	}
}

// TestPipe reads the stream as a pipe delivers it: in short reads, with
// no way to seek.
func TestPipe(t *testing.T) {
	s := Stream{ID: testID, Size: 3<<20 + 77, Block: 64 << 10}
	data := gen(t, s)
	clear(data[1<<20 : 1<<20+5])
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, iotest.HalfReader(bytes.NewReader(data)))
		pw.CloseWithError(err)
	}()
	rep := check(t, pr, Options{})
	want := []Extent{{Valid, 0, 1 << 20, ""}, {Zero, 1 << 20, 5, ""}, {Valid, 1<<20 + 5, s.Size - 1<<20 - 5, ""}}
	if !reflect.DeepEqual(rep.Extents, want) {
		t.Errorf("got %+v", rep.Extents)
	}
}

func TestReadError(t *testing.T) {
	s := Stream{ID: testID, Size: 1 << 20, Block: 4096}
	data := gen(t, s)
	r := io.MultiReader(bytes.NewReader(data[:5000]), iotest.ErrReader(io.ErrClosedPipe))
	if _, err := Check(r, Options{}); err == nil {
		t.Error("no error")
	}
}

func benchStream() Stream { return Stream{ID: testID, Size: 256 << 20, Block: DefaultBlock} }

func BenchmarkGenerate(b *testing.B) {
	s := benchStream()
	b.SetBytes(s.Size)
	for b.Loop() {
		if _, err := s.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	s := benchStream()
	data := gen(b, s)
	b.SetBytes(s.Size)
	for b.Loop() {
		rep, err := Check(bytes.NewReader(data), Options{})
		if err != nil || !rep.OK {
			b.Fatal(err, rep)
		}
	}
}
