package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/tests/harness"
)

// poll calls ok every 200 ms until it returns true, and fails the test
// with what after timeout.
func poll(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !ok(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, timeout)
		}
	}
}

// status runs `weft status --json`.
func status(t *testing.T, c *harness.Cluster) admin.Status {
	t.Helper()
	out, code := c.Weft("status", "--json")
	var st admin.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Data == nil {
		t.Fatalf("weft status --json: exit %d:\n%s", code, out)
	}
	return st
}

// The case (part 2): a node is killed while 4 writers write
// through the mount, so stripes written meanwhile land on the two other
// nodes, every unit placed but surviving no node loss. They are in the
// protection index (weft status says degraded and counts them; weft file
// list --under-protected lists them). The node comes back: the cluster
// starts a repair by itself (an under-protected event), which spreads
// them over the three nodes; then another node dies and every byte reads
// back.
func TestUnderProtectedStripesAreRepairedWhenTheNodeReturns(t *testing.T) {
	t.Parallel()
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, Mount: true, LeaseTTL: 3 * time.Second})
	ctx := context.Background()
	const size = 40*unit + 1000 // 10 stripes of ec:4+2 and a tail of 3 copies
	files := map[string][]byte{}
	var written atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		p := filepath.Join(c.Mount, fmt.Sprintf("w%d", i))
		files[p] = randBytes(uint64(700+i), size)
		wg.Add(1)
		go func(p string, data []byte) {
			defer wg.Done()
			f, err := os.Create(p)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for off := 0; off < len(data); off += 256 << 10 {
				n, err := f.Write(data[off:min(off+256<<10, len(data))])
				if err != nil {
					errs <- fmt.Errorf("write %s at %d: %w", p, off, err)
					return
				}
				written.Add(int64(n))
			}
			if err := f.Close(); err != nil {
				errs <- fmt.Errorf("close %s: %w", p, err)
			}
		}(p, files[p])
	}
	poll(t, time.Minute, "the writers wrote a quarter", func() bool { return written.Load() >= size })
	must(t, c.Ctl.Kill(ctx, "n3"))
	t.Logf("n3 killed after %d MiB of %d written", written.Load()>>20, 4*size>>20)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.WaitNode(c.NodeAdmin("n1"), "n3", cluster.Down, 30*time.Second)

	st := status(t, c)
	if st.Health != cluster.Degraded || st.Data.UnderFiles == 0 || st.Data.UnderStripes == 0 {
		t.Fatalf("status after writing with n3 down: %+v %+v", st.Status, *st.Data)
	}
	out, code := c.Weft("file", "list", "--under-protected", "--json")
	var under []admin.UnderProtectedFile
	if code != 0 || json.Unmarshal([]byte(out), &under) != nil || len(under) == 0 {
		t.Fatalf("weft file list --under-protected: %s", out)
	}
	for _, f := range under {
		if files[filepath.Join(c.Mount, strings.TrimPrefix(f.Path, "/"))] == nil || f.Target.Nodes < 1 || f.Achieved.Nodes >= f.Target.Nodes && f.Missing == 0 {
			t.Fatalf("listed %+v", f)
		}
	}
	t.Logf("with n3 down: %d files, %d stripes below their protection", st.Data.UnderFiles, st.Data.UnderStripes)
	if out, _ := c.Weft("file", "list", "--under-protected"); !strings.Contains(out, "ACHIEVED") || !strings.Contains(out, "nodes=0") || !strings.Contains(out, "/w3") {
		t.Fatalf("weft file list --under-protected:\n%s", out)
	} else {
		t.Logf("weft file list --under-protected:\n%s", out)
	}
	if out, _ := c.Weft("status"); !strings.Contains(out, "below their pool's protection") {
		t.Fatalf("weft status:\n%s", out)
	} else {
		t.Logf("weft status:\n%s", out)
	}

	// The watcher must have seen n3's drives down (it looks every few
	// seconds) for their return to be an event.
	poll(t, time.Minute, "drive-down events for n3's drives", func() bool {
		evs, err := c.Admin.JobEvents(ctx, 100)
		n := 0
		for _, ev := range evs {
			if ev.Kind == job.EventDriveDown && strings.Contains(ev.Detail, " on n3 ") {
				n++
			}
		}
		return err == nil && n == 4
	})
	before := time.Now()
	must(t, c.Ctl.Start(ctx, "n3"))
	c.WaitNode(c.NodeAdmin("n1"), "n3", cluster.Up, time.Minute)

	// The repair that counts is one that sees n3 back: submitted after its
	// start, or still queued then. (Under load the watcher may start one
	// for the stripes written while n3 was down before it saw n3's drives
	// down; running while they are, it cannot place them any better.)
	var repair job.JobView
	poll(t, time.Minute, "a repair started by the cluster after n3 returned", func() bool {
		jobs, err := c.Admin.Jobs(ctx)
		for _, j := range jobs {
			if err == nil && j.Type == "repair" && strings.Contains(j.Params["reason"], "under-protected") && (j.Created.After(before) || j.State == job.Queued) {
				repair = j
			}
		}
		return repair.ID != 0
	})
	t.Logf("repair job %d started %s after n3 was started: %s", repair.ID, repair.Created.Sub(before).Round(time.Millisecond), repair.Params["reason"])
	repair = c.WaitJob(repair.ID, 5*time.Minute)
	if repair.State != job.Succeeded {
		t.Fatalf("repair: %+v", repair)
	}
	evs, err := c.Admin.JobEvents(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs {
		found = found || ev.Kind == job.EventUnderProtected && ev.Job == repair.ID && strings.HasPrefix(ev.Outcome, "started repair job")
	}
	if !found {
		t.Fatalf("no under-protected event naming repair job %d: %+v", repair.ID, evs)
	}
	out, _ = c.Weft("job", "events", "list")
	t.Logf("weft job events list:\n%s", out)
	st = status(t, c)
	if st.Data.UnderFiles != 0 || st.Data.UnderStripes != 0 {
		t.Fatalf("after the repair: %+v", *st.Data)
	}
	poll(t, 30*time.Second, "weft status healthy", func() bool { return status(t, c).Health == cluster.Healthy })
	if out, _ := c.Weft("file", "list", "--under-protected"); !strings.Contains(out, "every stripe is at its pool's protection") {
		t.Fatalf("weft file list --under-protected after the repair:\n%s", out)
	}
	for p := range files {
		l := layout(t, c, p)
		if l.BelowTarget != 0 || l.Achieved == nil || l.Achieved.Nodes < 1 {
			t.Fatalf("%s after the repair: %d stripes below target, achieves %v", p, l.BelowTarget, l.Achieved)
		}
	}

	must(t, c.Ctl.Kill(ctx, "n2"))
	c.WaitNode(c.NodeAdmin("n1"), "n2", cluster.Down, 30*time.Second)
	for p, want := range files {
		checkFile(t, p, want)
	}
}

