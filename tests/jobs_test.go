package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/tests/harness"
)

// layout runs `weft file info --json` and decodes it.
func layout(t *testing.T, c *harness.Cluster, path string) client.FileLayout {
	t.Helper()
	out, code := c.Weft("file", "info", "--json", path)
	if code != 0 {
		t.Fatalf("weft file info %s: %s", path, out)
	}
	var l client.FileLayout
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// startJob runs `weft job start` and returns the job id.
func startJob(t *testing.T, c *harness.Cluster, args ...string) job.JobID {
	t.Helper()
	out, code := c.Weft(append([]string{"job", "start", "--json"}, args...)...)
	var r admin.StartJobReply
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("weft job start %v: %s", args, out)
	}
	return r.ID
}

// A node dies; after the grace period a repair starts by itself and
// re-protects every file on the surviving drives.
func TestRepairAfterNodeLoss(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, Mount: true, LeaseTTL: 3 * time.Second, RepairGrace: 3 * time.Second})
		files := map[string][]byte{}
		for i, n := range []int{7, 300 << 10, 9*unit + 5, 17 * unit} {
			p := filepath.Join(c.Mount, fmt.Sprintf("r%d", i))
			files[p] = randBytes(uint64(500+i), n)
			writeFile(t, p, files[p])
		}
		ctx := context.Background()
		if err := c.Ctl.Kill(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
		c.WaitNode(c.NodeAdmin("n1"), "n3", cluster.Down, 30*time.Second)

		// The event starts a repair at priority 1.
		var repair job.JobView
		deadline := time.Now().Add(time.Minute)
		for repair.ID == 0 {
			jobs, err := c.Admin.Jobs(ctx)
			if err == nil {
				for _, j := range jobs {
					if j.Type == "repair" {
						repair = j
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no repair job a minute after n3 went down: %v", jobs)
			}
			time.Sleep(250 * time.Millisecond)
		}
		if repair.Priority != 1 || !strings.Contains(repair.Params["reason"], "down") {
			t.Fatalf("repair started with %+v", repair)
		}
		// The event log has each of n3's drives going down, and the repair
		// started for it (recorded just after the job was submitted).
		var evs []job.Event
		var seen, started map[string]bool
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			var err error
			if evs, err = c.Admin.JobEvents(ctx, 100); err != nil {
				t.Fatal(err)
			}
			seen, started = map[string]bool{}, map[string]bool{}
			for _, ev := range evs {
				if ev.Kind == job.EventDriveDown && strings.Contains(ev.Detail, " on n3 ") {
					seen[ev.Subject] = true
					if ev.Job == repair.ID && ev.Outcome == fmt.Sprintf("started repair job %d", repair.ID) {
						started[ev.Subject] = true
					}
				}
			}
			if len(started) == 4 {
				break
			}
		}
		if len(seen) != 4 || len(started) != 4 {
			t.Fatalf("drive-down events for n3's 4 drives: seen %v, naming repair job %d %v; events %+v", seen, repair.ID, started, evs)
		}
		repair = c.WaitJob(repair.ID, 3*time.Minute)
		if repair.State != job.Succeeded {
			t.Fatalf("repair ended %s: %+v", repair.State, repair)
		}
		for p, want := range files {
			checkFile(t, p, want)
			l := layout(t, c, p)
			for _, s := range l.Stripes {
				if s.Inline {
					// r0, 7 bytes: in its map (weft mount --inline-max),
					// nothing on n3 to repair; it read back above.
					if len(s.Units) != 0 || !strings.HasSuffix(p, "r0") {
						t.Fatalf("%s stripe %d inline with %d units", p, s.Index, len(s.Units))
					}
					continue
				}
				if s.Placed != s.Width || s.Unavailable != 0 || s.Tolerance.Drives < 2 {
					t.Fatalf("%s stripe %d after repair: %d/%d placed, %d unavailable, tolerance %v",
						p, s.Index, s.Placed, s.Width, s.Unavailable, s.Tolerance)
				}
				for _, u := range s.Units {
					if u.Node == "n3" {
						t.Fatalf("%s stripe %d still has a unit on the dead node: %+v", p, s.Index, u)
					}
				}
			}
		}
	})
}

