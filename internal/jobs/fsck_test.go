package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/bench"
	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// fsckEnv is an FsckEnv over a namespace and job data in memory.
type fsckTestEnv struct {
	metaEnv
	data *memData
}

var _ FsckEnv = fsckTestEnv{}

func (e fsckTestEnv) JobData() TierData { return e.data }

// runFsck runs the fsck job's phases in order, as the engine would, and
// returns the sum of the counters and the report's summary.
func runFsck(t *testing.T, e fsckTestEnv, id job.JobID, params map[string]string) (map[string]int64, string) {
	t.Helper()
	return runFsckType(t, e, newFsck(), id, params)
}

// For each injected kind: a dry run reports exactly the number injected
// and changes nothing, a repair fixes them all, a second run finds none;
// the report names the kind and the paths.
func TestFsckJob(t *testing.T) {
	const n = 4
	for _, tc := range []struct {
		point string
		kind  meta.FsckKind
	}{
		{"meta/create-no-backpointer", meta.FsckMissingBackpointer},
		{"meta/entry-wrong-lin", meta.FsckWrongEntry},
		{"meta/wrong-nlink", meta.FsckLinkCount},
		{"meta/orphan-inode", meta.FsckUnreachable},
		{"meta/dangling-entry", meta.FsckDanglingEntry},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			m := newMeta(t)
			e := fsckTestEnv{metaEnv{m}, &memData{m: map[string][]byte{}}}
			d := mustDir(t, m, meta.RootLIN, "d")
			for i := range 40 {
				mustFile(t, m, d, fmt.Sprintf("ok%02d", i))
			}
			if err := failpoint.Enable(tc.point, fmt.Sprintf("%d*error", n)); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				mustFile(t, m, d, fmt.Sprintf("bad%d", i))
			}
			failpoint.Disable(tc.point)
			found := func(c map[string]int64) int64 {
				var s int64
				for _, k := range meta.FsckKinds() {
					s += c[string(k)+".found"]
				}
				return s
			}
			c, sum := runFsck(t, e, 1, map[string]string{"dry-run": "true"})
			if c[string(tc.kind)+".found"] != n || found(c) != n || c[string(tc.kind)+".repaired"] != 0 {
				t.Fatalf("dry run counts %v, want %d %s found, nothing else\n%s", c, n, tc.kind, sum)
			}
			if !strings.Contains(sum, "dry run") || !strings.Contains(sum, string(tc.kind)) {
				t.Fatalf("dry run summary:\n%s", sum)
			}
			if tc.kind != meta.FsckUnreachable && !strings.Contains(sum, "/d/bad0") {
				t.Fatalf("summary lacks the first finding's path:\n%s", sum)
			}
			c, sum = runFsck(t, e, 2, map[string]string{})
			t.Logf("repair run's report:\n%s", sum)
			if c[string(tc.kind)+".found"] != n || c[string(tc.kind)+".repaired"] != n || found(c) != n {
				t.Fatalf("repair counts %v\n%s", c, sum)
			}
			c, sum = runFsck(t, e, 3, map[string]string{"dry-run": "true"})
			if found(c) != 0 || !strings.Contains(sum, "no findings") {
				t.Fatalf("after the repair: %v\n%s", c, sum)
			}
			if c["checked"] == 0 {
				t.Fatalf("nothing checked: %v", c)
			}
		})
	}
}

// The speed parameter paces checks per job: n checks at speed s take
// about n/s seconds; without it nothing waits.
func TestFsckPace(t *testing.T) {
	ty := newFsck()
	j := &job.Job{ID: 9, Params: map[string]string{"speed": "1000"}}
	ctx, cancel := context.WithCancel(bg)
	if err := ty.pace(ctx, j, 1000); err != nil { // the first batch starts at once
		t.Fatal(err)
	}
	cancel()
	if err := ty.pace(ctx, j, 1); err == nil { // the next waits: cancelled
		t.Fatal("a paced check did not wait")
	}
	if err := ty.pace(ctx, &job.Job{ID: 10, Params: map[string]string{}}, 1e6); err != nil {
		t.Fatalf("no speed limit: %v", err)
	}
	if got := slices.Sorted(func(yield func(job.JobID) bool) {
		for id := range ty.buckets {
			if !yield(id) {
				return
			}
		}
	}); !slices.Equal(got, []job.JobID{9}) {
		t.Fatalf("buckets %v", got)
	}
}

// nsDump renders the namespace, one line per path with the inode's type,
// LIN, link count and back-pointers ("missing" for an entry naming no
// inode), for before-and-after comparisons.
func nsDump(t *testing.T, m *meta.Meta) []string {
	t.Helper()
	var out []string
	var walk func(dir meta.LIN, path string)
	walk = func(dir meta.LIN, path string) {
		for after := ""; ; {
			ents, next, err := m.ReadDir(bg, dir, after, 500)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				in, err := m.GetInode(bg, e.LIN)
				if err != nil {
					out = append(out, fmt.Sprintf("%s/%s %s lin=%d missing", path, e.Name, e.Type, e.LIN))
					continue
				}
				out = append(out, fmt.Sprintf("%s/%s %s lin=%d nlink=%d links=%v", path, e.Name, in.Type, in.LIN, in.Nlink, in.Links))
				if e.Type == meta.TypeDir && in.Type == meta.TypeDir {
					walk(e.LIN, path+"/"+e.Name)
				}
			}
			if next == "" {
				return
			}
			after = next
		}
	}
	walk(meta.RootLIN, "")
	return out
}

