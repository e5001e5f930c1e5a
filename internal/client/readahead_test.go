package client_test

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/meta"
)

// stridedFile writes tasks×segments records of rec bytes (ec:4+2, 64 KiB
// units: 256 KiB stripes) and returns its LIN and data.
func stridedFile(t *testing.T, f *clienttest.Fixture, rec, tasks, segments int) (meta.LIN, []byte) {
	t.Helper()
	data := clienttest.RandBytes(rec*tasks*segments, 11)
	lin := f.WriteClosed(f.Client(testUnit), "shared", "ec:4+2", data)
	return lin, data
}

// readStrided has each of tasks handles of c read its records — record
// seg·tasks+task for every segment, as N tasks of ior-hard-read do — at
// the same time, checks them, closes the handles, and returns the bytes
// read.
func readStrided(t *testing.T, c *client.Client, lin meta.LIN, data []byte, rec, tasks, segments int) int64 {
	t.Helper()
	var wg sync.WaitGroup
	for task := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fh, err := c.Open(bg, lin, false)
			if err != nil {
				t.Error(err)
				return
			}
			defer fh.Close(bg)
			buf := make([]byte, rec)
			for seg := range segments {
				off := (seg*tasks + task) * rec
				if _, err := fh.ReadAt(bg, buf, int64(off)); err != nil {
					t.Errorf("task %d record %d: %v", task, seg*tasks+task, err)
					return
				}
				if !bytes.Equal(buf, data[off:off+rec]) {
					t.Errorf("task %d record %d differs", task, seg*tasks+task)
					return
				}
			}
		}()
	}
	wg.Wait()
	return int64(rec * tasks * segments)
}

// TestStridedPrefetch: N readers of records interleaved in one shared file
// get their next records prefetched (served from the prefetch, not read
// on demand), the stripes around them are not read ahead, and the bytes
// prefetched in vain stay below a bound.
func TestStridedPrefetch(t *testing.T) {
	const rec, tasks, segments = 47008, 4, 40
	f := clienttest.New(t)
	lin, data := stridedFile(t, f, rec, tasks, segments)
	c := f.Client(testUnit)
	read := readStrided(t, c, lin, data, rec, tasks, segments)
	st := c.Stats()
	t.Logf("read %d bytes: %+v", read, st)
	if st.StridedRecords < int64(tasks*(segments-10)) {
		t.Errorf("%d records prefetched for %d strided reads, want most of them", st.StridedRecords, tasks*segments)
	}
	if st.CacheHits < int64(tasks*(segments-10)) {
		t.Errorf("%d reads served from the prefetch, want most of the %d", st.CacheHits, tasks*segments)
	}
	if st.ReadaheadStripes != 0 {
		t.Errorf("%d whole stripes read ahead for strided readers, want none", st.ReadaheadStripes)
	}
	// Every record is read once: what was read from drives is about
	// what the readers asked for, not 1/N of whole stripes.
	if st.UnitBytesRead > read*11/10 {
		t.Errorf("read %d unit bytes for %d file bytes", st.UnitBytesRead, read)
	}
	if st.PrefetchUnreadBytes > read/20 {
		t.Errorf("%d bytes prefetched and never read (of %d read), want under 5%%", st.PrefetchUnreadBytes, read)
	}
	if c.CachedBytes() != 0 {
		t.Errorf("%d bytes still cached after every handle closed", c.CachedBytes())
	}
}

