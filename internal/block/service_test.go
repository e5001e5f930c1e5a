package block

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/rpc/pb"
)

func TestRoundTrip(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncAlways)
	ctx := context.Background()
	for i, size := range []int{0, 1, 1 << 20, 5 << 20} {
		for _, d := range n.drives {
			data := payload(size, uint64(i))
			hdr := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 9, Stripe: 1, Unit: 2, Generation: 3}
			var err error
			if i%2 == 0 {
				err = n.client.Put(ctx, d.ID(), hdr, data)
			} else {
				err = n.client.PutStream(ctx, d.ID(), hdr, bytes.NewReader(data), int64(size))
			}
			if err != nil {
				t.Fatalf("Put %d bytes on %v: %v", size, d.ID(), err)
			}
			got, h, err := n.client.Get(ctx, d.ID(), hdr.ID, 0, -1)
			if err != nil {
				t.Fatalf("Get %d bytes from %v: %v", size, d.ID(), err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("Get %d bytes from %v: data differs", size, d.ID())
			}
			if h.ID != hdr.ID || h.Owner != 9 || h.Stripe != 1 || h.Unit != 2 || h.Generation != 3 ||
				h.Length != int64(size) || h.Version != drive.BlockFormatVersion || h.Created.IsZero() {
				t.Fatalf("header %+v", h)
			}
			// Stored where asked, readable locally.
			if _, _, err := d.Get(ctx, hdr.ID, 0, -1); err != nil {
				t.Fatalf("local Get on %v: %v", d.ID(), err)
			}
			sh, fsize, mtime, err := n.client.Stat(ctx, d.ID(), hdr.ID)
			if err != nil || sh.Length != int64(size) || fsize != int64(sh.HeaderLength()+size) || mtime.IsZero() {
				t.Fatalf("Stat = %+v %d %v %v", sh, fsize, mtime, err)
			}
			if err := n.client.Verify(ctx, d.ID(), hdr.ID); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			// Retried put: idempotent.
			if err := n.client.Put(ctx, d.ID(), hdr, data); err != nil {
				t.Fatalf("retried Put: %v", err)
			}
		}
	}
}

func TestRangeGet(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	ctx := context.Background()
	data := payload(3<<20+5, 1)
	hdr := drive.BlockHeader{ID: drive.NewBlockID()}
	if err := n.client.Put(ctx, 2, hdr, data); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 0}, {0, 10}, {65530, 20}, {1<<20 - 1, 2<<20 + 2}, {3 << 20, 5}, {100, -1}} {
		got, _, err := n.client.Get(ctx, 2, hdr.ID, r[0], r[1])
		end := r[0] + r[1]
		if r[1] < 0 {
			end = int64(len(data))
		}
		if err != nil || !bytes.Equal(got, data[r[0]:end]) {
			t.Fatalf("Get(%d, %d) = %d bytes, %v", r[0], r[1], len(got), err)
		}
	}
	if _, _, err := n.client.Get(ctx, 2, hdr.ID, int64(len(data)), 1); !errors.Is(err, drive.ErrInvalid) {
		t.Fatalf("out-of-range Get = %v, want ErrInvalid", err)
	}
}

func TestCorruptOverTheWire(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	ctx := context.Background()
	d := n.drives[0]
	data := payload(4*drive.SegmentSize, 2)
	hdr := drive.BlockHeader{ID: drive.NewBlockID()}
	if err := n.client.Put(ctx, d.ID(), hdr, data); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.Path(), "blocks", hdr.ID.String()[:2], hdr.ID.String())
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff, 0xfe}, drive.HeaderAlign+3*drive.SegmentSize+17)
	f.Close()

	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, drive.ErrCorrupt) {
			t.Fatalf("%s = %v, want ErrCorrupt", what, err)
		}
		var ce *drive.CorruptError
		if !errors.As(err, &ce) || ce.Drive != d.ID() || ce.Block != hdr.ID || ce.Segment != 3 {
			t.Fatalf("%s: CorruptError = %+v", what, ce)
		}
		for _, s := range []string{hdr.ID.String(), d.ID().String(), "segment 3"} {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("%s: error %q does not name %q", what, err, s)
			}
		}
	}
	_, _, err = n.client.Get(ctx, d.ID(), hdr.ID, 0, -1)
	check("Get", err)
	check("Verify", n.client.Verify(ctx, d.ID(), hdr.ID))
	if got, _, err := n.client.Get(ctx, d.ID(), hdr.ID, 0, 3*drive.SegmentSize); err != nil || !bytes.Equal(got, data[:3*drive.SegmentSize]) {
		t.Fatalf("Get of the intact segments: %v", err)
	}
}

