package drive

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestPutGetRoundTrip(t *testing.T) {
	d := openTest(t)
	sizes := []int{0, 1, SegmentSize - 1, SegmentSize, SegmentSize + 1, 1 << 20, 3<<20 + 7}
	for i, n := range sizes {
		data := payload(n, uint64(i))
		h := BlockHeader{ID: NewBlockID(), Owner: 77, Stripe: 3, Unit: 2, Generation: 11}
		if err := d.Put(context.Background(), h, bytes.NewReader(data), int64(n)); err != nil {
			t.Fatalf("Put %d: %v", n, err)
		}
		got, hdr, err := d.Get(context.Background(), h.ID, 0, -1)
		if err != nil {
			t.Fatalf("Get %d: %v", n, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("Get %d: data differs", n)
		}
		if hdr.ID != h.ID || hdr.Owner != 77 || hdr.Stripe != 3 || hdr.Unit != 2 || hdr.Generation != 11 ||
			hdr.Length != int64(n) || hdr.Version != BlockFormatVersion || hdr.SegmentSize != SegmentSize ||
			len(hdr.SegmentCRCs) != segmentCount(int64(n), SegmentSize) || hdr.Created.IsZero() {
			t.Fatalf("Get %d: header %+v", n, hdr)
		}
		if err := d.Verify(context.Background(), h.ID); err != nil {
			t.Fatalf("Verify %d: %v", n, err)
		}
		sh, size, mtime, err := d.Stat(h.ID)
		if err != nil || sh.Length != int64(n) || size != int64(hdr.HeaderLength()+n) || mtime.IsZero() {
			t.Fatalf("Stat %d = %+v, %d, %v, %v", n, sh, size, mtime, err)
		}
	}
	u, err := d.Usage()
	if err != nil || u.Blocks != int64(len(sizes)) {
		t.Fatalf("Usage = %+v, %v", u, err)
	}
}

func TestGetRange(t *testing.T) {
	d := openTest(t)
	n := 3*SegmentSize + 100
	data := payload(n, 9)
	id := putTest(t, d, data)
	tests := []struct {
		off, length int64
		wantErr     bool
	}{
		{0, 0, false},
		{0, 1, false},
		{0, SegmentSize, false},
		{SegmentSize - 1, 2, false},                 // across one boundary
		{SegmentSize - 10, SegmentSize + 20, false}, // across two boundaries
		{SegmentSize, SegmentSize, false},           // exactly one segment
		{3 * SegmentSize, 100, false},               // the short last segment
		{int64(n) - 1, 1, false},
		{int64(n), 0, false},
		{int64(n), -1, false},
		{100, -1, false},
		{int64(n), 1, true},
		{-1, 1, true},
		{0, int64(n) + 1, true},
		{0, -2, true},
		{int64(n) + 1, -1, true},
	}
	for _, tt := range tests {
		got, _, err := d.Get(context.Background(), id, tt.off, tt.length)
		if (err != nil) != tt.wantErr {
			t.Fatalf("Get(%d, %d) error = %v, wantErr %v", tt.off, tt.length, err, tt.wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Get(%d, %d) error %v is not ErrInvalid", tt.off, tt.length, err)
			}
			continue
		}
		end := tt.off + tt.length
		if tt.length == -1 {
			end = int64(n)
		}
		if !bytes.Equal(got, data[tt.off:end]) {
			t.Fatalf("Get(%d, %d): wrong data (%d bytes)", tt.off, tt.length, len(got))
		}
	}
}

func TestPutExisting(t *testing.T) {
	d := openTest(t)
	data := payload(SegmentSize*2+3, 1)
	h := BlockHeader{ID: NewBlockID(), Owner: 1}
	ctx := context.Background()
	if err := d.Put(ctx, h, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	// Retried put of the same content: success, no double count.
	if err := d.Put(ctx, h, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("idempotent Put: %v", err)
	}
	if u, _ := d.Usage(); u.Blocks != 1 {
		t.Fatalf("blocks = %d after a retried put", u.Blocks)
	}
	other := bytes.Clone(data)
	other[SegmentSize+5] ^= 1
	if err := d.Put(ctx, h, bytes.NewReader(other), int64(len(other))); !errors.Is(err, ErrExists) {
		t.Fatalf("Put other content = %v, want ErrExists", err)
	}
	if err := d.Put(ctx, h, bytes.NewReader(data[:10]), 10); !errors.Is(err, ErrExists) {
		t.Fatalf("Put other length = %v, want ErrExists", err)
	}
	got, _, err := d.Get(ctx, h.ID, 0, -1)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("stored block changed: %v", err)
	}
}

// TestPutCarriedCRCs: segment CRCs carried in the header are stored as
// given (not computed again); carried CRCs that do not match the data make
// a block that reads as corrupt, and CRCs that do not fit the length or
// segment size are ignored.
func TestPutCarriedCRCs(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	data := payload(3*SegmentSize+100, 4)
	segs, _ := AppendSegmentCRCs(nil, data)
	put := func(h BlockHeader) BlockHeader {
		t.Helper()
		h.ID = NewBlockID()
		if err := d.Put(ctx, h, bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		return h
	}

	h := put(BlockHeader{SegmentSize: SegmentSize, SegmentCRCs: segs})
	got, hdr, err := d.Get(ctx, h.ID, 0, -1)
	if err != nil || !bytes.Equal(got, data) || !slices.Equal(hdr.SegmentCRCs, segs) {
		t.Fatalf("carried CRCs: Get = %v, CRCs %x, want %x", err, hdr.SegmentCRCs, segs)
	}
	if err := d.Verify(ctx, h.ID); err != nil {
		t.Fatal(err)
	}

	wrong := slices.Clone(segs)
	wrong[2] ^= 1
	h = put(BlockHeader{SegmentSize: SegmentSize, SegmentCRCs: wrong})
	var ce *CorruptError
	if _, _, err := d.Get(ctx, h.ID, 0, -1); !errors.As(err, &ce) || ce.Segment != 2 {
		t.Fatalf("Get of a block put with a wrong carried CRC = %v, want corrupt segment 2", err)
	}
	if err := d.Verify(ctx, h.ID); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify = %v, want ErrCorrupt", err)
	}

	for _, h := range []BlockHeader{
		{SegmentSize: SegmentSize, SegmentCRCs: wrong[:3]}, // too few
		{SegmentSize: 2 * SegmentSize, SegmentCRCs: wrong}, // another segment size
		{SegmentCRCs: wrong}, // no segment size
	} {
		h = put(h)
		if _, hdr, err := d.Get(ctx, h.ID, 0, -1); err != nil || !slices.Equal(hdr.SegmentCRCs, segs) {
			t.Fatalf("ignored CRCs: Get = %v, CRCs %x, want %x", err, hdr.SegmentCRCs, segs)
		}
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestPutBadInput(t *testing.T) {
	d := openTest(t)
	ctx := context.Background()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	boom := errors.New("boom")
	tests := []struct {
		name   string
		ctx    context.Context
		hdr    BlockHeader
		data   io.Reader
		length int64
		want   error
	}{
		{"zero id", ctx, BlockHeader{}, strings.NewReader("x"), 1, ErrInvalid},
		{"negative length", ctx, BlockHeader{ID: NewBlockID()}, strings.NewReader(""), -1, ErrInvalid},
		{"too long", ctx, BlockHeader{ID: NewBlockID()}, strings.NewReader(""), MaxBlockLength + 1, ErrInvalid},
		{"short data", ctx, BlockHeader{ID: NewBlockID()}, strings.NewReader("abc"), 4, ErrInvalid},
		{"long data", ctx, BlockHeader{ID: NewBlockID()}, strings.NewReader("abcde"), 4, ErrInvalid},
		{"reader error", ctx, BlockHeader{ID: NewBlockID()}, errReader{boom}, 4, boom},
		{"canceled", canceled, BlockHeader{ID: NewBlockID()}, strings.NewReader("abcd"), 4, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.Put(tt.ctx, tt.hdr, tt.data, tt.length)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Put = %v, want %v", err, tt.want)
			}
			if !tt.hdr.ID.IsZero() {
				if _, _, err := d.Get(ctx, tt.hdr.ID, 0, -1); !errors.Is(err, ErrNotFound) {
					t.Fatalf("failed Put left a block: Get = %v", err)
				}
			}
		})
	}
	assertNoTemps(t, d)
}

// cancelReader cancels its context after the first read, mid-stream.
type cancelReader struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.cancel()
	return n, err
}