// On a populated namespace with faults of one kind made by weft bench
// populate --inject: the dry run reports exactly those, a repair fixes
// them all, a second run finds none, and every path but the injected
// ones (and /lost+found) is as it was before the repair.
func TestFsckJobPopulated(t *testing.T) {
	const faults = 7
	for _, kind := range []meta.FsckKind{meta.FsckMissingBackpointer, meta.FsckWrongEntry, meta.FsckLinkCount,
		meta.FsckUnreachable, meta.FsckDanglingEntry} {
		t.Run(string(kind), func(t *testing.T) {
			m := newMeta(t)
			e := fsckTestEnv{metaEnv{m}, &memData{m: map[string][]byte{}}}
			r, err := bench.Populate(bg, m, bench.PopulateOptions{Tops: 2, Dirs: 3, Objects: 300, Under: "/p", Inject: kind, Faults: faults})
			if err != nil || r.Injected != faults {
				t.Fatalf("populate: %+v, %v", r, err)
			}
			before := nsDump(t, m)
			c, sum := runFsck(t, e, 1, map[string]string{"dry-run": "true"})
			if c[string(kind)+".found"] != faults || c["checked"] < r.Inodes {
				t.Fatalf("dry run: %v\n%s", c, sum)
			}
			for _, k := range meta.FsckKinds() {
				if k != kind && c[string(k)+".found"] != 0 {
					t.Fatalf("dry run found %s too: %v\n%s", k, c, sum)
				}
			}
			if d := nsDump(t, m); !slices.Equal(d, before) {
				t.Fatal("the dry run changed the namespace")
			}
			c, sum = runFsck(t, e, 2, map[string]string{"speed": "1000000"})
			if c[string(kind)+".repaired"] != faults {
				t.Fatalf("repair run: %v\n%s", c, sum)
			}
			c, sum = runFsck(t, e, 3, map[string]string{"dry-run": "true"})
			for _, k := range meta.FsckKinds() {
				if c[string(k)+".found"] != 0 {
					t.Fatalf("after the repair: %v\n%s", c, sum)
				}
			}
			after := nsDump(t, m)
			keep := func(lines []string) []string {
				return slices.DeleteFunc(slices.Clone(lines), func(l string) bool {
					return strings.Contains(l, "/fsck-") || strings.HasPrefix(l, "/"+meta.LostFoundName)
				})
			}
			if !slices.Equal(keep(before), keep(after)) {
				t.Fatalf("the repair changed paths it had no finding for")
			}
			if len(after) <= len(keep(after)) && kind != meta.FsckDanglingEntry {
				t.Fatalf("no repaired path left:\n%s", strings.Join(after, "\n"))
			}
		})
	}
}

// The root's entries are checked too (the root's LIN is below the
// range a LIN scan starts at).
func TestFsckRootEntries(t *testing.T) {
	m := newMeta(t)
	e := fsckTestEnv{metaEnv{m}, &memData{m: map[string][]byte{}}}
	mustFile(t, m, meta.RootLIN, "ok")
	if err := failpoint.Enable("meta/dangling-entry", "1*error"); err != nil {
		t.Fatal(err)
	}
	mustFile(t, m, meta.RootLIN, "dangling")
	c, sum := runFsck(t, e, 1, map[string]string{"dry-run": "true", "only": "namespace"})
	if c["dangling-entry.found"] != 1 || !strings.Contains(sum, "checked 2 directory entries") || !strings.Contains(sum, "/dangling") {
		t.Fatalf("counts %v\n%s", c, sum)
	}
}

// The entries phase counts each entry against the speed, not each
// directory: two directories of 300 entries at speed=1000 take at least
// the 0.3 s the first one's entries cost (a speed in directories would
// let both through at once).
func TestFsckEntriesPaceByEntry(t *testing.T) {
	m := newMeta(t)
	e := fsckTestEnv{metaEnv{m}, &memData{m: map[string][]byte{}}}
	var dirs []meta.LIN
	for d := range 2 {
		dir := mustDir(t, m, meta.RootLIN, fmt.Sprintf("d%d", d))
		for i := range 300 {
			mustFile(t, m, dir, fmt.Sprintf("f%03d", i))
		}
		dirs = append(dirs, dir)
	}
	ty := newFsck()
	j := &job.Job{ID: 5, Type: "fsck", Params: map[string]string{"speed": "1000", "dry-run": "true"}}
	start := time.Now()
	var checked int64
	for _, d := range dirs {
		r, err := (&fsckEntries{ty}).Process(bg, e, j, "", uint64(d))
		if err != nil {
			t.Fatal(err)
		}
		checked += r.Counts["checked"]
	}
	if checked < 600 {
		t.Fatalf("checked %d entries, want 600", checked)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("600 entries at speed 1000 took %v, want at least the first 300's 0.3 s", d)
	}
}
