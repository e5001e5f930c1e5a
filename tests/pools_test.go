package tests

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/tests/harness"
)

// weftJSON runs the CLI with --json and decodes its answer into v.
func weftJSON(t *testing.T, c *harness.Cluster, v any, args ...string) {
	t.Helper()
	out, code := c.Weft(append(args, "--json")...)
	if code != 0 {
		t.Fatalf("weft %s: exit %d:\n%s", strings.Join(args, " "), code, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("weft %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Pools as objects: two pools made of drives moved out of the default
// one with weft drive move (a drain, then the pool changes); a file moved
// to a pool with set-pool while a reader reads it ends with every unit
// on that pool's drives, and set-protection re-encodes it; a pool with
// drives or files cannot be deleted, an empty one can.
func TestPools(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.ProcessByDefault, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, Mount: true, LeaseTTL: 3 * time.Second})
		c.WaitStatus(30*time.Second, func(s cluster.Status) bool { return s.Health == cluster.Healthy })

		// A file written before the moves: its units on the drives that
		// move get drained to the default pool's others.
		data := make([]byte, 9<<20+12345)
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		path := filepath.Join(c.Mount, "results.bin")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}

		if out, code := c.Weft("pool", "create", "fast", "--protection", "mirror:2", "--class", "ssd", "--threshold", "80,60"); code != 0 {
			t.Fatalf("pool create fast: %s", out)
		}
		if out, code := c.Weft("pool", "create", "capacity", "--protection", "ec:2+1", "--class", "ssd"); code != 0 {
			t.Fatalf("pool create capacity: %s", out)
		}
		for _, bad := range [][]string{
			{"pool", "create", "x", "--protection", "mirror:2", "--class", "tape"},
			{"pool", "create", "x", "--protection", "mirror:2", "--threshold", "50,60"},
			{"pool", "frobnicate"},
		} {
			if out, code := c.Weft(bad...); code != 2 {
				t.Errorf("weft %v: exit %d, want 2 (usage):\n%s", bad, code, out)
			}
		}

		// One drive of each node to each new pool: the default pool keeps
		// 6, what its ec:4+2 needs.
		moves := map[cluster.DriveID]string{1: "fast", 5: "fast", 9: "fast", 2: "capacity", 6: "capacity", 10: "capacity"}
		for id, pool := range moves {
			var r admin.MoveDriveReply
			weftJSON(t, c, &r, "drive", "move", id.String(), "--pool", pool)
			if r.Drive.MoveTo != pool || r.Job == 0 {
				t.Fatalf("drive move %s: %+v", id, r)
			}
		}
		deadline := time.Now().Add(3 * time.Minute)
		for {
			var drives []cluster.Drive
			weftJSON(t, c, &drives, "drive", "list")
			left := 0
			for _, d := range drives {
				if p, ok := moves[d.ID]; ok && (d.Pool != p || d.Status != cluster.StatusReady) {
					left++
				}
			}
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				out, _ := c.Weft("drive", "list")
				jobs, _ := c.Weft("job", "list", "--all")
				for id := 1; id <= len(moves); id++ {
					view, _ := c.Weft("job", "view", strconv.Itoa(id))
					jobs += "\n" + view
				}
				t.Fatalf("%d drives still moving after 3 minutes:\n%s\n%s", left, out, jobs)
			}
			time.Sleep(time.Second)
		}
		inPool := func(pool string) map[meta.DriveID]bool {
			out := map[meta.DriveID]bool{}
			for id, p := range moves {
				if p == pool {
					out[meta.DriveID(id)] = true
				}
			}
			return out
		}
		for _, s := range layout(t, c, path).Stripes {
			for _, u := range s.Units {
				if moves[cluster.DriveID(u.Drive)] != "" {
					t.Fatalf("after the moves, stripe %d of the file still has a unit on moved drive %d", s.Index, u.Drive)
				}
			}
		}

		// set-pool while a reader reads the file, over and over.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var readErr error
		reads := 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := os.ReadFile(path)
				if err == nil && !bytes.Equal(got, data) {
					err = os.ErrInvalid
				}
				if err != nil {
					readErr = err
					return
				}
				reads++
			}
		}()
		var r admin.FileLayoutReply
		weftJSON(t, c, &r, "file", "set-pool", path, "fast")
		if r.Pool != "fast" || r.PoolProtection != "mirror:2" || r.Job == 0 {
			t.Fatalf("set-pool answered %+v", r)
		}
		if j := c.WaitJob(r.Job, 2*time.Minute); j.State != job.Succeeded {
			t.Fatalf("relayout job: %+v", j)
		}
		close(stop)
		wg.Wait()
		if readErr != nil {
			t.Fatalf("a read during set-pool failed or differed (after %d good reads): %v", reads, readErr)
		}
		fast := inPool("fast")
		l := layout(t, c, path)
		if l.Pool != "fast" {
			t.Fatalf("file info says pool %q", l.Pool)
		}
		for _, s := range l.Stripes {
			if s.Protection != "mirror:2" {
				t.Errorf("stripe %d is %s, want mirror:2 (the pool's)", s.Index, s.Protection)
			}
			for _, u := range s.Units {
				if !fast[u.Drive] {
					t.Errorf("stripe %d unit %d on drive %d, not a drive of pool fast", s.Index, u.Unit, u.Drive)
				}
			}
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("file after set-pool: %v (equal %v)", err, bytes.Equal(got, data))
		}

		// Refusals: a pool that does not exist; a protection wider than
		// the pool's 3 drives.
		if out, code := c.Weft("file", "set-pool", path, "nowhere"); code == 0 || !strings.Contains(out, "pool nowhere") {
			t.Errorf("set-pool to an unknown pool: exit %d:\n%s", code, out)
		}
		if out, code := c.Weft("file", "set-protection", path, "ec:4+2"); code == 0 || !strings.Contains(out, "pool fast has 3 in service") {
			t.Errorf("set-protection wider than the pool: exit %d:\n%s", code, out)
		}
		weftJSON(t, c, &r, "file", "set-protection", path, "ec:2+1")
		if j := c.WaitJob(r.Job, 2*time.Minute); j.State != job.Succeeded {
			t.Fatalf("relayout job: %+v", j)
		}
		for _, s := range layout(t, c, path).Stripes {
			// A stripe shorter than one unit (2 MiB of the 4 MiB stripe)
			// is mirrored with M+1 copies, as small files are.
			want := "ec:2+1"
			if s.DataLen < 2<<20 {
				want = "mirror:2"
			}
			if s.Protection != want {
				t.Errorf("after set-protection stripe %d (%d bytes) is %s, want %s", s.Index, s.DataLen, s.Protection, want)
			}
			for _, u := range s.Units {
				if !fast[u.Drive] {
					t.Errorf("after set-protection stripe %d unit %d on drive %d", s.Index, u.Unit, u.Drive)
				}
			}
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("file after set-protection: %v", err)
		}

		// The list shows the drives and the file; deletes.
		var pools []admin.PoolView
		weftJSON(t, c, &pools, "pool", "list")
		for _, p := range pools {
			if p.Name == "fast" && (p.Drives != 3 || p.Inodes != 1 || p.Class != "ssd" || p.High != 80 || p.Low != 60) {
				t.Errorf("pool fast listed as %+v", p)
			}
		}
		if out, code := c.Weft("pool", "delete", "fast"); code == 0 || !strings.Contains(out, "still holds 1 files") {
			t.Errorf("delete a pool with a file: exit %d:\n%s", code, out)
		}
		if out, code := c.Weft("pool", "create", "empty", "--protection", "mirror:2"); code != 0 {
			t.Fatalf("pool create empty: %s", out)
		}
		if out, code := c.Weft("pool", "delete", "empty"); code != 0 {
			t.Fatalf("pool delete empty: exit %d:\n%s", code, out)
		}
		if out, _ := c.Weft("pool", "list"); strings.Contains(out, "empty") {
			t.Errorf("deleted pool still listed:\n%s", out)
		}
	})
}
