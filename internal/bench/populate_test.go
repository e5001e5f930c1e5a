package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
	"github.com/weftfs/weft/internal/meta"
)

func newMeta(t *testing.T) *meta.Meta {
	t.Helper()
	store := memkv.New(kv.Options{Limits: kv.Limits{MaxOps: 128, MaxBytes: 1536 * 1024}})
	if err := meta.Format(context.Background(), store, meta.FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := meta.Open(context.Background(), meta.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKindMix checks that every thousand objects hold the mix exactly.
func TestKindMix(t *testing.T) {
	for _, from := range []int{0, 1000, 7000} {
		n := map[objKind]int{}
		for j := from; j < from+1000; j++ {
			n[kindOf(j)]++
		}
		want := map[objKind]int{kindSubdir: 30, kindLinked: 4, kindCross: 3, kindDat: 780, kindLog: 183}
		if fmt.Sprint(n) != fmt.Sprint(want) {
			t.Errorf("objects %d-%d: kinds %v, want %v", from, from+999, n, want)
		}
	}
}

// TestPopulate makes a small namespace and checks it against
// PopulateExpected, by counting what the namespace holds.
func TestPopulate(t *testing.T) {
	ctx := context.Background()
	m := newMeta(t)
	if _, err := m.Mkdir(ctx, meta.RootLIN, "bench", 0o755); err != nil {
		t.Fatal(err)
	}
	o := PopulateOptions{Tops: 3, Dirs: 2, Objects: 1100, Under: "/bench/ns", Batch: 100}
	progress := 0
	o.Progress = func(PopulateResult) { progress++ }
	got, err := Populate(ctx, m, o)
	if err != nil {
		t.Fatal(err)
	}
	want, err := PopulateExpected(o)
	if err != nil {
		t.Fatal(err)
	}
	want.Inodes++ // Under, made by Populate
	want.Directories++
	if got.Inodes != want.Inodes || got.Files != want.Files || got.Directories != want.Directories || got.HardLinks != want.HardLinks {
		t.Errorf("made %+v, expected %+v", got, want)
	}
	if progress != o.Tops*o.Dirs {
		t.Errorf("%d progress calls, want one per subdirectory (%d)", progress, o.Tops*o.Dirs)
	}
	// Count the namespace.
	var files, dirs, linked int64
	for from := meta.LIN(1); ; {
		page, next, err := m.ScanInodes(ctx, from, 0, 500)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range page {
			if in.Type == meta.TypeDir {
				dirs++
			} else {
				files++
				if in.Nlink == 2 {
					linked++
				}
			}
		}
		if next == 0 {
			break
		}
		from = next
	}
	dirs -= 2 // the root and /bench
	if files != want.Files || dirs != want.Directories || linked != want.HardLinks {
		t.Errorf("namespace holds %d files, %d directories, %d linked files; want %+v", files, dirs, linked, want)
	}
	st, err := m.StatFS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total.Inodes != want.Inodes+2 {
		t.Errorf("StatFS counts %d inodes, want %d", st.Total.Inodes, want.Inodes+2)
	}
	// Object 1 of t0000/d00001 is a .log file (p = 919); the
	// cross-linked directories of top 2 are in top 0.
	path := func(p string) meta.Attr {
		t.Helper()
		lin := meta.RootLIN
		var a meta.Attr
		for _, name := range strings.Split(strings.Trim(p, "/"), "/") {
			if a, err = m.Lookup(ctx, lin, name); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			lin = a.LIN
		}
		return a
	}
	if a := path("/bench/ns/t0000/d00001/f000001.log"); a.Type != meta.TypeFile || a.Mode != 0o644 {
		t.Errorf("f000001.log: %+v", a)
	}
	for j := range o.Objects {
		if kindOf(j) == kindCross {
			if a := path(fmt.Sprintf("/bench/ns/t0000/x0002-00001-%06d", j)); a.Nlink != 2 {
				t.Errorf("cross-linked directory: %+v", a)
			}
			path(fmt.Sprintf("/bench/ns/t0000/x0002-00001-%06d/f3.dat", j))
			break
		}
	}

	// Again on the same directory: refused before anything is written.
	before, _ := m.StatFS(ctx)
	_, err = Populate(ctx, m, o)
	if !errors.Is(err, meta.ErrExists) || !strings.Contains(err.Error(), "--under") {
		t.Fatalf("second populate: %v, want ErrExists saying to pick another --under", err)
	}
	if after, _ := m.StatFS(ctx); after.Total != before.Total {
		t.Errorf("a refused populate wrote: %+v before, %+v after", before.Total, after.Total)
	}
}

// TestPopulateRefuses checks the options and paths Populate refuses.
func TestPopulateRefuses(t *testing.T) {
	ctx := context.Background()
	m := newMeta(t)
	if _, err := m.Create(ctx, meta.RootLIN, "file", meta.NewInode{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		o    PopulateOptions
		want string
	}{
		{PopulateOptions{Tops: 0, Dirs: 1, Objects: 1, Under: "/p"}, "at least 1"},
		{PopulateOptions{Tops: 1, Dirs: 1, Objects: 1, Under: "p"}, "absolute path"},
		{PopulateOptions{Tops: 100000, Dirs: 100000, Objects: 1000, Under: "/p"}, "make fewer"},
		{PopulateOptions{Tops: 1, Dirs: 1, Objects: 1, Under: "/no/p"}, "/no does not exist"},
		{PopulateOptions{Tops: 1, Dirs: 1, Objects: 1, Under: "/file/p"}, "not a directory"},
	} {
		if _, err := Populate(ctx, m, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.o, err, tc.want)
		}
	}
}