// TestPrefetchCap: a cap below one record stops strided prefetch, a cap
// below a stripe stops stripe readahead, and a cap of two records keeps
// at most two ahead of each reader.
func TestPrefetchCap(t *testing.T) {
	const rec, tasks, segments = 47008, 2, 30
	f := clienttest.New(t)
	lin, data := stridedFile(t, f, rec, tasks, segments)

	none := f.Client(testUnit, func(cfg *client.Config) { cfg.PrefetchCap = rec / 2 })
	readStrided(t, none, lin, data, rec, tasks, segments)
	got := clienttest.ReadAll(t, mustOpen(t, none, lin), 100*kib)
	clienttest.MustEqual(t, "sequential read under a cap", got, data)
	if st := none.Stats(); st.StridedRecords != 0 || st.ReadaheadStripes != 0 || st.PrefetchBytes != 0 {
		t.Errorf("cap of half a record: prefetched %+v, want nothing", st)
	}

	off := f.Client(testUnit, func(cfg *client.Config) { cfg.PrefetchCap = -1 })
	readStrided(t, off, lin, data, rec, tasks, segments)
	if st := off.Stats(); st.PrefetchBytes != 0 {
		t.Errorf("prefetch off: prefetched %d bytes", st.PrefetchBytes)
	}

	two := f.Client(testUnit, func(cfg *client.Config) { cfg.PrefetchCap = 2 * rec })
	fh := mustOpen(t, two, lin)
	buf := make([]byte, rec)
	for seg := range 5 {
		if _, err := fh.ReadAt(bg, buf, int64(seg*tasks*rec)); err != nil {
			t.Fatal(err)
		}
	}
	// 5 reads: strided from the third on, two records ahead of each.
	if st := two.Stats(); st.PrefetchBytes > 4*rec || st.PrefetchBytes == 0 {
		t.Errorf("cap of two records, 5 strided reads: prefetched %d bytes, want at most %d", st.PrefetchBytes, 4*rec)
	}
	fh.Close(bg)
	if st := two.Stats(); st.PrefetchUnreadBytes != 2*rec {
		t.Errorf("closed two records ahead of the reader: %d bytes counted unread, want %d", st.PrefetchUnreadBytes, 2*rec)
	}
}

