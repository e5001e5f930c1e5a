package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/pki"
)

func TestAddedDrivesFile(t *testing.T) {
	dir := t.TempDir()
	if got, err := ReadAddedDrives(dir); err != nil || got != nil {
		t.Fatalf("missing file: %v, %v", got, err)
	}
	want := []AddedDrive{
		{Path: "/a", Class: "ssd", Pool: "default", ID: "d4", Added: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{Path: "/b", Class: "hdd", Pool: "slow", Capacity: 64 << 20, ID: "d5", Added: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)},
	}
	if err := WriteAddedDrives(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadAddedDrives(dir)
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}
	b, _ := os.ReadFile(filepath.Join(dir, AddedDrivesFile))
	if !strings.Contains(string(b), `"v": 1`) {
		t.Errorf("file has no version 1 marker:\n%s", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("data dir holds %d entries after a write, want only the file (no temp files)", len(ents))
	}

	path := filepath.Join(dir, AddedDrivesFile)
	for _, tc := range []struct {
		name, body string
		want       error
		mention    string
	}{
		{"newer", `{"v": 2, "drives": []}`, ErrAddedDrivesVersion, "version 2"},
		{"unversioned", `{"drives": []}`, ErrConfig, "no version"},
		{"garbage", `{"v": 1, "drives": [`, ErrConfig, path},
		{"relative", `{"v": 1, "drives": [{"path": "rel", "class": "ssd", "pool": "p"}]}`, ErrConfig, `"rel"`},
		{"no pool", `{"v": 1, "drives": [{"path": "/x", "class": "ssd"}]}`, ErrConfig, `"/x"`},
	} {
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadAddedDrives(dir)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.mention) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: ReadAddedDrives = %v; want %v naming the file and %q", tc.name, err, tc.want, tc.mention)
		}
	}
}

// testNode is one node started in-process against a test etcd.
type testNode struct {
	t   *testing.T
	cfg Config
	s   *Server
	api *admin.Client
}

func startTestNode(t *testing.T, cfg Config) *testNode {
	t.Helper()
	n := &testNode{t: t, cfg: cfg}
	n.start()
	return n
}

func (n *testNode) start() {
	n.t.Helper()
	s, err := Start(context.Background(), n.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		n.t.Fatalf("start node %s: %v", n.cfg.Name, err)
	}
	n.s = s
	n.api = adminClient(n.t, n.cfg.PKIDir, s.AdminAddr())
	n.t.Cleanup(n.stop)
}

func (n *testNode) stop() {
	if n.s == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = n.s.Wait(ctx)
	n.s = nil
}

