package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/tests/harness"
)

// driveFractions reads every drive's used fraction from the nodes now.
func driveFractions(t *testing.T, c *harness.Cluster) map[cluster.DriveID]float64 {
	t.Helper()
	out := map[cluster.DriveID]float64{}
	for id, u := range driveUsages(t, c) {
		out[id] = float64(u.UsedBytes) / float64(u.TotalBytes)
	}
	return out
}

// driveUsages reads every drive's usage from the nodes now (the
// control plane's copy lags by the usage interval).
func driveUsages(t *testing.T, c *harness.Cluster) map[cluster.DriveID]drive.Usage {
	t.Helper()
	ctx := context.Background()
	nodes, err := c.Admin.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[cluster.DriveID]drive.Usage{}
	for _, n := range nodes {
		bc, err := c.DialBlocks(n.GRPCAddr)
		if err != nil {
			t.Fatal(err)
		}
		us, err := bc.Usage(ctx)
		bc.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			out[cluster.DriveID(u.Drive)] = u.Usage
		}
	}
	return out
}

func spreadOf(f map[cluster.DriveID]float64) (lo, hi float64) {
	lo, hi = 2, -1
	for _, x := range f {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// Two drives added to a pool filled to about 55 %: the drive-added events
// start a multiscan by themselves, which moves units onto the new drives
// until every drive is within 5 points of the others, while the files stay
// readable; the events name the job.
func TestRebalanceAfterDriveAdd(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.ProcessByDefault, func(t *testing.T, m harness.Mode) {
		const driveSize = 128 << 20
		c := m.Start(t, harness.Options{Nodes: 4, DrivesPerNode: 2, Mount: true, DriveSize: driveSize})
		c.WaitStatus(time.Minute, func(s cluster.Status) bool { return s.Health == cluster.Healthy })

		// 22 files of 16 MiB in ec:4+2: 528 MiB of units on 1 GiB of drives.
		const files, size = 22, 16 * unit
		var wg sync.WaitGroup
		sem := make(chan struct{}, 4)
		for i := 0; i < files; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				writeFile(t, filepath.Join(c.Mount, fmt.Sprintf("f%02d", i)), randBytes(uint64(900+i), size))
			}()
		}
		wg.Wait()
		lo, hi := spreadOf(driveFractions(t, c))
		t.Logf("before: drives %.1f%%–%.1f%% used", lo*100, hi*100)
		if lo < 0.4 {
			t.Fatalf("the pool is not full-ish: a drive is %.1f%% used", lo*100)
		}

		var added []cluster.DriveID
		for _, node := range []string{"n1", "n2"} {
			out, code := c.Weft("drive", "add", node, filepath.Join(c.Dir, "nodes", node, "disk-new"), "--capacity", "128MiB", "--json")
			var r admin.AddDriveReply
			if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
				t.Fatalf("weft drive add %s: %s", node, out)
			}
			added = append(added, r.Drive.ID)
		}

		// The coordinator notices the new drives and starts a multiscan (two,
		// if the drives joined in different checks).
		ctx := context.Background()
		jobs := map[job.JobID]bool{}
		deadline := time.Now().Add(time.Minute)
		for {
			evs, err := c.Admin.JobEvents(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			clear(jobs)
			named := 0
			for _, ev := range evs {
				if ev.Kind == "drive-added" && ev.Job != 0 && (ev.Subject == added[0].String() || ev.Subject == added[1].String()) {
					named++
					jobs[ev.Job] = true
				}
			}
			if named == 2 {
				break
			}
			if time.Now().After(deadline) {
				out, _ := exec.Command("sh", "-c", "grep -h -i -E 'event|watch|coordinator' "+filepath.Join(c.Dir, "nodes", "*", "server.log")).CombinedOutput()
				t.Fatalf("the drive-added events do not both name a job after a minute: %+v\n%s", evs, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// High impact, so the test does not wait on a background pace.
		for id := range jobs {
			if out, code := c.Weft("job", "modify", fmt.Sprint(id), "--policy", "high"); code != 0 && !strings.Contains(out, "ended") {
				t.Fatalf("weft job modify: %s", out)
			}
		}
		// Readers throughout the move.
		stop := make(chan struct{})
		var readers sync.WaitGroup
		for r := 0; r < 2; r++ {
			readers.Add(1)
			go func() {
				defer readers.Done()
				for i := r; ; i = (i + 2) % files {
					select {
					case <-stop:
						return
					default:
					}
					checkFile(t, filepath.Join(c.Mount, fmt.Sprintf("f%02d", i)), randBytes(uint64(900+i), size))
				}
			}()
		}
		for id := range jobs {
			j := c.WaitJob(id, 5*time.Minute)
			if j.Type != "multiscan" || j.State != job.Succeeded {
				t.Fatalf("multiscan: %+v", j)
			}
			for _, p := range j.Phases {
				t.Logf("job %d phase %s: %d items, %d bytes, %d errors: %s", id, p.Name, p.Items, p.Bytes, p.Errors, p.Note)
			}
		}
		close(stop)
		readers.Wait()
		f := driveFractions(t, c)
		lo, hi = spreadOf(f)
		t.Logf("after: drives %.1f%%–%.1f%% used; new drives %.1f%% and %.1f%%", lo*100, hi*100, f[added[0]]*100, f[added[1]]*100)
		if hi-lo > 0.05 {
			t.Fatalf("after the multiscan the drives are %.1f%%–%.1f%% used: not within 5 points (%v)", lo*100, hi*100, f)
		}
		for i := 0; i < files; i++ {
			checkFile(t, filepath.Join(c.Mount, fmt.Sprintf("f%02d", i)), randBytes(uint64(900+i), size))
		}
		v := c.WaitJob(startJob(t, c, "integrityscan", "--dry-run", "--policy", "high"), 3*time.Minute)
		if v.State != job.Succeeded || v.Phases[0].Errors != 0 {
			t.Fatalf("integrity after the rebalance: %+v", v.Phases)
		}
	})
}