// TestSequentialPrefetchUnread: a whole sequential read leaves nothing
// prefetched in vain; stopping half-way leaves at most the readahead
// window, counted.
func TestSequentialPrefetchUnread(t *testing.T) {
	f := clienttest.New(t)
	data := clienttest.RandBytes(64*4*testUnit, 5)
	lin := f.WriteClosed(f.Client(testUnit), "seq", "ec:4+2", data)
	c := f.Client(testUnit)
	clienttest.MustEqual(t, "sequential read", clienttest.ReadAll(t, mustOpen(t, c, lin), 4*testUnit), data)
	st := c.Stats()
	if st.ReadaheadStripes == 0 || st.PrefetchUnreadBytes != 0 {
		t.Errorf("whole sequential read: %+v, want stripes read ahead and none unread", st)
	}
	c2 := f.Client(testUnit)
	fh := mustOpen(t, c2, lin)
	buf := make([]byte, 4*testUnit)
	for off := 0; off < len(data)/2; off += len(buf) {
		if _, err := fh.ReadAt(bg, buf, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	// The readahead runs in the background: let the loads the reads
	// started end before the close drops what they fetched (on a loaded
	// machine they may still run; a load counts only once done).
	for deadline := time.Now().Add(10 * time.Second); c2.PrefetchesInFlight() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	fh.Close(bg)
	st = c2.Stats()
	window := int64(client.DefaultReadahead * 4 * testUnit)
	if st.PrefetchUnreadBytes == 0 || st.PrefetchUnreadBytes > window {
		t.Errorf("half a sequential read: %d bytes unread, want some and at most the window (%d)", st.PrefetchUnreadBytes, window)
	}
}

func mustOpen(t *testing.T, c *client.Client, lin meta.LIN) *client.File {
	t.Helper()
	fh, err := c.Open(bg, lin, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close(bg) })
	return fh
}

// TestSequentialSmallReads: a sequential reader in 128 KiB reads (the
// kernel's FUSE readahead size) gets every stripe read once.
func TestSequentialSmallReads(t *testing.T) {
	f := clienttest.New(t)
	data := clienttest.RandBytes(64*4*testUnit, 5)
	lin := f.WriteClosed(f.Client(testUnit), "seq", "ec:4+2", data)
	c := f.Client(0)
	clienttest.MustEqual(t, "sequential read", clienttest.ReadAll(t, mustOpen(t, c, lin), 32*kib), data)
	st := c.Stats()
	if st.UnitBytesRead > int64(len(data))+32*kib || st.PrefetchUnreadBytes != 0 || st.PrefetchBytes > int64(len(data)) {
		t.Errorf("sequential read of %d bytes in 32 KiB reads: %+v, want every stripe read once", len(data), st)
	}
}

// TestReadAtView: a sequential reader's reads within one cached stripe
// come back as views of the cache, not copies, with the file's bytes; a
// view keeps its bytes after the file is overwritten (cache entries are
// replaced, never changed), and later reads see the new bytes; bytes
// buffered over a cached stripe, and reads across a stripe boundary or
// past the end, are returned in the caller's buffer, right.
func TestReadAtView(t *testing.T) {
	const stripe = 4 * testUnit // ec:4+2
	f := clienttest.New(t)
	c := f.Client(testUnit)
	data := clienttest.RandBytes(6*stripe+1000, 21)
	lin := f.WriteClosed(c, "view", "ec:4+2", data)
	fh, err := c.Open(bg, lin, false)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close(bg)

	buf := make([]byte, testUnit)
	inBuf := func(b []byte) bool { return len(b) > 0 && &b[0] == &buf[0] }
	views := 0
	var kept []byte // a view of stripe 2, kept across the overwrite
	for off := 0; off < 6*stripe; off += testUnit {
		got, err := fh.ReadAtView(bg, buf, int64(off))
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if !bytes.Equal(got, data[off:off+testUnit]) {
			t.Fatalf("read at %d: wrong bytes", off)
		}
		if !inBuf(got) {
			views++
			if off == 2*stripe {
				kept = got
			}
		}
	}
	if views < 16 || kept == nil {
		t.Fatalf("%d of 24 sequential reads returned views of the cache (stripe 2's: %v), want most", views, kept != nil)
	}

	// Across a stripe boundary, and past the end: the caller's buffer.
	two := make([]byte, 2*testUnit)
	got, err := fh.ReadAtView(bg, two, int64(3*stripe-testUnit))
	if err != nil || len(got) != len(two) || &got[0] != &two[0] || !bytes.Equal(got, data[3*stripe-testUnit:3*stripe+testUnit]) {
		t.Fatalf("read across stripes 2 and 3: %d bytes, err %v, in the caller's buffer %v", len(got), err, len(got) > 0 && &got[0] == &two[0])
	}
	got, err = fh.ReadAtView(bg, buf, int64(6*stripe))
	if !errors.Is(err, io.EOF) || !bytes.Equal(got, data[6*stripe:]) {
		t.Fatalf("read of the last 1000 bytes: %d bytes, err %v; want them and io.EOF", len(got), err)
	}
	if got, err := fh.ReadAtView(bg, buf, int64(len(data))); !errors.Is(err, io.EOF) || len(got) != 0 {
		t.Fatalf("read at the end: %d bytes, err %v; want none and io.EOF", len(got), err)
	}

	// Bytes buffered over a cached stripe come with the read.
	w, err := c.Open(bg, lin, true)
	if err != nil {
		t.Fatal(err)
	}
	patch := bytes.Repeat([]byte{0xA5}, 100)
	if _, err := w.WriteAt(bg, patch, int64(2*stripe+10)); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(data[2*stripe : 2*stripe+testUnit])
	copy(want[10:], patch)
	if got, err := fh.ReadAtView(bg, buf, int64(2*stripe)); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read under a buffered write: err %v, bytes right %v", err, bytes.Equal(got, want))
	}
	// Overwritten and committed: the kept view is unchanged, a new read
	// sees the new bytes.
	if err := w.Close(bg); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept, data[2*stripe:2*stripe+testUnit]) {
		t.Fatal("a view of the cache changed when the file was overwritten")
	}
	if got, err := fh.ReadAtView(bg, buf, int64(2*stripe)); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after the overwrite: err %v, new bytes %v", err, bytes.Equal(got, want))
	}
}
