package drive

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestCapacityUsage(t *testing.T) {
	const capacity = 1 << 20
	d := openTest(t, func(o *Options) { o.Capacity = capacity })
	if d.Capacity() != capacity {
		t.Fatalf("Capacity() = %d", d.Capacity())
	}
	u, err := d.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.TotalBytes != capacity || u.FreeBytes != capacity || u.UsedBytes != 0 {
		t.Fatalf("empty drive with capacity %d: usage %+v", capacity, u)
	}
	putTest(t, d, payload(100_000, 1))
	u, _ = d.Usage()
	if u.UsedBytes <= 100_000 || u.TotalBytes != capacity || u.FreeBytes != capacity-u.UsedBytes || u.Blocks != 1 {
		t.Fatalf("after one block: usage %+v", u)
	}

	// No capacity: the file system's numbers.
	path := d.Path()
	d.Close()
	whole := openAt(t, path)
	uw, _ := whole.Usage()
	if uw.TotalBytes <= capacity || uw.UsedBytes != u.UsedBytes {
		t.Fatalf("without a capacity: usage %+v", uw)
	}
	whole.Close()

	// A capacity above the file system's size is capped by it.
	huge := openAt(t, path, func(o *Options) { o.Capacity = 1 << 62 })
	uh, _ := huge.Usage()
	if uh.TotalBytes != uw.TotalBytes {
		t.Fatalf("capacity above the file system: TotalBytes %d, file system %d", uh.TotalBytes, uw.TotalBytes)
	}
	huge.Close()

	// Capacity is not identity: reopened below what it holds, the drive
	// opens, reports no free space and refuses blocks.
	small := openAt(t, path, func(o *Options) { o.Capacity = 4096 })
	if small.ID() != d.ID() {
		t.Fatalf("reopened drive has id %v, want %v", small.ID(), d.ID())
	}
	us, _ := small.Usage()
	if us.TotalBytes != 4096 || us.FreeBytes != 0 || us.UsedBytes != u.UsedBytes {
		t.Fatalf("capacity below the used bytes: usage %+v", us)
	}
	err = small.Put(context.Background(), BlockHeader{ID: NewBlockID()}, bytes.NewReader(nil), 0)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put on an over-full drive = %v, want ErrNoSpace", err)
	}
}

func TestCapacityPutRefused(t *testing.T) {
	const capacity = 300_000
	d := openTest(t, func(o *Options) { o.Capacity = capacity })
	ctx := context.Background()
	putTest(t, d, payload(200_000, 1))
	before, _ := d.Usage()

	h := BlockHeader{ID: NewBlockID()}
	err := d.Put(ctx, h, bytes.NewReader(payload(200_000, 2)), 200_000)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put past the capacity = %v, want ErrNoSpace", err)
	}
	need := int64(headerLength(segmentCount(200_000, SegmentSize))) + 200_000
	for _, s := range []string{d.ID().String(), d.Path(), "capacity of 300000", "block of " + strconv.FormatInt(need, 10) + " bytes"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if _, _, err := d.Get(ctx, h.ID, 0, -1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of the refused block = %v, want ErrNotFound", err)
	}
	assertNoTemps(t, d)
	after, _ := d.Usage()
	if after != before {
		t.Fatalf("a refused Put changed the usage: %+v -> %+v", before, after)
	}
	// What fits still goes in, exactly up to the capacity.
	rest := capacity - after.UsedBytes - int64(headerLength(segmentCount(50_000, SegmentSize)))
	putTest(t, d, payload(int(rest), 3))
	if u, _ := d.Usage(); u.UsedBytes != capacity || u.FreeBytes != 0 {
		t.Fatalf("filled to the capacity: usage %+v", u)
	}
	if err := d.Put(ctx, BlockHeader{ID: NewBlockID()}, bytes.NewReader([]byte{1}), 1); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put on a full drive = %v, want ErrNoSpace", err)
	}
	// Deleting frees capacity.
	infos, _, err := d.List("", 1)
	if err != nil || len(infos) == 0 {
		t.Fatalf("List = %v, %v", infos, err)
	}
	if err := d.Delete(infos[0].ID); err != nil {
		t.Fatal(err)
	}
	putTest(t, d, payload(1000, 4))
}

// TestCapacityConcurrentPuts checks that Puts racing for the last space
// never take the drive past its capacity together.
func TestCapacityConcurrentPuts(t *testing.T) {
	const size = 100_000
	unit := int64(headerLength(segmentCount(size, SegmentSize))) + size
	d := openTest(t, func(o *Options) { o.Capacity = 5*unit + unit/2 })
	data := payload(size, 9)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, full := 0, 0
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.Put(context.Background(), BlockHeader{ID: NewBlockID()}, bytes.NewReader(data), size)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrNoSpace):
				full++
			default:
				t.Errorf("Put: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok != 5 || full != 11 {
		t.Fatalf("16 concurrent Puts into room for 5: %d stored, %d refused", ok, full)
	}
	if u, _ := d.Usage(); u.UsedBytes != 5*unit || u.Blocks != 5 {
		t.Fatalf("usage %+v, want %d bytes in 5 blocks", u, 5*unit)
	}
}

func TestCapacityNegative(t *testing.T) {
	opts := testOptions(7)
	opts.Capacity = -1
	if _, err := Open(t.TempDir(), opts); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Open with a negative capacity = %v, want ErrInvalid", err)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "4096", want: 4096},
		{in: "64MiB", want: 64 << 20},
		{in: "64mib", want: 64 << 20},
		{in: "10G", want: 10 << 30},
		{in: "10g", want: 10 << 30},
		{in: "10GB", want: 10_000_000_000},
		{in: "1.5TiB", want: 3 << 39},
		{in: "512 KiB", want: 512 << 10},
		{in: "100B", want: 100},
		{in: "0", want: 0},
		{in: "", bad: true},
		{in: "MiB", bad: true},
		{in: "-5M", bad: true},
		{in: "10X", bad: true},
		{in: "1.2.3G", bad: true},
		{in: "1e3", bad: true},
		{in: "9EiB", bad: true},
		{in: "9000PiB", bad: true},
	} {
		got, err := ParseSize(tc.in)
		if tc.bad {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.in) {
				t.Errorf("ParseSize(%q) = %d, %v; want ErrInvalid naming the input", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, n := range []int64{1, 1000, 1024, 1536, 64 << 20, 3 << 39, 1<<40 + 1} {
		if got, err := ParseSize(FormatSize(n)); err != nil || got != n {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, FormatSize(n), got, err)
		}
	}
}