// weft drive remove empties a drive while a reader verifies every byte it
// reads, then retires it.
func TestDriveRemoveWhileReading(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, Mount: true})
		files := map[string][]byte{}
		for i := 0; i < 6; i++ {
			p := filepath.Join(c.Mount, fmt.Sprintf("d%d", i))
			files[p] = randBytes(uint64(700+i), 6*unit+i*1000)
			writeFile(t, p, files[p])
		}
		// fio's own verification files, read back and checked during the drain.
		_, fioErr := exec.LookPath("fio")
		fioArgs := []string{"--name=pre", "--directory=" + c.Mount, "--bs=256k", "--size=16m", "--numjobs=2",
			"--verify=crc32c", "--ioengine=psync", "--fallocate=none", "--verify_state_save=0"}
		if fioErr == nil {
			if out, err := exec.Command("fio", append(fioArgs, "--rw=write", "--do_verify=0", "--end_fsync=1")...).CombinedOutput(); err != nil {
				t.Fatalf("fio write: %v\n%s", err, out)
			}
		}
		// The drive holding the most blocks.
		drives, _ := c.Admin.Drives(context.Background())
		victim := drives[0]
		for _, d := range drives {
			if d.Live != nil && victim.Live != nil && d.Live.Blocks > victim.Live.Blocks {
				victim = d
			}
		}
		var stop atomic.Bool
		var reads, fioRuns atomic.Int64
		errs := make(chan error, 2)
		var wg sync.WaitGroup
		if fioErr == nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					out, err := exec.Command("fio", append(fioArgs, "--rw=read", "--verify_only")...).CombinedOutput()
					if err != nil || strings.Contains(string(out), "verify: bad") {
						select {
						case errs <- fmt.Errorf("fio verify during the drain: %v\n%s", err, out):
						default:
						}
						return
					}
					fioRuns.Add(1)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				for p, want := range files {
					got, err := os.ReadFile(p)
					if err != nil || !bytes.Equal(got, want) {
						select {
						case errs <- fmt.Errorf("read %s during the drain: %v (equal %v)", p, err, bytes.Equal(got, want)):
						default:
						}
						return
					}
					reads.Add(1)
				}
			}
		}()
		out, code := c.Weft("drive", "remove", "--json", victim.ID.String())
		var r admin.RemoveDriveReply
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("weft drive remove: %s", out)
		}
		j := c.WaitJob(r.Job, 3*time.Minute)
		stop.Store(true)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if j.State != job.Succeeded {
			t.Fatalf("drain ended %s: %+v", j.State, j)
		}
		t.Logf("drained %s while %d whole-file reads and %d fio verify runs checked every byte", victim.ID, reads.Load(), fioRuns.Load())
		d, err := c.Admin.Drives(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range d {
			if x.ID == victim.ID && x.Status != cluster.StatusRemoved {
				t.Fatalf("drained drive is %s", x.Status)
			}
		}
		for p, want := range files {
			checkFile(t, p, want)
			for _, s := range layout(t, c, p).Stripes {
				for _, u := range s.Units {
					if uint32(u.Drive) == uint32(victim.ID) {
						t.Fatalf("%s stripe %d still uses the removed drive", p, s.Index)
					}
				}
			}
		}
	})
}