func TestErrorsOverTheWire(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	ctx := context.Background()
	missing := drive.NewBlockID()

	_, _, err := n.client.Get(ctx, 99, missing, 0, -1)
	if !errors.Is(err, ErrUnknownDrive) || status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "d99") {
		t.Fatalf("Get on unknown drive = %v (code %v)", err, status.Code(err))
	}
	if errors.Is(err, drive.ErrNotFound) {
		t.Fatalf("unknown drive must not look like a missing block: %v", err)
	}
	if err := n.client.Put(ctx, 99, drive.BlockHeader{ID: missing}, []byte("x")); !errors.Is(err, ErrUnknownDrive) {
		t.Fatalf("Put on unknown drive = %v", err)
	}
	if _, _, err := n.client.List(ctx, 99, "", 10); !errors.Is(err, ErrUnknownDrive) {
		t.Fatalf("List on unknown drive = %v", err)
	}
	if _, _, err := n.client.Get(ctx, 1, missing, 0, -1); !errors.Is(err, drive.ErrNotFound) || status.Code(err) != codes.NotFound {
		t.Fatalf("Get missing = %v", err)
	}
	if err := n.client.Delete(ctx, 1, missing); !errors.Is(err, drive.ErrNotFound) {
		t.Fatalf("Delete missing = %v", err)
	}
	if _, _, _, err := n.client.Stat(ctx, 1, missing); !errors.Is(err, drive.ErrNotFound) {
		t.Fatalf("Stat missing = %v", err)
	}

	hdr := drive.BlockHeader{ID: drive.NewBlockID()}
	if err := n.client.Put(ctx, 1, hdr, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := n.client.Put(ctx, 1, hdr, []byte("world")); !errors.Is(err, drive.ErrExists) || status.Code(err) != codes.AlreadyExists {
		t.Fatalf("Put other content = %v", err)
	}
	if err := n.client.PutStream(ctx, 1, drive.BlockHeader{ID: drive.NewBlockID()}, strings.NewReader("abc"), 4); !errors.Is(err, drive.ErrInvalid) {
		t.Fatalf("PutStream short = %v", err)
	}
	if err := n.client.Put(ctx, 1, drive.BlockHeader{}, []byte("x")); !errors.Is(err, drive.ErrInvalid) {
		t.Fatalf("Put zero id = %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := n.client.Put(canceled, 1, drive.BlockHeader{ID: drive.NewBlockID()}, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with canceled ctx = %v", err)
	}
	if err := n.client.Delete(ctx, 1, hdr.ID); err != nil {
		t.Fatalf("Delete = %v", err)
	}

	// Raw requests a typed client cannot make.
	raw := pb.NewBlockServiceClient(n.client.conn)
	for _, bad := range []string{"../../etc/passwd", strings.Repeat("A", 32), ""} {
		_, err := raw.Stat(ctx, &pb.StatRequest{DriveId: 1, BlockId: bad})
		if status.Code(err) != codes.InvalidArgument || !errors.Is(fromStatus(err), drive.ErrInvalid) {
			t.Fatalf("Stat(%q) = %v", bad, err)
		}
	}
	stream, err := raw.Put(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&pb.PutRequest{Msg: &pb.PutRequest_Data{Data: []byte("no start")}})
	if _, err := stream.CloseAndRecv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Put without start = %v", err)
	}
}