// nodeConfig configures node name of a test etcd cluster of
// etcdtest.NewTLSCluster, with a node certificate from its CA.
func nodeConfig(t *testing.T, name string, etcd *etcdtest.Cluster, root string) Config {
	t.Helper()
	if _, err := pki.IssueTo(etcd.PKI, etcd.PKI, pki.Identity{Kind: pki.KindNode, Name: name}, pki.DefaultHosts(""), 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	return Config{
		Name: name, DataDir: filepath.Join(root, name), GRPCAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		Etcd:          EtcdConfig{Endpoints: etcd.Endpoints},
		Drives:        []DriveSpec{{Path: filepath.Join(root, name, "disk0")}},
		UsageInterval: time.Hour, // published at add and at start; no ticks needed
		PKIDir:        etcd.PKI,
	}
}

// adminClient returns a client of addr's admin API as an administrator
// of the CA in dir.
func adminClient(t *testing.T, dir, addr string) *admin.Client {
	t.Helper()
	id := pki.Identity{Kind: pki.KindAdmin, Name: "test"}
	if cert, _ := pki.Paths(dir, id); !exists(cert) {
		if _, err := pki.IssueTo(dir, dir, id, nil, 0, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	src, err := pki.NewSource(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	return admin.NewClient(addr, admin.WithTLS(src.ClientTLS("")))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func findDrive(t *testing.T, api *admin.Client, id cluster.DriveID) cluster.Drive {
	t.Helper()
	drives, err := api.Drives(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range drives {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("drive %v not listed: %+v", id, drives)
	return cluster.Drive{}
}

func TestAddDriveRuntime(t *testing.T) {
	ctx := context.Background()
	etcd := etcdtest.NewTLSCluster(t, 1)
	root := t.TempDir()
	cfg1, cfg2 := nodeConfig(t, "n1", etcd, root), nodeConfig(t, "n2", etcd, root) // both known when n1 enables etcd's authentication
	n1 := startTestNode(t, cfg1)
	n2 := startTestNode(t, cfg2)

	// Added through n1's API, routed to n2.
	path := filepath.Join(root, "n2", "disk9")
	r, err := n1.api.AddDrive(ctx, admin.AddDriveRequest{Node: "n2", Path: path, Class: "hdd", Pool: "extra", Capacity: 64 << 20})
	if err != nil {
		t.Fatalf("drive add: %v", err)
	}
	if r.Drive.Node != "n2" || r.Drive.Path != path || r.Drive.Pool != "extra" || r.Drive.Class != "hdd" ||
		r.Capacity != 64<<20 || r.Drive.Status != cluster.StatusReady || r.Drive.ID == 0 {
		t.Fatalf("drive add reply %+v", r)
	}
	id := r.Drive.ID
	d := findDrive(t, n1.api, id)
	if d.State != cluster.Up || d.Live == nil || d.Live.TotalBytes != 64<<20 || d.Live.CapacityBytes != 64<<20 {
		t.Fatalf("added drive listed as %+v (live %+v)", d, d.Live)
	}
	if _, err := n2.s.blocks.Drive(drive.ID(id)); err != nil {
		t.Fatalf("n2's block service does not serve the added drive: %v", err)
	}
	if _, err := n1.api.Pools(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := n1.s.store.GetPool(ctx, "extra"); err != nil || p.Protection != DefaultProtection {
		t.Fatalf("pool extra: %+v, %v; want it created with the default protection", p, err)
	}
	added, err := ReadAddedDrives(n2.cfg.DataDir)
	if err != nil || len(added) != 1 || added[0].Path != path || added[0].Capacity != 64<<20 || added[0].ID != id.String() {
		t.Fatalf("n2's added-drives file: %+v, %v", added, err)
	}

	// Refusals, each naming the path and the reason, and changing nothing.
	foreign := filepath.Join(root, "foreign")
	os.MkdirAll(foreign, 0o755)
	os.WriteFile(filepath.Join(foreign, "photo.jpg"), []byte("x"), 0o644)
	otherCluster := filepath.Join(root, "other-cluster")
	od, err := drive.Open(otherCluster, drive.Options{ClusterID: "c-other", Node: "n2", Class: drive.ClassSSD, AllocID: func() (drive.ID, error) { return 1, nil }})
	if err != nil {
		t.Fatal(err)
	}
	od.Close()
	n1Drive := n1.cfg.Drives[0].Path
	for _, tc := range []struct {
		name    string
		req     admin.AddDriveRequest
		status  int
		mention []string
	}{
		{"same path twice", admin.AddDriveRequest{Node: "n2", Path: path}, http.StatusConflict, []string{path, "already drive " + id.String()}},
		{"inside a drive", admin.AddDriveRequest{Node: "n2", Path: filepath.Join(path, "sub")}, http.StatusConflict, []string{"inside drive"}},
		{"another node's drive", admin.AddDriveRequest{Node: "n2", Path: n1Drive}, http.StatusConflict, []string{n1Drive, `node "n1"`}},
		{"another cluster's drive", admin.AddDriveRequest{Node: "n2", Path: otherCluster}, http.StatusConflict, []string{otherCluster, "c-other"}},
		{"foreign files", admin.AddDriveRequest{Node: "n2", Path: foreign}, http.StatusConflict, []string{foreign, "photo.jpg"}},
		{"data dir", admin.AddDriveRequest{Node: "n2", Path: n2.cfg.DataDir}, http.StatusConflict, []string{"own state"}},
		{"relative", admin.AddDriveRequest{Node: "n2", Path: "disk7"}, http.StatusBadRequest, []string{`"disk7"`, "absolute"}},
		{"NUL byte", admin.AddDriveRequest{Node: "n2", Path: filepath.Join(root, "x\x00y")}, http.StatusBadRequest, []string{"control characters"}},
		{"a file in the way", admin.AddDriveRequest{Node: "n2", Path: filepath.Join(foreign, "photo.jpg", "d")}, http.StatusBadRequest, []string{"cannot use", "photo.jpg"}},
		{"bad class", admin.AddDriveRequest{Node: "n2", Path: filepath.Join(root, "x"), Class: "tape"}, http.StatusBadRequest, []string{"tape"}},
		{"unknown node", admin.AddDriveRequest{Node: "n7", Path: filepath.Join(root, "x")}, http.StatusNotFound, []string{`"n7"`}},
		{"no node", admin.AddDriveRequest{Path: filepath.Join(root, "x")}, http.StatusBadRequest, []string{"no node"}},
	} {
		_, err := n1.api.AddDrive(ctx, tc.req)
		var ae *admin.Error
		if !errors.As(err, &ae) || ae.Status != tc.status {
			t.Errorf("%s: drive add = %v; want HTTP %d", tc.name, err, tc.status)
			continue
		}
		for _, m := range tc.mention {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, m)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "x")); err == nil {
		t.Errorf("a refused drive add left directory %s behind", filepath.Join(root, "x"))
	}
	if after, _ := ReadAddedDrives(n2.cfg.DataDir); len(after) != 1 {
		t.Fatalf("refused adds changed the added-drives file: %+v", after)
	}
	if drives, _ := n1.api.Drives(ctx); len(drives) != 3 {
		t.Fatalf("refused adds changed the drive list: %+v", drives)
	}

	// A node that is down is refused by name.
	n1.stop()
	_, err = n2.api.AddDrive(ctx, admin.AddDriveRequest{Node: "n1", Path: filepath.Join(root, "y")})
	var ae *admin.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "n1 is down") {
		t.Fatalf("drive add on a down node = %v; want 503 naming the node", err)
	}

	// The drive comes back when n2 restarts, with its capacity; listed in
	// both the config and the file, it is opened once (as configured).
	n2.stop()
	n2.start()
	d = findDrive(t, n2.api, id)
	if d.State != cluster.Up || d.Live.TotalBytes != 64<<20 || d.Path != path {
		t.Fatalf("after a restart the added drive is %+v (live %+v)", d, d.Live)
	}
	if _, err := n2.s.blocks.Drive(drive.ID(id)); err != nil {
		t.Fatalf("after a restart n2 does not serve the added drive: %v", err)
	}
	n2.stop()
	n2.cfg.Drives = append(n2.cfg.Drives, DriveSpec{Path: path, Class: "hdd", Pool: "extra", Capacity: 32 << 20})
	n2.start()
	if got := len(n2.s.openDriveList()); got != 2 {
		t.Fatalf("drive both configured and added: n2 has %d drives open, want 2", got)
	}
	if d = findDrive(t, n2.api, id); d.Live.TotalBytes != 32<<20 {
		t.Fatalf("drive both configured and added: capacity %d, want the configured 32 MiB", d.Live.TotalBytes)
	}

	// A newer added-drives file stops the node from starting.
	n2.stop()
	os.WriteFile(filepath.Join(n2.cfg.DataDir, AddedDrivesFile), []byte(`{"v": 9, "drives": []}`), 0o644)
	if s, err := Start(ctx, n2.cfg, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrAddedDrivesVersion) {
		if s != nil && err == nil {
			s.Wait(canceled())
		}
		t.Fatalf("start with a newer added-drives file = %v; want ErrAddedDrivesVersion", err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestAddDriveNeedsDataDir(t *testing.T) {
	etcd := etcdtest.NewTLSCluster(t, 1)
	root := t.TempDir()
	cfg := nodeConfig(t, "n1", etcd, root)
	cfg.DataDir = ""
	n := startTestNode(t, cfg)
	_, err := n.api.AddDrive(context.Background(), admin.AddDriveRequest{Node: "n1", Path: filepath.Join(root, "d")})
	var ae *admin.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("drive add without a data dir = %v; want 409 naming --data-dir", err)
	}
}