// integrityscan finds a flipped byte (dry run), repairs it, and a third
// scan is clean; pausing and resuming keep its progress.
func TestIntegrityScan(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, Mount: true})
		data := randBytes(900, 8*unit+3)
		p := filepath.Join(c.Mount, "scanned")
		writeFile(t, p, data)
		for i := 0; i < 40; i++ {
			writeFile(t, filepath.Join(c.Mount, fmt.Sprintf("small%02d", i)), randBytes(uint64(i), 5000))
		}
		l := layout(t, c, p)
		u := l.Stripes[1].Units[2]
		drives, _ := c.Admin.Drives(context.Background())
		var dpath string
		for _, d := range drives {
			if uint32(d.ID) == uint32(u.Drive) {
				dpath = d.Path
			}
		}
		bf := filepath.Join(dpath, "blocks", u.Block[:2], u.Block)
		b, err := os.ReadFile(bf)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-7] ^= 0x20
		must(t, os.WriteFile(bf, b, 0o644))

		dry := c.WaitJob(startJob(t, c, "integrityscan", "--dry-run"), 2*time.Minute)
		if dry.State != job.Succeeded || dry.Phases[0].Errors != 1 || !strings.Contains(dry.Phases[0].Note, "/scanned stripe 1") {
			t.Fatalf("dry-run scan: %+v", dry.Phases)
		}
		fix := c.WaitJob(startJob(t, c, "integrityscan"), 2*time.Minute)
		if fix.State != job.Succeeded || fix.Phases[0].Errors != 1 || !strings.Contains(fix.Phases[0].Note, "repaired") {
			t.Fatalf("repairing scan: %+v", fix.Phases)
		}
		clean := c.WaitJob(startJob(t, c, "integrityscan"), 2*time.Minute)
		if clean.State != job.Succeeded || clean.Phases[0].Errors != 0 || clean.Phases[0].Items < 41 {
			t.Fatalf("scan after repair: %+v", clean.Phases)
		}
		checkFile(t, p, data)

		// Pause and resume through the CLI.
		id := startJob(t, c, "integrityscan", "--dry-run", "--policy", "low")
		if out, code := c.Weft("job", "pause", id.String()); code != 0 && !strings.Contains(out, "succeeded") {
			t.Fatalf("pause: %s", out)
		}
		if out, code := c.Weft("job", "resume", id.String()); code != 0 && !strings.Contains(out, "succeeded") {
			t.Fatalf("resume: %s", out)
		}
		if j := c.WaitJob(id, 2*time.Minute); j.State != job.Succeeded || j.Phases[0].Items < 41 {
			t.Fatalf("paused and resumed scan: %+v", j)
		}
		out, code := c.Weft("job", "view", id.String())
		if code != 0 || !strings.Contains(out, "succeeded") || !strings.Contains(out, "PHASE") {
			t.Fatalf("weft job view:\n%s", out)
		}
	})
}

// Killing the coordinator's node in the middle of a job: another node
// takes over and the job still covers every file.
func TestJobSurvivesCoordinatorKill(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, Mount: true, LeaseTTL: 3 * time.Second})
		const n = 150
		for i := 0; i < n; i++ {
			writeFile(t, filepath.Join(c.Mount, fmt.Sprintf("c%03d", i)), randBytes(uint64(i), 64<<10))
		}
		ctx := context.Background()
		st, err := c.Admin.JobStatus(ctx)
		if err != nil || st.Coordinator == "" {
			t.Fatalf("job status: %+v %v", st, err)
		}
		id := startJob(t, c, "integrityscan", "--dry-run", "--policy", "low")
		// Kill the coordinator once the job has made progress, not before.
		deadline := time.Now().Add(time.Minute)
		for {
			j, err := c.Admin.Job(ctx, id)
			if err == nil && (j.State.Terminal() || (len(j.Phases) > 0 && j.Phases[0].Items > 0) || j.Progress != nil && j.Progress.Done > 0) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d made no progress: %+v", id, j)
			}
			time.Sleep(20 * time.Millisecond)
		}
		// The kill must land mid-job, or the test shows nothing about failover.
		if j, err := c.Admin.Job(ctx, id); err != nil || j.State.Terminal() {
			t.Fatalf("job %d ended before the coordinator could be killed (%v): give it more files", id, err)
		}
		if err := c.Ctl.Kill(ctx, st.Coordinator); err != nil {
			t.Fatal(err)
		}
		j := c.WaitJob(id, 3*time.Minute)
		if j.State != job.Succeeded || j.Phases[0].Items < n || j.Phases[0].Errors != 0 {
			t.Fatalf("job after killing coordinator %s: %+v", st.Coordinator, j)
		}
		st2, err := c.Admin.JobStatus(ctx)
		if err != nil || st2.Coordinator == "" || st2.Coordinator == st.Coordinator {
			t.Fatalf("coordinator after the kill: %+v %v", st2, err)
		}
		t.Logf("coordinator %s killed; %s took over; the job processed %d items for %d files", st.Coordinator, st2.Coordinator, j.Phases[0].Items, n)
	})
}