func TestPutCancelMidStream(t *testing.T) {
	d := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	data := payload(3<<20, 4)
	h := BlockHeader{ID: NewBlockID()}
	err := d.Put(ctx, h, &cancelReader{bytes.NewReader(data), cancel}, int64(len(data)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put = %v, want context.Canceled", err)
	}
	if _, _, err := d.Get(context.Background(), h.ID, 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after canceled Put = %v", err)
	}
	assertNoTemps(t, d)
}

func assertNoTemps(t *testing.T, d *Drive) {
	t.Helper()
	subs, _ := os.ReadDir(d.Path() + "/" + blocksDir)
	for _, s := range subs {
		ents, _ := os.ReadDir(d.Path() + "/" + blocksDir + "/" + s.Name())
		for _, e := range ents {
			if isTemp(e.Name()) {
				t.Fatalf("temp file %s/%s left behind", s.Name(), e.Name())
			}
		}
	}
}

func TestDelete(t *testing.T) {
	d := openTest(t)
	id := putTest(t, d, payload(5000, 1))
	if err := d.Delete(id); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Get(context.Background(), id, 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete = %v", err)
	}
	if err := d.Delete(id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete = %v, want ErrNotFound", err)
	}
	if _, _, _, err := d.Stat(id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat after Delete = %v", err)
	}
	if err := d.Verify(context.Background(), id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Verify after Delete = %v", err)
	}
	if u, _ := d.Usage(); u.Blocks != 0 || u.UsedBytes != 0 {
		t.Fatalf("usage after delete: %+v", u)
	}
}

func TestList(t *testing.T) {
	d := openTest(t)
	want := map[BlockID]bool{}
	for i := 0; i < 57; i++ {
		want[putTest(t, d, payload(i, uint64(i)))] = true
	}
	for _, limit := range []int{1, 10, 57, 58, 0} {
		var got []BlockInfo
		cursor := ""
		for pages := 0; ; pages++ {
			page, next, err := d.List(cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			if limit > 0 && len(page) > limit {
				t.Fatalf("page of %d > limit %d", len(page), limit)
			}
			got = append(got, page...)
			if next == "" {
				break
			}
			cursor = next
			if pages > 100 {
				t.Fatal("List does not end")
			}
		}
		if len(got) != len(want) {
			t.Fatalf("limit %d: listed %d blocks, want %d", limit, len(got), len(want))
		}
		for i, b := range got {
			if !want[b.ID] || b.Size < HeaderAlign || b.ModTime.IsZero() {
				t.Fatalf("limit %d: bad entry %+v", limit, b)
			}
			if i > 0 && got[i-1].ID.String() >= b.ID.String() {
				t.Fatalf("limit %d: not ordered at %d", limit, i)
			}
		}
	}
	if _, _, err := d.List("../../etc", 10); !errors.Is(err, ErrInvalid) {
		t.Fatalf("List with bad cursor = %v", err)
	}
	page, next, err := d.List(strings.Repeat("f", 32), 10)
	if err != nil || len(page) != 0 || next != "" {
		t.Fatalf("List after the last id = %v, %q, %v", page, next, err)
	}
}