func TestListPaging(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	ctx := context.Background()
	want := map[drive.BlockID]bool{}
	for i := 0; i < 25; i++ {
		hdr := drive.BlockHeader{ID: drive.NewBlockID()}
		if err := n.client.Put(ctx, 2, hdr, payload(i, uint64(i))); err != nil {
			t.Fatal(err)
		}
		want[hdr.ID] = true
	}
	var all []drive.BlockInfo
	cursor, pages := "", 0
	for {
		page, next, err := n.client.List(ctx, 2, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if pages != 4 || len(all) != 25 {
		t.Fatalf("%d pages, %d blocks", pages, len(all))
	}
	for i, b := range all {
		if !want[b.ID] || (i > 0 && all[i-1].ID.String() >= b.ID.String()) {
			t.Fatalf("entry %d: %+v", i, b)
		}
	}
	if page, _, err := n.client.List(ctx, 1, "", 0); err != nil || len(page) != 0 {
		t.Fatalf("List of the empty drive = %v, %v", page, err)
	}
	if _, _, err := n.client.List(ctx, 2, "zz", 1); !errors.Is(err, drive.ErrInvalid) {
		t.Fatalf("List with a bad cursor = %v", err)
	}
}

func TestUsageAndCounters(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	ctx := context.Background()
	before, err := n.client.Counters(ctx)
	if err != nil || len(before) != 2 || before[0].Drive != 1 || before[1].Drive != 2 {
		t.Fatalf("Counters = %+v, %v", before, err)
	}
	hdr := drive.BlockHeader{ID: drive.NewBlockID()}
	if err := n.client.Put(ctx, 2, hdr, payload(1<<20, 1)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, _, err := n.client.Get(ctx, 2, hdr.ID, 0, -1); err != nil {
			t.Fatal(err)
		}
	}
	after, err := n.client.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c0, c1 := before[1], after[1]
	if c1.Write.Ops-c0.Write.Ops != 1 || c1.Read.Ops-c0.Read.Ops != 3 || c1.Read.Bytes-c0.Read.Bytes < 3<<20 ||
		c1.Write.Bytes-c0.Write.Bytes < 1<<20 || !c1.Time.After(c0.Time) {
		t.Fatalf("counters did not move as expected: before %+v after %+v", c0, c1)
	}
	if r := c1.Since(c0); r.Read.IOPS <= 0 || r.Write.BytesPerSec <= 0 {
		t.Fatalf("rates %+v", r)
	}
	if after[0].Read.Ops != before[0].Read.Ops || after[0].Write.Ops != before[0].Write.Ops {
		t.Fatalf("idle drive d1 counters moved: %+v -> %+v", before[0], after[0])
	}
	usage, err := n.client.Usage(ctx)
	if err != nil || len(usage) != 2 {
		t.Fatalf("Usage = %+v, %v", usage, err)
	}
	u := usage[1]
	if u.Drive != 2 || u.Node != "node-1" || u.Class != drive.ClassSSD || u.Blocks != 1 ||
		u.UsedBytes != drive.HeaderAlign+1<<20 || u.TotalBytes <= 0 || u.Path != n.drives[1].Path() || u.Err != "" {
		t.Fatalf("usage of d2 = %+v", u)
	}
}

func TestServiceDrives(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	if err := n.svc.Add(n.drives[0]); !errors.Is(err, ErrDuplicateDrive) {
		t.Fatalf("Add duplicate = %v", err)
	}
	if d := n.svc.Remove(1); d != n.drives[0] {
		t.Fatalf("Remove returned %v", d)
	}
	if _, _, err := n.client.Get(context.Background(), 1, drive.NewBlockID(), 0, -1); !errors.Is(err, ErrUnknownDrive) {
		t.Fatalf("Get on removed drive = %v", err)
	}
	if got := n.svc.Drives(); len(got) != 1 || got[0].ID() != 2 {
		t.Fatalf("Drives = %v", got)
	}
}

// TestPutCarriedCRCsOverTheWire: segment CRCs sent with a put are the
// ones stored.
func TestPutCarriedCRCsOverTheWire(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	ctx := context.Background()
	data := payload(3*drive.SegmentSize+5, 4)
	segs, _ := drive.AppendSegmentCRCs(nil, data)
	segs[1] ^= 1 // so that a computed CRC would differ
	h := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 2, SegmentSize: drive.SegmentSize, SegmentCRCs: segs}
	if err := n.client.Put(ctx, 1, h, data); err != nil {
		t.Fatal(err)
	}
	got, _, _, err := n.drives[0].Stat(h.ID)
	if err != nil || !slices.Equal(got.SegmentCRCs, segs) {
		t.Fatalf("stored CRCs %x (%v), want the carried %x", got.SegmentCRCs, err, segs)
	}
}

func TestAdopt(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncAlways)
	ctx := context.Background()
	d := n.drives[0]
	local, err := drive.OpenReadOnly(d.Path(), "c-test", d.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	data := payload(2<<20, 7)
	hdr := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 9, Stripe: 1, Unit: 2, Generation: 3, SegmentSize: drive.SegmentSize}
	hdr.SegmentCRCs, _ = drive.AppendSegmentCRCs(nil, data)
	name, err := local.Stage(ctx, hdr, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.client.Adopt(ctx, d.ID(), hdr, int64(len(data)), name); err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	got, h, err := n.client.Get(ctx, d.ID(), hdr.ID, 0, -1)
	if err != nil || !bytes.Equal(got, data) || h.Generation != 3 {
		t.Fatalf("Get after Adopt: %v (header %+v)", err, h)
	}
	// Refusals keep their kind across the wire.
	name, err = local.Stage(ctx, drive.BlockHeader{ID: drive.NewBlockID(), Owner: 1}, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.client.Adopt(ctx, d.ID(), drive.BlockHeader{ID: hdr.ID, Owner: 9}, int64(len(data)), name); !errors.Is(err, drive.ErrInvalid) {
		t.Fatalf("Adopt of another block's staged file = %v, want ErrInvalid", err)
	}
	if err := n.client.Adopt(ctx, 99, hdr, int64(len(data)), name); !errors.Is(err, ErrUnknownDrive) {
		t.Fatalf("Adopt on an unknown drive = %v", err)
	}
}