// treedelete removes a tree through the job engine and the space comes
// back; collect sweeps a block nobody references and keeps every block a
// file uses.
func TestTreeDeleteAndCollect(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.ProcessOnly("it injects a fault into one mount through its environment (WEFT_FAILPOINTS), which a mount inside the test process shares with everything else"), func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, Mount: true})
		ctx := context.Background()
		keep := randBytes(31, 5*unit+9)
		writeFile(t, filepath.Join(c.Mount, "keep"), keep)
		for d := 0; d < 5; d++ {
			dir := filepath.Join(c.Mount, "tree", fmt.Sprintf("d%d", d), "sub")
			must(t, os.MkdirAll(dir, 0o755))
			for f := 0; f < 20; f++ {
				writeFile(t, filepath.Join(dir, fmt.Sprintf("f%02d", f)), randBytes(uint64(d*100+f), 70<<10))
			}
		}
		j := c.WaitJob(startJob(t, c, "treedelete", "--path", "/tree"), 2*time.Minute)
		if j.State != job.Succeeded || j.Phases[0].Items != 100 {
			t.Fatalf("treedelete: %+v", j)
		}
		if _, err := os.Stat(filepath.Join(c.Mount, "tree")); !os.IsNotExist(err) {
			t.Fatalf("tree still there: %v", err)
		}
		checkFile(t, filepath.Join(c.Mount, "keep"), keep)

		// An orphan block: stored on a drive, named by no stripe map.
		drives, err := c.Admin.Drives(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d := drives[0]
		bc := c.DriveBlocks(d)
		orphan := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 999999, Stripe: 0, Unit: 0, Generation: 1}
		if err := bc.Put(ctx, d.ID, orphan, randBytes(5, 100<<10)); err != nil {
			t.Fatal(err)
		}
		// Orphans of a file that exists: a mount whose client "dies" between
		// storing a stripe's units and committing its map (failpoint
		// client/before-commit) leaves blocks whose owner is alive but whose
		// stripe map does not name them.
		before := allBlocks(t, c)
		crashy := filepath.Join(t.TempDir(), "crashy")
		stopCrashy := c.MountAtEnv(crashy, "WEFT_FAILPOINTS=client/before-commit=error")
		if err := os.WriteFile(filepath.Join(crashy, "torn"), randBytes(77, 3*4*unit), 0o644); err == nil {
			t.Fatal("a write through the failing mount succeeded: the failpoint did not fire")
		}
		// The mount goes first, as a client that died would: its release
		// of the file, which the kernel sends after close returns, tries
		// the buffered stripes once more, and a block it stored during the
		// collect would be younger than the grace and rightly kept.
		stopCrashy()
		orphans := map[drive.BlockID]bool{}
		for id := range allBlocks(t, c) {
			if !before[id] {
				orphans[id] = true
			}
		}
		if len(orphans) < 6 {
			t.Fatalf("the failed write left %d blocks, want at least a stripe's 6", len(orphans))
		}

		// A nanosecond's grace: the orphans are old enough at once, and no write
		// is in flight on this cluster, so every referenced block must survive.
		j = c.WaitJob(startJob(t, c, "collect", "--param", "grace=1ns"), 2*time.Minute)
		if j.State != job.Succeeded {
			t.Fatalf("collect: %+v", j)
		}
		if _, _, err := bc.Get(ctx, d.ID, orphan.ID, 0, -1); !errors.Is(err, drive.ErrNotFound) {
			t.Fatalf("orphan block after collect: %v", err)
		}
		after := allBlocks(t, c)
		for id := range orphans {
			if after[id] {
				t.Fatalf("orphan block %v of the torn write survived collect", id)
			}
		}
		// Every block a file references is still there.
		checked := 0
		for _, st := range layout(t, c, filepath.Join(c.Mount, "keep")).Stripes {
			for _, u := range st.Units {
				checked++
				id, err := drive.ParseBlockID(u.Block)
				if err != nil || !after[id] {
					t.Fatalf("block %q of /keep is gone after collect (%v)", u.Block, err)
				}
			}
		}
		if checked < 6 {
			t.Fatalf("/keep lists %d units", checked)
		}
		checkFile(t, filepath.Join(c.Mount, "keep"), keep)
		v := c.WaitJob(startJob(t, c, "integrityscan", "--dry-run"), 2*time.Minute)
		if v.State != job.Succeeded || v.Phases[0].Errors != 0 {
			t.Fatalf("integrity after collect: %+v", v.Phases)
		}
	})
}