// wipeDrive removes every block file of a drive (its identity and
// directories stay), as a disk whose data is gone under a running node
// would look.
func wipeDrive(t *testing.T, path string) int {
	t.Helper()
	blocks, err := filepath.Glob(filepath.Join(path, "blocks", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		must(t, os.Remove(b))
	}
	return len(blocks)
}

// The part 3: one drive of each of the three nodes is wiped. An
// integrityscan goes through every file: what can be rebuilt is, and
// every file that cannot is in the lost-data list with its byte ranges
// (weft file lost list), health is critical, a data-lost event names it
// once; reading its lost range fails and the mount logs the file once.
// Deleting the lost files empties the list and health is healthy again.
func TestLostDataIsListed(t *testing.T) {
	t.Parallel()
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, Mount: true})
	ctx := context.Background()
	files := map[string][]byte{}
	for i, n := range []int{12 * unit, 8*unit + 5, 5 * unit, 3 * unit, 900 << 10, 7000, 16*unit + 1} {
		p := filepath.Join(c.Mount, fmt.Sprintf("f%d", i))
		files[p] = randBytes(uint64(800+i), n)
		writeFile(t, p, files[p])
	}
	victim := filepath.Join(c.Mount, "f0")
	// One drive per node: those holding stripe 0 of f0 (two units per
	// node: the first of each), so that f0 loses it for sure.
	wipe := map[string]uint32{}
	for _, u := range layout(t, c, victim).Stripes[0].Units {
		if _, ok := wipe[u.Node]; !ok {
			wipe[u.Node] = uint32(u.Drive)
		}
	}
	drives, err := c.Admin.Drives(ctx)
	if err != nil || len(wipe) != 3 {
		t.Fatalf("drives %v, to wipe %v", err, wipe)
	}
	for _, d := range drives {
		if wipe[d.Node] == uint32(d.ID) {
			t.Logf("wiped %s on %s: %d blocks", d.ID, d.Node, wipeDrive(t, d.Path))
		}
	}

	scan := c.WaitJob(startJob(t, c, "integrityscan"), 3*time.Minute)
	if scan.State != job.Succeeded || scan.Phases[0].Items != int64(len(files)) {
		t.Fatalf("integrityscan: %+v", scan)
	}
	out, code := c.Weft("file", "lost", "list", "--json")
	var lost []admin.LostFile
	if code != 0 || json.Unmarshal([]byte(out), &lost) != nil || len(lost) == 0 {
		t.Fatalf("weft file lost list --json: %s", out)
	}
	isLost := map[string]admin.LostFile{}
	for _, f := range lost {
		isLost[filepath.Join(c.Mount, strings.TrimPrefix(f.Path, "/"))] = f
		if len(f.Ranges) == 0 || f.Bytes == 0 || f.Since.IsZero() {
			t.Fatalf("lost file %+v", f)
		}
	}
	v, ok := isLost[victim]
	if !ok || v.Ranges[0].Offset != 0 || v.Ranges[0].Length < 4*unit {
		t.Fatalf("%s not listed with stripe 0's range: %+v", victim, lost)
	}
	t.Logf("%d of %d files lost data; scan report:\n%s%s", len(lost), len(files), scan.Phases[1].Summary, scan.Phases[1].Note)
	if !strings.Contains(scan.Phases[1].Summary, "/f0") || scan.Phases[0].Errors == 0 {
		t.Fatalf("scan report: %+v", scan.Phases)
	}
	for p, want := range files {
		if _, ok := isLost[p]; !ok {
			checkFile(t, p, want) // repaired, or never touched
		}
	}
	// Reading the lost range fails, twice; the mount names the file once.
	for range 2 {
		f, err := os.Open(victim)
		must(t, err)
		_, err = io.ReadFull(f, make([]byte, unit))
		f.Close()
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("read of a lost range: %v, want EIO", err)
		}
	}
	logged := func() int {
		b, _ := os.ReadFile(filepath.Join(c.Dir, "mount.log"))
		n := 0
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "file unreadable") && strings.Contains(line, "/f0") {
				n++
			}
		}
		return n
	}
	poll(t, 10*time.Second, "the mount logs the unreadable file", func() bool { return logged() > 0 })
	if n := logged(); n != 1 {
		t.Fatalf("the mount logged the unreadable file %d times, want once", n)
	}

	st := status(t, c)
	if st.Health != admin.HealthCritical || st.Data.LostFiles != len(lost) {
		t.Fatalf("status with lost data: %+v %+v", st.Status, *st.Data)
	}
	if out, _ := c.Weft("status"); !strings.Contains(out, "health    critical") || !strings.Contains(out, "files with lost data") {
		t.Fatalf("weft status:\n%s", out)
	} else {
		t.Logf("weft status:\n%s", out)
	}
	if out, _ := c.Weft("file", "lost", "list"); !strings.Contains(out, "RANGES") || !strings.Contains(out, "/f0") {
		t.Fatalf("weft file lost list:\n%s", out)
	} else {
		t.Logf("weft file lost list:\n%s", out)
	}
	evs, err := c.Admin.JobEvents(ctx, 100)
	must(t, err)
	perFile := map[string]int{}
	for _, ev := range evs {
		if ev.Kind == job.EventDataLost {
			perFile[ev.Subject]++
		}
	}
	for _, f := range lost {
		if perFile[f.Path] != 1 {
			t.Fatalf("data-lost events per file %v, want one for each of %d", perFile, len(lost))
		}
	}
	// A second scan finds them again and records no new event.
	if again := c.WaitJob(startJob(t, c, "integrityscan"), 3*time.Minute); again.State != job.Succeeded {
		t.Fatalf("second integrityscan: %+v", again)
	}
	evs, err = c.Admin.JobEvents(ctx, 100)
	must(t, err)
	n := 0
	for _, ev := range evs {
		if ev.Kind == job.EventDataLost {
			n++
		}
	}
	if n != len(lost) {
		t.Fatalf("%d data-lost events after a second scan, want %d", n, len(lost))
	}

	for p := range isLost {
		must(t, os.Remove(p))
	}
	poll(t, 30*time.Second, "the lost-data list empty once the lost files are deleted", func() bool {
		out, _ := c.Weft("file", "lost", "list")
		return strings.Contains(out, "no file has lost data")
	})
	poll(t, 30*time.Second, "weft status healthy", func() bool { return status(t, c).Health == cluster.Healthy })
}
