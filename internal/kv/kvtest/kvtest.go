package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/kv"
)

// Factory returns a new, empty store configured with o (the factory adds its
// backend's limits when o.Limits is zero). The store must be closed by
// tb.Cleanup.
type Factory func(tb testing.TB, o kv.Options) kv.Store

// Run runs the conformance suite against stores from newStore. Every backend
// runs it; a backend passes only if every subtest does.
func Run(t *testing.T, newStore Factory) { RunWith(t, newStore, Options{}) }

// Options select what the suite expects of a store.
type Options struct {
	// ViewsNotSnapshots is for stores whose Views read each key as of its
	// own (recent) revision rather than one snapshot — a cache (package
	// kvcache) documents that. The snapshot test is skipped; everything
	// else, Updates included, is checked as for any store.
	ViewsNotSnapshots bool
}

// RunWith is Run with options.
func RunWith(t *testing.T, newStore Factory, o Options) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore Factory)
	}{
		{"GetPutDelete", testGetPutDelete},
		{"ReadYourWrites", testReadYourWrites},
		{"ViewIsReadOnly", testViewIsReadOnly},
		{"ErrorAborts", testErrorAborts},
		{"ViewSnapshot", testViewSnapshot},
		{"ScanPaging", testScanPaging},
		{"ConflictGetChanged", testConflictGetChanged},
		{"ConflictGetAbsentCreated", testConflictGetAbsentCreated},
		{"ConflictScanInsert", testConflictScanInsert},
		{"ConflictScanDelete", testConflictScanDelete},
		{"NoConflictOutsideScannedPage", testNoConflictOutsideScannedPage},
		{"BlindWriteNoConflict", testBlindWriteNoConflict},
		{"RetryBound", testRetryBound},
		{"ConcurrentIncrements", testConcurrentIncrements},
		{"WriteSkew", testWriteSkew},
		{"Limits", testLimits},
		{"ContextCanceled", testContextCanceled},
	}
	for _, tc := range tests {
		if tc.name == "ViewSnapshot" && o.ViewsNotSnapshots {
			continue
		}
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore) })
	}
}

var ctx = context.Background()

func put(t testing.TB, s kv.Store, kvs ...string) {
	t.Helper()
	if err := s.Update(ctx, func(tx kv.Tx) error {
		for i := 0; i < len(kvs); i += 2 {
			tx.Put([]byte(kvs[i]), []byte(kvs[i+1]))
		}
		return nil
	}); err != nil {
		t.Fatalf("put: %v", err)
	}
}

func get(t testing.TB, s kv.Store, key string) []byte {
	t.Helper()
	var v []byte
	if err := s.View(ctx, func(tx kv.Tx) error {
		var err error
		v, err = tx.Get([]byte(key))
		return err
	}); err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return v
}

func scanAll(t testing.TB, tx kv.Tx, start, end string, limit int) []string {
	t.Helper()
	var out []string
	cur := []byte(start)
	var e []byte
	if end != "" {
		e = []byte(end)
	}
	for pages := 0; cur != nil; pages++ {
		if pages > 1_000_000 {
			t.Fatalf("scan does not end")
		}
		kvs, next, err := tx.Scan(cur, e, limit)
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		if limit > 0 && len(kvs) > limit {
			t.Fatalf("scan returned %d pairs, limit %d", len(kvs), limit)
		}
		for _, p := range kvs {
			out = append(out, string(p.Key)+"="+string(p.Value))
		}
		cur = next
	}
	return out
}

