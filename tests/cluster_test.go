package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/tests/harness"
)

// A node that crashes is marked down when its lease expires while the
// others keep serving the control plane; restarted, it is up again.
func TestNodeCrashAndRestart(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		ttl := 5 * time.Second
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, LeaseTTL: ttl})
		st := c.WaitStatus(30*time.Second, func(s cluster.Status) bool { return s.Health == cluster.Healthy })
		if st.Nodes != 3 || st.Drives != 12 || st.DrivesUp != 12 {
			t.Fatalf("new cluster: %+v", st)
		}

		ctx := context.Background()
		n2 := c.NodeAdmin("n2")
		if err := c.Ctl.Kill(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		// Liveness bound: the lease TTL, plus an etcd leader election if n1
		// led the control plane, plus polling. The measured figure is logged.
		took := c.WaitNode(n2, "n1", cluster.Down, 2*ttl+5*time.Second)
		t.Logf("n1 marked down %s after its kill returned (%s; lease TTL %s)", took.Round(10*time.Millisecond), m, ttl)

		// The survivors keep serving the control plane: reads and writes.
		drives, err := n2.Drives(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var up, down int
		for _, d := range drives {
			if d.State == cluster.Up {
				up++
			} else if d.Node == "n1" {
				down++
			}
		}
		if up != 8 || down != 4 {
			t.Fatalf("with n1 dead: %d drives up, %d of n1's down", up, down)
		}
		if _, err := n2.CreatePool(ctx, "during-outage", "mirror:2"); err != nil {
			t.Fatalf("control plane write with one node dead: %v", err)
		}
		full, err := n2.Status(ctx)
		st = full.Status
		if err != nil || st.Health != cluster.Degraded || !strings.Contains(strings.Join(st.Problems, "\n"), "node n1 is down") {
			t.Fatalf("status with n1 dead: %+v %v", st, err)
		}

		if err := c.Ctl.Start(ctx, "n1"); err != nil {
			t.Fatal(err)
		}
		c.WaitNode(n2, "n1", cluster.Up, time.Minute)
		c.WaitStatus(30*time.Second, func(s cluster.Status) bool { return s.Health == cluster.Healthy && s.DrivesUp == 12 })
		pools, err := c.NodeAdmin("n1").Pools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range pools {
			names = append(names, p.Name)
		}
		if strings.Join(names, ",") != "default,during-outage" {
			t.Fatalf("pools seen by the restarted node: %v", names)
		}
	})
}

// A graceful stop revokes the lease: the node shows down at once.
func TestGracefulStopShowsDownAtOnce(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 1, LeaseTTL: 30 * time.Second})
		ctx := context.Background()
		if err := c.Ctl.Stop(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
		// Far below the 30 s TTL: the lease was revoked, not left to expire.
		c.WaitNode(c.NodeAdmin("n1"), "n3", cluster.Down, 5*time.Second)
	})
}

// The same directory brings the same cluster back; a different shape is
// refused with a clear error.
func TestLocalUpRestartKeepsState(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2})
		ctx := context.Background()
		st := c.WaitStatus(30*time.Second, func(s cluster.Status) bool { return s.DrivesUp == 6 })
		if _, err := c.Admin.CreatePool(ctx, "kept", "ec:2+1"); err != nil {
			t.Fatal(err)
		}
		drives, _ := c.Admin.Drives(ctx)
		if _, err := c.Admin.SetDriveStatus(ctx, drives[0].ID, cluster.StatusSuspended); err != nil {
			t.Fatal(err)
		}
		c.Stop()

		out, err := exec.Command(harness.Binary(t), "local", "up", "--dir", c.Dir, "--nodes", "4").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "3 nodes x 2 drives") {
			t.Fatalf("reshaping an existing cluster directory: err %v, output:\n%s", err, out)
		}

		c2 := m.Start(t, harness.Options{Dir: c.Dir})
		st2 := c2.WaitStatus(30*time.Second, func(s cluster.Status) bool { return s.DrivesUp == 6 })
		if st2.ClusterID != st.ClusterID {
			t.Fatalf("cluster id changed across restart: %s -> %s", st.ClusterID, st2.ClusterID)
		}
		drives2, _ := c2.Admin.Drives(ctx)
		if len(drives2) != 6 || drives2[0].Status != cluster.StatusSuspended {
			t.Fatalf("drives after restart: %+v", drives2)
		}
		if _, err := c2.Admin.CreatePool(ctx, "kept", "ec:2+1"); err == nil {
			t.Fatal("pool created before the restart is gone")
		}
	})
}

