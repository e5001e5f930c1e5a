package drive

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// flipByte flips one bit of the byte at off in block id's file.
func flipByte(t *testing.T, d *Drive, id BlockID, off int64) {
	t.Helper()
	_, path := d.blockPath(id)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func wantCorrupt(t *testing.T, err error, d *Drive, id BlockID, seg int) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("error = %v, want ErrCorrupt", err)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a *CorruptError", err)
	}
	if ce.Drive != d.ID() || ce.Block != id || ce.Segment != seg {
		t.Fatalf("CorruptError = %+v, want drive %v block %v segment %d", ce, d.ID(), id, seg)
	}
	where := "header"
	if seg != HeaderSegment {
		where = "segment " + strconv.Itoa(seg)
	}
	for _, s := range []string{"drive: corrupt block", d.ID().String(), id.String(), where} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not mention %q", err, s)
		}
	}
}

func TestCorruptDataSegment(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	data := payload(4*SegmentSize+10, 3)
	id := putTest(t, d, data)
	flipByte(t, d, id, HeaderAlign+2*SegmentSize+1234) // in segment 2

	_, _, err := d.Get(ctx, id, 0, -1)
	wantCorrupt(t, err, d, id, 2)
	_, _, err = d.Get(ctx, id, 2*SegmentSize-1, 2)
	wantCorrupt(t, err, d, id, 2)
	wantCorrupt(t, d.Verify(ctx, id), d, id, 2)

	// Untouched segments still read.
	for _, r := range [][2]int64{{0, 2 * SegmentSize}, {3 * SegmentSize, SegmentSize + 10}, {SegmentSize + 5, 100}} {
		got, _, err := d.Get(ctx, id, r[0], r[1])
		if err != nil || string(got) != string(data[r[0]:r[0]+r[1]]) {
			t.Fatalf("Get(%d, %d) of an intact range: %v", r[0], r[1], err)
		}
	}
	// Stat looks at the header only.
	if _, _, _, err := d.Stat(id); err != nil {
		t.Fatalf("Stat = %v", err)
	}
}

func TestCorruptHeader(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		off  int64
	}{
		{"magic", 0},
		{"owner", 33},
		{"length", 64},
		{"segment crc", headerFixedLen + 4},
		{"header crc", headerFixedLen + 4*2 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTest(t)
			id := putTest(t, d, payload(2*SegmentSize, 1))
			flipByte(t, d, id, tt.off)
			_, _, err := d.Get(ctx, id, 0, 10)
			wantCorrupt(t, err, d, id, HeaderSegment)
			_, _, _, err = d.Stat(id)
			wantCorrupt(t, err, d, id, HeaderSegment)
			wantCorrupt(t, d.Verify(ctx, id), d, id, HeaderSegment)
		})
	}
}

func TestCorruptWrongBlockFile(t *testing.T) {
	d := openTest(t)
	a := putTest(t, d, payload(100, 1))
	b := NewBlockID()
	_, pa := d.blockPath(a)
	_, pb := d.blockPath(b)
	raw, _ := os.ReadFile(pa)
	if err := os.WriteFile(pb, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := d.Get(context.Background(), b, 0, -1)
	wantCorrupt(t, err, d, b, HeaderSegment)
}

func TestTruncatedBlock(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		size    int64 // file size after truncation
		readOff int64
		readLen int64
		seg     int
	}{
		{"empty file", 0, 0, 1, HeaderSegment},
		{"inside header", 50, 0, 1, HeaderSegment},
		{"after header", HeaderAlign, 0, 1, 0},
		{"mid segment 1", HeaderAlign + SegmentSize + 7, SegmentSize, 10, 1},
		{"last byte", HeaderAlign + 3*SegmentSize - 1, 0, -1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openTest(t)
			data := payload(3*SegmentSize, 1)
			id := putTest(t, d, data)
			_, path := d.blockPath(id)
			if err := os.Truncate(path, tt.size); err != nil {
				t.Fatal(err)
			}
			_, _, err := d.Get(ctx, id, tt.readOff, tt.readLen)
			wantCorrupt(t, err, d, id, tt.seg)
			if tt.seg != HeaderSegment {
				wantCorrupt(t, d.Verify(ctx, id), d, id, min(tt.seg, int((tt.size-HeaderAlign)/SegmentSize)))
				if tt.seg > 0 { // a complete earlier segment still reads
					got, _, err := d.Get(ctx, id, 0, SegmentSize)
					if err != nil || string(got) != string(data[:SegmentSize]) {
						t.Fatalf("Get of an intact segment: %v", err)
					}
				}
			}
		})
	}
}

func TestTrailingBytes(t *testing.T) {
	d := openTest(t)
	id := putTest(t, d, payload(SegmentSize+1, 1))
	_, path := d.blockPath(id)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte("junk"))
	f.Close()
	if _, _, err := d.Get(context.Background(), id, 0, -1); err != nil {
		t.Fatalf("Get = %v", err)
	}
	wantCorrupt(t, d.Verify(context.Background(), id), d, id, 1)
}
