package drive

import (
	"bytes"
	"context"
	"os"
	"syscall"
	"testing"
)

// TestPutDirect: with SyncAlways on a file system that takes O_DIRECT,
// blocks of whole 4 KiB pages are written directly and read back intact,
// others through the page cache; after a direct write fails with EINVAL
// the drive writes everything through the page cache.
func TestPutDirect(t *testing.T) {
	d := openTest(t)
	if !d.direct.Load() {
		t.Skipf("the file system of %s refuses O_DIRECT", d.Path())
	}
	if nd := openTest(t, func(o *Options) { o.Sync = SyncNever }); nd.direct.Load() {
		t.Error("direct writes on a drive with SyncNever")
	}
	check := func(n int, wantDirect bool) {
		t.Helper()
		if got := d.useDirect(int64(n)); got != wantDirect {
			t.Errorf("%d bytes: direct %v, want %v", n, got, wantDirect)
		}
		data := payload(n, uint64(n))
		id := putTest(t, d, data)
		got, _, err := d.Get(context.Background(), id, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: Get = %v, same data %v", n, err, bytes.Equal(got, data))
		}
		if err := d.Verify(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{directAlign, 3 * directAlign, 1 << 20, 5<<20 + directAlign} {
		check(n, true)
	}
	check(directAlign+1, false)
	check(0, true) // nothing to write but the header

	d.directFailed(&os.PathError{Op: "write", Path: "x", Err: syscall.EINVAL})
	if d.direct.Load() {
		t.Fatal("direct writes still on after EINVAL")
	}
	check(1<<20, false)
}