// The CLI prints tables, JSON on request, and clear errors.
func TestCLI(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2})
		c.WaitStatus(30*time.Second, func(s cluster.Status) bool { return s.Health == cluster.Healthy })

		out, code := c.Weft("status")
		if code != 0 || !strings.Contains(out, "health    healthy") || !strings.Contains(out, "drives    6/6 up") {
			t.Fatalf("weft status (%d):\n%s", code, out)
		}
		out, code = c.Weft("node", "list", "--json")
		var nodes []cluster.Node
		if code != 0 || json.Unmarshal([]byte(out), &nodes) != nil || len(nodes) != 3 {
			t.Fatalf("weft node list --json (%d):\n%s", code, out)
		}
		for _, n := range nodes {
			if n.Live == nil || n.Live.PID <= 0 || n.AdminAddr == "" || n.GRPCAddr == "" {
				t.Fatalf("node without pid or addresses: %+v", n)
			}
		}
		out, code = c.Weft("drive", "list")
		if code != 0 || !strings.HasPrefix(out, "ID") || strings.Count(out, "\n") != 7 {
			t.Fatalf("weft drive list (%d):\n%s", code, out)
		}
		// Every node serves Prometheus metrics: drives and the job engine.
		n2 := c.NodeAdmin("n2")
		resp, err := n2.HTTP().Get(strings.TrimRight(n2.Base(), "/") + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, m := range []string{"weft_drive_ops_total", "weft_drive_free_bytes", "weft_job_coordinator", "weft_job_items_total"} {
			if !strings.Contains(string(body), m) {
				t.Errorf("/metrics lacks %s", m)
			}
		}
		out, code = c.Weft("pool", "create", "cold", "--protection", "mirror:3")
		if code != 0 || !strings.Contains(out, "pool cold created: protection mirror:3") {
			t.Fatalf("pool create (%d):\n%s", code, out)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"job", "types", "list"}, "integrityscan"},
			{[]string{"job", "settings", "--restripe-exclusive", "true"}, "restripe exclusive   true"},
			{[]string{"job", "settings", "--rebalance-threshold", "0"}, "rebalance threshold  off"},
			{[]string{"job", "events", "list"}, "ID  TIME"},
			{[]string{"job", "policies", "create", "nightly", "--default", "low", "--window", "mon-fri 20:00-06:00 high"}, "policy nightly: default low, 1 windows"},
			{[]string{"job", "policies", "list"}, "nightly"},
			{[]string{"job", "policies", "create", "gentle", "--default", "medium", "--client-p99", "5ms"}, "policy gentle: default medium, 0 windows, client p99 5ms"},
			{[]string{"job", "status"}, "coordinator  n"},
		} {
			if out, code := c.Weft(tc.args...); code != 0 || !strings.Contains(out, tc.want) {
				t.Errorf("weft %s: exit %d:\n%s\nwant %q", strings.Join(tc.args, " "), code, out, tc.want)
			}
		}
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"job", "start", "nosuchtype"}, 1, "unknown job type"},
			{[]string{"job", "start", "repair", "--priority", "11"}, 1, "priority"},
			{[]string{"job", "policies", "create", "bad", "--window", "mon-fri 25:00-06:00 high"}, 1, "25:00"},
			{[]string{"job", "policies", "create", "bad", "--client-p99", "-3ms"}, 2, `--client-p99: impact: invalid argument: client p99 "-3ms"`},
			{[]string{"job", "view", "abc"}, 2, "job id"},
			{[]string{"drive", "suspend", "bogus"}, 2, `drive id "bogus"`},
			{[]string{"drive", "suspend", "d999"}, 1, "drive d999"},
			{[]string{"pool", "create", "x", "--protection", "ec:4"}, 1, `"ec:4"`},
			{[]string{"pool", "create"}, 2, "one pool name"},
			{[]string{"status", "--bogus"}, 2, "unknown flag"},
			{[]string{"job", "settings", "--low-space-threshold", "60"}, 1, "low_space_threshold 60: use 0 (off) to 50"},
			{[]string{"job", "events", "list", "--limit", "0"}, 2, "--limit 0: use 1 to 1000"},
			// Job parameters are checked when the job is submitted.
			{[]string{"job", "start", "drain", "--param", "drives="}, 1, `drives=""`},
			{[]string{"job", "start", "drain", "--param", "drives=d-1,,"}, 1, `drives="d-1,,"`},
			{[]string{"job", "start", "drain", "--param", "drives=d999"}, 1, "no drive d999"},
			{[]string{"job", "start", "rebalance", "--param", "pool=nosuch"}, 1, `pool="nosuch": no such pool`},
			{[]string{"job", "start", "mediascan", "--param", "drives=d999"}, 1, "no drive d999"},
			{[]string{"job", "start", "treedelete", "--path", "/does-not-exist"}, 1, "no such directory"},
			{[]string{"job", "start", "integrityscan", "--param", "drives=d1"}, 1, `no parameter "drives"`},
			{[]string{"pool", "create", "wide", "--protection", "ec:32+8"}, 1, "needs 40 drives for each stripe"},
			{[]string{"job", "frobnicate"}, 2, `unknown command "frobnicate" for "weft job"`},
			{[]string{"local", "up", "--nodes", "0", "--dir", t.TempDir()}, 2, "--nodes 0"},
		} {
			out, code := c.Weft(tc.args...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("weft %s: exit %d, output %q; want exit %d containing %q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
			}
		}
	})
}

