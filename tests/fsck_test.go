package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/bench"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/tests/harness"
)

// fsckCounts runs weft fsck start with args, waits for the job and
// returns its counters summed over its phases, and the job.
func fsckCounts(t *testing.T, c *harness.Cluster, args ...string) (map[string]int64, job.JobView) {
	t.Helper()
	out, code := c.Weft(append([]string{"fsck", "start", "--json", "--policy", "high"}, args...)...)
	var r struct{ ID job.JobID }
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("weft fsck start %v: %d %s", args, code, out)
	}
	j := c.WaitJob(r.ID, 5*time.Minute)
	if j.State != job.Succeeded {
		t.Fatalf("fsck job %d: %+v", r.ID, j)
	}
	var took []string
	for _, p := range j.Phases {
		took = append(took, fmt.Sprintf("%s %v", p.Name, p.Duration(time.Now()).Round(time.Millisecond)))
	}
	t.Logf("fsck %v: job %d: %s", args, j.ID, strings.Join(took, ", "))
	counts := map[string]int64{}
	for _, p := range j.Phases {
		for _, s := range p.Scopes {
			for k, n := range s.Counts {
				counts[k] += n
			}
		}
	}
	return counts, j
}

// mountDump lists the tree under dir through the mount: path, type,
// size, link count ("error" for an entry that does not stat).
func mountDump(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel := strings.TrimPrefix(p, dir)
		if err != nil {
			out = append(out, rel+" error")
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			out = append(out, rel+" error")
			return nil
		}
		out = append(out, fmt.Sprintf("%s %s %d %d", rel, fi.Mode().Type(), fi.Size(), nlinkOf(fi)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func nlinkOf(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}

// The checker on a cluster, through the CLI: namespace faults of every
// kind injected into a populated namespace are each found exactly as
// many times by a dry run, which changes nothing; a repair run repairs
// them all; a run after it finds nothing; nothing else in the namespace
// changed. Then the layout (--only layout): block files of files written
// through the mount removed from their drives' directories, and a stale
// usage counter (meta/create-no-usage), are found exactly by a dry run,
// repaired (the files read back whole), and not found again. Last, runs
// beside a create/write/rename/unlink workload from two mounts (of
// the namespace, then of both halves) find nothing and repair nothing.
func TestFsckOnCluster(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.ProcessByDefault, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 1, Mount: true})
		ns := c.Namespace()
		ctx := context.Background()
		const faults = 5
		before := mountDump(t, c.Mount)
		if _, err := bench.Populate(ctx, ns, bench.PopulateOptions{Tops: 2, Dirs: 3, Objects: 200, Under: "/clean"}); err != nil {
			t.Fatal(err)
		}
		for _, k := range []meta.FsckKind{meta.FsckMissingBackpointer, meta.FsckWrongEntry, meta.FsckLinkCount,
			meta.FsckUnreachable, meta.FsckDanglingEntry} {
			r, err := bench.Populate(ctx, ns, bench.PopulateOptions{Tops: 1, Dirs: 2, Objects: 50, Under: "/" + string(k), Inject: k, Faults: faults})
			if err != nil || r.Injected != faults {
				t.Fatalf("populate --inject %s: %+v %v", k, r, err)
			}
		}
		clean := mountDump(t, filepath.Join(c.Mount, "clean"))

		// The layout: a unit of each of three files written through the
		// mount removed from its drive's directory, and a pool's usage
		// counter stale.
		const removed, noUsage = 3, 4
		drives, err := c.Admin.Drives(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dirOf := map[meta.DriveID]string{}
		for _, d := range drives {
			dirOf[meta.DriveID(d.ID)] = d.Path
		}
		layout := filepath.Join(c.Mount, "layout")
		must(t, os.Mkdir(layout, 0o755))
		dirAttr, err := ns.Lookup(ctx, meta.RootLIN, "layout")
		if err != nil {
			t.Fatal(err)
		}
		contents := map[string][]byte{}
		for i := range removed {
			name := fmt.Sprintf("f%d", i)
			data := bytes.Repeat([]byte{byte('a' + i)}, 300<<10+i)
			must(t, os.WriteFile(filepath.Join(layout, name), data, 0o644))
			contents[name] = data
			a, err := ns.Lookup(ctx, dirAttr.LIN, name)
			if err != nil {
				t.Fatal(err)
			}
			ss, err := ns.GetStripes(ctx, a.LIN, 0, 1)
			if err != nil || len(ss) != 1 {
				t.Fatalf("%s: stripes %+v, %v", name, ss, err)
			}
			u := ss[0].Units[i%len(ss[0].Units)]
			id := u.Block.String()
			must(t, os.Remove(filepath.Join(dirOf[u.Drive], "blocks", id[:2], id)))
		}
		if r, err := bench.Populate(ctx, ns, bench.PopulateOptions{Tops: 1, Dirs: 1, Objects: 5, Under: "/usage",
			Inject: meta.FsckUsageCounter, Faults: noUsage}); err != nil || r.Injected != noUsage {
			t.Fatalf("populate --inject usage-counter: %+v %v", r, err)
		}
		wantLayout := map[meta.FsckKind]int64{meta.FsckMissingUnit: removed, meta.FsckUsageCounter: 1}

		dry, _ := fsckCounts(t, c, "--dry-run")
		for _, k := range append(meta.FsckKinds(), meta.FsckLayoutKinds()...) {
			want := int64(faults)
			switch k {
			case meta.FsckEntryType, meta.FsckStaleBackpointer:
				want = 0
			case meta.FsckMissingUnit, meta.FsckBadHeader, meta.FsckUsageCounter:
				want = wantLayout[k]
			}
			if dry[string(k)+".found"] != want || dry[string(k)+".repaired"] != 0 {
				t.Errorf("dry run: %s found %d repaired %d, want %d and 0 (%v)", k, dry[string(k)+".found"], dry[string(k)+".repaired"], want, dry)
			}
		}
		fix, _ := fsckCounts(t, c)
		for _, k := range append(meta.FsckKinds(), meta.FsckLayoutKinds()...) {
			if fix[string(k)+".found"] != fix[string(k)+".repaired"] || fix[string(k)+".failed"] != 0 || fix[string(k)+".changed"] != 0 {
				t.Errorf("repair run: %s: %v", k, fix)
			}
		}
		again, j := fsckCounts(t, c, "--dry-run")
		for _, k := range append(meta.FsckKinds(), meta.FsckLayoutKinds()...) {
			if again[string(k)+".found"] != 0 {
				t.Errorf("after the repair, %s found %d", k, again[string(k)+".found"])
			}
		}
		if out, code := c.Weft("fsck", "status"); code != 0 || !strings.Contains(out, fmt.Sprintf("job       %d (fsck)", j.ID)) ||
			!strings.Contains(out, "no findings") {
			t.Errorf("weft fsck status:\n%s", out)
		}
		for name, data := range contents {
			if got, err := os.ReadFile(filepath.Join(layout, name)); err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s after the repair: %d bytes, %v", name, len(got), err)
			}
		}

		if got := mountDump(t, filepath.Join(c.Mount, "clean")); !slices.Equal(got, clean) {
			t.Errorf("the repair changed /clean")
		}
		lost, err := os.ReadDir(filepath.Join(c.Mount, meta.LostFoundName))
		if err != nil || len(lost) != faults {
			t.Errorf("/lost+found: %d entries, %v; want the %d unreachable files", len(lost), err, faults)
		}
		after := mountDump(t, c.Mount)
		for _, l := range before[1:] { // the root's link count counts the new directories
			if !slices.Contains(after, l) {
				t.Errorf("%q of the namespace before is gone", l)
			}
		}

		// Beside a workload from two mounts, in one directory (each
		// mount's changes recall the other's delegation of it).
		must(t, os.Mkdir(filepath.Join(c.Mount, "work"), 0o755))
		second := filepath.Join(t.TempDir(), "mnt2")
		c.MountAt(second)
		works := []string{filepath.Join(c.Mount, "work"), filepath.Join(second, "work")}
		var stop atomic.Bool
		var ops atomic.Int64
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				work := works[w%2]
				for i := 0; !stop.Load(); i++ {
					a := filepath.Join(work, fmt.Sprintf("w%d-%d", w, i%30))
					b := filepath.Join(work, fmt.Sprintf("w%d-%d.r", w, (i+7)%30))
					switch i % 4 {
					case 0:
						if os.WriteFile(a, bytes.Repeat([]byte("x"), 1+i%5000), 0o644) == nil {
							ops.Add(1)
						}
					case 1:
						if os.Rename(a, b) == nil {
							ops.Add(1)
						}
					case 2:
						if os.Remove(b) == nil {
							ops.Add(1)
						}
					case 3:
						if os.Mkdir(a+".d", 0o755) == nil || os.Remove(a+".d") == nil {
							ops.Add(1)
						}
					}
				}
			}()
		}
		// The namespace twice, the layout once (its stripes pass over
		// the workload's files costs a few seconds a run).
		for _, args := range [][]string{{"--only", "namespace"}, nil} {
			busy, _ := fsckCounts(t, c, args...)
			for _, k := range append(meta.FsckKinds(), meta.FsckLayoutKinds()...) {
				if busy[string(k)+".found"] != 0 {
					t.Errorf("a run beside the workload found %s: %v", k, busy)
				}
			}
		}
		stop.Store(true)
		wg.Wait()
		t.Logf("%d operations beside two runs", ops.Load())
		if ops.Load() == 0 {
			t.Error("the workload did nothing")
		}
	})
}