func testGetPutDelete(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	if v := get(t, s, "a"); v != nil {
		t.Fatalf("absent key: got %q, want nil", v)
	}
	put(t, s, "a", "1", "empty", "")
	if v := get(t, s, "a"); string(v) != "1" {
		t.Fatalf("a = %q, want 1", v)
	}
	if v := get(t, s, "empty"); v == nil || len(v) != 0 {
		t.Fatalf("empty value: got %#v, want non-nil empty", v)
	}
	put(t, s, "a", "2")
	if v := get(t, s, "a"); string(v) != "2" {
		t.Fatalf("overwritten a = %q, want 2", v)
	}
	if err := s.Update(ctx, func(tx kv.Tx) error { tx.Delete([]byte("a")); tx.Delete([]byte("never")); return nil }); err != nil {
		t.Fatal(err)
	}
	if v := get(t, s, "a"); v != nil {
		t.Fatalf("deleted key: got %q", v)
	}
	if err := s.View(ctx, func(tx kv.Tx) error {
		vs, err := tx.GetMany([]byte("a"), []byte("empty"), []byte("zz"))
		if err != nil {
			return err
		}
		if vs[0] != nil || vs[1] == nil || vs[2] != nil {
			return fmt.Errorf("GetMany = %#v", vs)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func testReadYourWrites(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	put(t, s, "k1", "a", "k2", "b", "k3", "c", "k5", "e")
	err := s.Update(ctx, func(tx kv.Tx) error {
		tx.Put([]byte("k4"), []byte("d"))
		tx.Delete([]byte("k2"))
		tx.Put([]byte("k3"), []byte("C"))
		v, err := tx.Get([]byte("k4"))
		if err != nil || string(v) != "d" {
			return fmt.Errorf("Get own put = %q, %v", v, err)
		}
		if v, err := tx.Get([]byte("k2")); err != nil || v != nil {
			return fmt.Errorf("Get own delete = %q, %v", v, err)
		}
		vs, err := tx.GetMany([]byte("k1"), []byte("k3"), []byte("k2"))
		if err != nil || string(vs[0]) != "a" || string(vs[1]) != "C" || vs[2] != nil {
			return fmt.Errorf("GetMany = %q, %v", vs, err)
		}
		want := "[k1=a k3=C k4=d k5=e]"
		for _, limit := range []int{0, 1, 2, 3, 10} {
			if got := fmt.Sprint(scanAll(t, tx, "k", "l", limit)); got != want {
				return fmt.Errorf("scan limit %d = %s, want %s", limit, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.View(ctx, func(tx kv.Tx) error {
		if got, want := fmt.Sprint(scanAll(t, tx, "k", "", 2)), "[k1=a k3=C k4=d k5=e]"; got != want {
			return fmt.Errorf("after commit: %s, want %s", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func testViewIsReadOnly(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	err := s.View(ctx, func(tx kv.Tx) error { tx.Put([]byte("x"), []byte("1")); return nil })
	if !errors.Is(err, kv.ErrReadOnly) {
		t.Fatalf("write in View: %v, want ErrReadOnly", err)
	}
	if v := get(t, s, "x"); v != nil {
		t.Fatalf("View wrote %q", v)
	}
}

func testErrorAborts(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx kv.Tx) error { tx.Put([]byte("x"), []byte("1")); return boom })
	if err != boom {
		t.Fatalf("Update = %v, want fn's error as is", err)
	}
	if v := get(t, s, "x"); v != nil {
		t.Fatalf("aborted transaction wrote %q", v)
	}
}

func testViewSnapshot(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	put(t, s, "a", "1", "b", "1")
	err := s.View(ctx, func(tx kv.Tx) error {
		if v, err := tx.Get([]byte("a")); err != nil || string(v) != "1" {
			return fmt.Errorf("a = %q, %v", v, err)
		}
		put(t, s, "a", "2", "b", "2", "c", "2")
		v, err := tx.Get([]byte("b"))
		if err != nil || string(v) != "1" {
			return fmt.Errorf("b after a concurrent update = %q, %v; want the snapshot's 1", v, err)
		}
		if got := fmt.Sprint(scanAll(t, tx, "a", "z", 0)); got != "[a=1 b=1]" {
			return fmt.Errorf("scan = %s, want the snapshot's [a=1 b=1]", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testScanPaging(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	const n = 5000
	batch := 100
	var want []string
	for i := 0; i < n; i += batch {
		if err := s.Update(ctx, func(tx kv.Tx) error {
			for j := i; j < i+batch; j++ {
				tx.Put([]byte(fmt.Sprintf("p/%06d", j)), []byte(fmt.Sprint(j)))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for j := 0; j < n; j++ {
		want = append(want, fmt.Sprintf("p/%06d=%d", j, j))
	}
	put(t, s, "o", "before", "q", "after")
	for _, tc := range []struct {
		limit int
		end   string
		n     int
	}{
		{1, "p/000300", 300}, // one round trip per key: a shorter range
		{7, "p0", n},
		{1000, "p0", n},
		{0, "p0", n},
	} {
		err := s.View(ctx, func(tx kv.Tx) error {
			got := scanAll(t, tx, "p/", tc.end, tc.limit)
			if fmt.Sprint(got) != fmt.Sprint(want[:tc.n]) {
				return fmt.Errorf("limit %d: %d pairs, want %d (first %v)", tc.limit, len(got), tc.n, got[:min(3, len(got))])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Paging where each page is its own transaction, as readdir does.
	var got []string
	cur := []byte("p/")
	for cur != nil {
		if err := s.View(ctx, func(tx kv.Tx) error {
			kvs, next, err := tx.Scan(cur, kv.PrefixEnd([]byte("p/")), 777)
			for _, p := range kvs {
				got = append(got, string(p.Key)+"="+string(p.Value))
			}
			cur = next
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != n {
		t.Fatalf("paged views: %d pairs, want %d", len(got), n)
	}
	// An open end reaches the last key.
	if err := s.View(ctx, func(tx kv.Tx) error {
		all := scanAll(t, tx, "p/004999", "", 2)
		if fmt.Sprint(all) != "[p/004999=4999 q=after]" {
			return fmt.Errorf("open-ended scan = %v", all)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// attempts runs an Update whose first attempt lets interfere change the store
// between fn's reads and its commit, and returns how many attempts ran.
func attempts(t *testing.T, s kv.Store, read func(tx kv.Tx) error, interfere func()) int {
	t.Helper()
	n := 0
	err := s.Update(ctx, func(tx kv.Tx) error {
		n++
		if err := read(tx); err != nil {
			return err
		}
		if n == 1 {
			interfere()
		}
		tx.Put([]byte("result"), []byte(fmt.Sprint(n)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func testConflictGetChanged(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	put(t, s, "k", "1")
	n := attempts(t, s, func(tx kv.Tx) error { _, err := tx.Get([]byte("k")); return err },
		func() { put(t, s, "k", "2") })
	if n != 2 {
		t.Fatalf("attempts = %d, want 2 (a read key changed)", n)
	}
	n = attempts(t, s, func(tx kv.Tx) error { _, err := tx.Get([]byte("k")); return err },
		func() { s.Update(ctx, func(tx kv.Tx) error { tx.Delete([]byte("k")); return nil }) })
	if n != 2 {
		t.Fatalf("attempts = %d, want 2 (a read key was deleted)", n)
	}
}

func testConflictGetAbsentCreated(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	n := attempts(t, s, func(tx kv.Tx) error { _, err := tx.GetMany([]byte("k"), []byte("j")); return err },
		func() { put(t, s, "k", "new") })
	if n != 2 {
		t.Fatalf("attempts = %d, want 2 (a key read as absent was created)", n)
	}
}

func testConflictScanInsert(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	put(t, s, "d/a", "1")
	n := attempts(t, s, func(tx kv.Tx) error { _, _, err := tx.Scan([]byte("d/"), []byte("d0"), 0); return err },
		func() { put(t, s, "d/m", "1") })
	if n != 2 {
		t.Fatalf("attempts = %d, want 2 (a key was inserted in a scanned range)", n)
	}
	// An empty scanned range conflicts on insert too.
	n = attempts(t, s, func(tx kv.Tx) error { _, _, err := tx.Scan([]byte("e/"), []byte("e0"), 10); return err },
		func() { put(t, s, "e/x", "1") })
	if n != 2 {
		t.Fatalf("attempts = %d, want 2 (a key was inserted in an empty scanned range)", n)
	}
}

func testConflictScanDelete(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	put(t, s, "d/a", "1", "d/b", "1", "d/c", "1")
	n := attempts(t, s, func(tx kv.Tx) error { _, _, err := tx.Scan([]byte("d/"), []byte("d0"), 0); return err },
		func() { s.Update(ctx, func(tx kv.Tx) error { tx.Delete([]byte("d/b")); return nil }) })
	if n != 2 {
		t.Fatalf("attempts = %d, want 2 (a scanned key was deleted)", n)
	}
}

func testNoConflictOutsideScannedPage(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	put(t, s, "d/a", "1", "d/b", "1", "d/c", "1")
	// A limited scan reads [d/, d/a]: changes after it are not in the read set.
	n := attempts(t, s, func(tx kv.Tx) error { _, _, err := tx.Scan([]byte("d/"), []byte("d0"), 1); return err },
		func() { put(t, s, "d/z", "1", "d/c", "2") })
	if n != 1 {
		t.Fatalf("attempts = %d, want 1 (changes beyond the page read)", n)
	}
}

func testBlindWriteNoConflict(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	n := 0
	err := s.Update(ctx, func(tx kv.Tx) error {
		n++
		tx.Put([]byte("times"), []byte("mine"))
		if n == 1 {
			put(t, s, "times", "theirs")
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("blind write: attempts %d, err %v; want 1, nil", n, err)
	}
	if v := get(t, s, "times"); string(v) != "mine" {
		t.Fatalf("times = %q, want the later commit's value", v)
	}
}

func testRetryBound(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{MaxRetries: 3, MinBackoff: time.Microsecond, MaxBackoff: time.Millisecond})
	n := 0
	err := s.Update(ctx, func(tx kv.Tx) error {
		n++
		if _, err := tx.Get([]byte("hot")); err != nil {
			return err
		}
		put(t, s, "hot", fmt.Sprint(n))
		tx.Put([]byte("x"), []byte("1"))
		return nil
	})
	if !errors.Is(err, kv.ErrConflict) || !kv.Retryable(err) {
		t.Fatalf("endless conflict: %v, want ErrConflict", err)
	}
	if n != 3 {
		t.Fatalf("attempts = %d, want MaxRetries = 3", n)
	}
	if get(t, s, "x") != nil {
		t.Fatalf("a failed transaction wrote")
	}
}

func testConcurrentIncrements(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{MaxRetries: 10000, MaxBackoff: 5 * time.Millisecond})
	const workers, each = 8, 25
	var wg sync.WaitGroup
	var conflicts atomic.Int64
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				tries := 0
				err := s.Update(ctx, func(tx kv.Tx) error {
					tries++
					v, err := tx.Get([]byte("counter"))
					if err != nil {
						return err
					}
					var n int
					if v != nil {
						fmt.Sscan(string(v), &n)
					}
					tx.Put([]byte("counter"), []byte(fmt.Sprint(n+1)))
					// A per-worker key written in the same transaction.
					tx.Put([]byte(fmt.Sprintf("w/%d/%d", w, i)), []byte("x"))
					return nil
				})
				conflicts.Add(int64(tries - 1))
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if v := get(t, s, "counter"); string(v) != fmt.Sprint(workers*each) {
		t.Fatalf("counter = %s, want %d (lost updates)", v, workers*each)
	}
	if err := s.View(ctx, func(tx kv.Tx) error {
		if got := len(scanAll(t, tx, "w/", "w0", 50)); got != workers*each {
			return fmt.Errorf("%d per-worker keys, want %d", got, workers*each)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d conflicts retried", conflicts.Load())
}

// testWriteSkew: two transactions each read both flags and set their own if
// neither is set. Under serializability at most one flag ends up set.
func testWriteSkew(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{MaxRetries: 100})
	for round := 0; round < 10; round++ {
		x, y := fmt.Sprintf("skew/%d/x", round), fmt.Sprintf("skew/%d/y", round)
		var barrier sync.WaitGroup
		barrier.Add(2)
		var wg sync.WaitGroup
		for _, mine := range []string{x, y} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := true
				err := s.Update(ctx, func(tx kv.Tx) error {
					vs, err := tx.GetMany([]byte(x), []byte(y))
					if err != nil {
						return err
					}
					if first {
						first = false
						barrier.Done()
						barrier.Wait() // both have read before either commits
					}
					if vs[0] == nil && vs[1] == nil {
						tx.Put([]byte(mine), []byte("on"))
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if get(t, s, x) != nil && get(t, s, y) != nil {
			t.Fatalf("round %d: both flags set: write skew", round)
		}
	}
}

func testLimits(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	l := s.Limits()
	if l.MaxOps == 0 || l.MaxBytes == 0 {
		t.Skip("store has no limits")
	}
	// Exactly MaxOps writes fit.
	if err := s.Update(ctx, func(tx kv.Tx) error {
		for i := 0; i < l.MaxOps; i++ {
			tx.Put([]byte(fmt.Sprintf("ok/%05d", i)), []byte("v"))
		}
		return nil
	}); err != nil {
		t.Fatalf("%d writes: %v", l.MaxOps, err)
	}
	cases := []struct {
		name string
		fn   func(tx kv.Tx) error
	}{
		{"too many writes", func(tx kv.Tx) error {
			for i := 0; i <= l.MaxOps; i++ {
				tx.Put([]byte(fmt.Sprintf("big/%05d", i)), []byte("v"))
			}
			return nil
		}},
		{"too many reads", func(tx kv.Tx) error {
			for i := 0; i <= l.MaxOps; i++ {
				if _, err := tx.Get([]byte(fmt.Sprintf("r/%05d", i))); err != nil {
					return err
				}
			}
			tx.Put([]byte("big/x"), []byte("v"))
			return nil
		}},
		{"too many scanned keys", func(tx kv.Tx) error {
			if _, _, err := tx.Scan([]byte("ok/"), []byte("ok0"), 0); err != nil {
				return err
			}
			tx.Put([]byte("big/x"), []byte("v"))
			return nil
		}},
		{"too many bytes", func(tx kv.Tx) error {
			tx.Put([]byte("big/x"), bytes.Repeat([]byte("v"), l.MaxBytes))
			return nil
		}},
	}
	for _, tc := range cases {
		err := s.Update(ctx, tc.fn)
		if !errors.Is(err, kv.ErrTooLarge) {
			t.Fatalf("%s: %v, want ErrTooLarge", tc.name, err)
		}
		t.Logf("%s: %v", tc.name, err)
		if err := s.View(ctx, func(tx kv.Tx) error {
			kvs, _, err := tx.Scan([]byte("big/"), []byte("big0"), 1)
			if len(kvs) > 0 {
				return fmt.Errorf("%s: an oversized transaction wrote %q", tc.name, kvs[0].Key)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A value of two thirds of MaxBytes fits; a View may read any number of keys.
	if err := s.Update(ctx, func(tx kv.Tx) error {
		tx.Put([]byte("large"), bytes.Repeat([]byte("v"), l.MaxBytes*2/3))
		return nil
	}); err != nil {
		t.Fatalf("value of %d bytes: %v", l.MaxBytes*2/3, err)
	}
	if err := s.View(ctx, func(tx kv.Tx) error {
		for i := 0; i <= l.MaxOps; i++ {
			if _, err := tx.Get([]byte(fmt.Sprintf("r/%05d", i))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("many reads in View: %v", err)
	}
}

func testContextCanceled(t *testing.T, newStore Factory) {
	s := newStore(t, kv.Options{})
	c, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Update(c, func(tx kv.Tx) error { tx.Put([]byte("x"), []byte("1")); return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Update = %v, want context.Canceled", err)
	}
}
