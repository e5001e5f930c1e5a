package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/tests/harness"
)

// driveByID returns drive id from `weft drive list --json` (ok false if
// it is not listed).
func driveByID(t *testing.T, c *harness.Cluster, id cluster.DriveID) (cluster.Drive, bool) {
	t.Helper()
	out, code := c.Weft("drive", "list", "--json")
	if code != 0 {
		t.Fatalf("weft drive list: exit %d:\n%s", code, out)
	}
	var drives []cluster.Drive
	if err := json.Unmarshal([]byte(out), &drives); err != nil {
		t.Fatalf("weft drive list --json: %v\n%s", err, out)
	}
	for _, d := range drives {
		if d.ID == id {
			return d, true
		}
	}
	return cluster.Drive{}, false
}

// A drive added to a running node with `weft drive add` is in service at
// once (new stripes land on it), survives a crash and restart of its node,
// and the same path twice or another node's drive are refused.
func TestDriveAdd(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		const driveSize = 64 << 20
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, Mount: true, LeaseTTL: 3 * time.Second, DriveSize: driveSize})
		c.WaitStatus(30*time.Second, func(s cluster.Status) bool { return s.Health == cluster.Healthy })
		if d, ok := driveByID(t, c, 1); !ok || d.Live == nil || d.Live.TotalBytes != driveSize {
			t.Fatalf("with --drive-size %d, drive d1 is %+v", driveSize, d.Live)
		}

		path := filepath.Join(c.Dir, "nodes", "n2", "disk-added")
		out, code := c.Weft("drive", "add", "n2", path, "--pool", "default", "--capacity", "48MiB", "--json")
		if code != 0 {
			t.Fatalf("weft drive add: exit %d:\n%s", code, out)
		}
		var r admin.AddDriveReply
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("weft drive add --json: %v\n%s", err, out)
		}
		id := r.Drive.ID
		if id == 0 || r.Drive.Node != "n2" || r.Drive.Pool != "default" || r.Capacity != 48<<20 {
			t.Fatalf("weft drive add answered %+v", r)
		}
		d, ok := driveByID(t, c, id)
		if !ok || d.State != cluster.Up || d.Status != cluster.StatusReady || d.Live.TotalBytes != 48<<20 || d.Path != path {
			t.Fatalf("added drive listed as %+v (live %+v)", d, d.Live)
		}
		if out, _ := c.Weft("drive", "list"); !strings.Contains(out, "48.0 MiB") {
			t.Errorf("weft drive list does not show the added drive's 48 MiB size:\n%s", out)
		}

		// Refusals, through the CLI: each names the path and why.
		n1Drive := filepath.Join(c.Dir, "nodes", "n1", "disk0")
		for _, tc := range []struct {
			name string
			args []string
			want []string
		}{
			{"same path twice", []string{"drive", "add", "n2", path}, []string{path, "already drive " + id.String()}},
			{"another node's drive", []string{"drive", "add", "n2", n1Drive}, []string{n1Drive, `of node "n1"`}},
			{"unknown node", []string{"drive", "add", "n9", filepath.Join(c.Dir, "x")}, []string{`no node "n9"`}},
			{"relative path", []string{"drive", "add", "n2", "disk7"}, []string{`"disk7"`, "absolute"}},
			{"bad capacity", []string{"drive", "add", "n2", filepath.Join(c.Dir, "x"), "--capacity", "lots"}, []string{`"lots"`, "64MiB"}},
		} {
			out, code := c.Weft(tc.args...)
			if code == 0 {
				t.Errorf("%s: weft %v succeeded:\n%s", tc.name, tc.args, out)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s: output does not mention %q:\n%s", tc.name, w, out)
				}
			}
		}

		// New stripes land on the drive: write files until one has a unit
		// there (placement draws drives by free space, so it comes soon; 40
		// files of one ec:4+2 stripe each without it would mean the drive is
		// not a candidate).
		files := map[string][]byte{}
		var onNew string
		for i := 0; i < 40 && onNew == ""; i++ {
			p := filepath.Join(c.Mount, fmt.Sprintf("f%d", i))
			files[p] = randBytes(uint64(900+i), 4*unit)
			writeFile(t, p, files[p])
			for _, s := range layout(t, c, p).Stripes {
				for _, u := range s.Units {
					if u.Drive == meta.DriveID(id) {
						onNew = p
					}
				}
			}
		}
		if onNew == "" {
			t.Fatalf("no unit of 40 new files landed on the added drive %v", id)
		}

		// Crash n2 and start it again with the same flags: the drive is back.
		ctx := context.Background()
		n1 := c.NodeAdmin("n1")
		if err := c.Ctl.Kill(ctx, "n2"); err != nil {
			t.Fatal(err)
		}
		c.WaitNode(n1, "n2", cluster.Down, 30*time.Second)
		if d, _ := driveByID(t, c, id); d.State != cluster.Down {
			t.Fatalf("with n2 dead the added drive is %s", d.State)
		}
		if err := c.Ctl.Start(ctx, "n2"); err != nil {
			t.Fatal(err)
		}
		c.WaitNode(n1, "n2", cluster.Up, time.Minute)
		c.WaitStatus(30*time.Second, func(s cluster.Status) bool { return s.Health == cluster.Healthy && s.DrivesUp == 7 })
		d, ok = driveByID(t, c, id)
		if !ok || d.State != cluster.Up || d.Live.TotalBytes != 48<<20 || d.Live.Blocks == 0 {
			t.Fatalf("after n2's restart the added drive is %+v (live %+v)", d, d.Live)
		}
		for p, want := range files {
			checkFile(t, p, want)
		}
		// Still refused after the restart: the node knows the path is its drive.
		if out, code := c.Weft("drive", "add", "n2", path); code == 0 || !strings.Contains(out, "already drive "+id.String()) {
			t.Fatalf("same path after a restart: exit %d:\n%s", code, out)
		}
	})
}