// allBlocks lists every block on every drive of the cluster.
func allBlocks(t *testing.T, c *harness.Cluster) map[drive.BlockID]bool {
	t.Helper()
	ctx := context.Background()
	nodes, err := c.Admin.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drives, err := c.Admin.Drives(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[drive.BlockID]bool{}
	for _, n := range nodes {
		bc, err := c.DialBlocks(n.GRPCAddr)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range drives {
			if d.Node != n.Name {
				continue
			}
			for after := ""; ; {
				page, next, err := bc.List(ctx, d.ID, after, 1000)
				if err != nil {
					t.Fatalf("list %v on %s: %v", d.ID, n.Name, err)
				}
				for _, b := range page {
					out[b.ID] = true
				}
				if next == "" || len(page) == 0 {
					break
				}
				after = next
			}
		}
		bc.Close()
	}
	return out
}

var treeFiles = flag.Int("treedelete.files", 20000, "files in TestTreeDeleteLarge's tree (the issue's figure, 100000, takes about 6 minutes here: docs/benchmarks.md)")

// treedelete removes a tree of -treedelete.files files (most of them empty, made
// straight in the namespace; some with data, written through the mount)
// and the pool's used space comes back to what it was before the tree.
func TestTreeDeleteLarge(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.ProcessByDefault, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, Mount: true})
		ctx := context.Background()
		base := usedBytes(t, c)
		keep := randBytes(3, 2*unit+1)
		writeFile(t, filepath.Join(c.Mount, "keep"), keep)

		const perDir = 1000
		withData := 100
		n := *treeFiles
		dirs := (n + perDir - 1) / perDir
		ns := c.Namespace()
		root, err := ns.Mkdir(ctx, meta.RootLIN, "big", 0o755)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, dirs)
		sem := make(chan struct{}, 32)
		for d := 0; d < dirs; d++ {
			dir, err := ns.Mkdir(ctx, root.LIN, fmt.Sprintf("d%03d", d), 0o755)
			if err != nil {
				t.Fatal(err)
			}
			for f := 0; f < perDir && d*perDir+f < n; f++ {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					if _, err := ns.Create(ctx, dir.LIN, fmt.Sprintf("f%04d", f), meta.NewInode{Mode: 0o644}); err != nil {
						errs <- err
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("%d empty files created in the namespace in %s", n, time.Since(start).Round(time.Millisecond))
		for i := 0; i < withData; i++ {
			writeFile(t, filepath.Join(c.Mount, "big", "d000", fmt.Sprintf("data%03d", i)), randBytes(uint64(i), 512<<10+i))
		}
		filled := usedBytes(t, c)
		if filled-base < int64(withData)*512<<10 {
			t.Fatalf("used grew by %d bytes for %d files of 512 KiB", filled-base, withData)
		}

		start = time.Now()
		j := c.WaitJob(startJob(t, c, "treedelete", "--path", "/big", "--policy", "high"), 15*time.Minute)
		took := time.Since(start)
		if j.State != job.Succeeded || j.Phases[0].Items != int64(n+withData) {
			t.Fatalf("treedelete: %+v", j)
		}
		t.Logf("treedelete of %d files took %s (%.0f files/s)", n+withData, took.Round(time.Millisecond), float64(n+withData)/took.Seconds())
		if _, err := os.Stat(filepath.Join(c.Mount, "big")); !os.IsNotExist(err) {
			t.Fatalf("/big after treedelete: %v", err)
		}
		// The nodes drain the delete queue in the background: the space comes
		// back within seconds.
		deadline := time.Now().Add(time.Minute)
		for {
			used := usedBytes(t, c)
			if used-base <= 2*(6*unit+64<<10) { // /keep: at most two stripes' units
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("used %d bytes a minute after treedelete; %d before the tree, %d with it", used, base, filled)
			}
			time.Sleep(200 * time.Millisecond)
		}
		checkFile(t, filepath.Join(c.Mount, "keep"), keep)
	})
}

// usedBytes sums the used bytes of every drive, read from the nodes now.
func usedBytes(t *testing.T, c *harness.Cluster) int64 {
	t.Helper()
	var sum int64
	for _, u := range driveUsages(t, c) {
		sum += u.UsedBytes
	}
	return sum
}