// The admin API answers bad input with a 4xx naming it, never a 500.
func TestAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	c := harness.Start(t, harness.Options{Nodes: 1, DrivesPerNode: 2})
	n1 := c.NodeAdmin("n1")
	base := strings.TrimRight(n1.Base(), "/")
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"GET", "/v1/files/1", "", 400, "LIN 1 is a dir"},
		{"GET", "/v1/files/abc", "", 400, "want a LIN"},
		{"POST", "/v1/drives", `{"node":"n1","path":"/tmp/x\u0000y"}`, 400, "control characters"},
		{"POST", "/v1/jobs", `{"type":"drain","params":{"drives":""}}`, 400, `drives=\"\"`},
		{"POST", "/v1/jobs", `{"type":"treedelete","params":{"path":"/does-not-exist"}}`, 400, "no such directory"},
		{"POST", "/v1/pools", `{"name":"wide","protection":"ec:32+8"}`, 400, "needs 40 drives"},
		{"POST", "/v1/job-policies", `{"name":"p","default":"low","client_p99":"-3ms"}`, 400, `client p99 \"-3ms\": want a duration from`},
		{"POST", "/v1/job-policies", `{"name":"p","default":"low","client_p99":"fast"}`, 400, `client p99 \"fast\": not a duration`},
	} {
		req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := n1.HTTP().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: %d %s; want %d containing %q", tc.method, tc.path, resp.StatusCode, body, tc.code, tc.want)
		}
	}
}

// A block stored through a node's block service and then damaged on disk
// reads back as corrupt, with an error that names the block.
func TestFlippedByteIsCorrupt(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 1})
		ctx := context.Background()
		drives, err := c.Admin.Drives(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d := drives[0]
		bc := c.DriveBlocks(d)
		data := bytes.Repeat([]byte("weft"), 300_000) // 1.2 MB: several 64 KiB segments
		hdr := drive.BlockHeader{ID: drive.NewBlockID(), Owner: 42, Stripe: 1, Unit: 2, Generation: 3}
		if err := bc.Put(ctx, d.ID, hdr, data); err != nil {
			t.Fatal(err)
		}
		got, _, err := bc.Get(ctx, d.ID, hdr.ID, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("clean read: %v", err)
		}
		id := hdr.ID.String()
		path := filepath.Join(d.Path, "blocks", id[:2], id)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(hdr.HeaderLength()) + 3*drive.SegmentSize + 17 // a byte in segment 3
		b := []byte{0}
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x01
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		f.Close()
		_, _, err = bc.Get(ctx, d.ID, hdr.ID, 0, -1)
		if !errors.Is(err, drive.ErrCorrupt) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), "segment 3") {
			t.Fatalf("read of a damaged block: %v", err)
		}
		// A range in an undamaged segment still reads.
		if got, _, err := bc.Get(ctx, d.ID, hdr.ID, 0, drive.SegmentSize); err != nil || !bytes.Equal(got, data[:drive.SegmentSize]) {
			t.Fatalf("undamaged range: %v", err)
		}
	})
}
