package tests

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/local"
	"github.com/weftfs/weft/tests/harness"
)

// TestNFSGatewayOps: a cluster started with --nfs serves NFS on an
// address of each node's own (printed as a libnfs URL, in DIR/nfs.addrs
// and the control API), and weft nfs status lists every node's listener;
// weft nfs export add, list and remove change the exports configuration
// (bad input is a usage error, a second export of a path and the removal
// of one not exported are refused), every gateway applies each version,
// a node killed and started again serves its address again, and the
// nodes' /metrics carry the gateway. With libnfs's nfs-ls installed, a
// listing through n1 shows as n1's client and MOUNT in the status, and
// the gateways stop serving "/" once the exports leave it out, and
// serve it again with the default export. The protocol itself is
// internal/gateway/nfs's business, tested there.
func TestNFSGatewayOps(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.ProcessByDefault, testNFSGatewayOps)
}

func testNFSGatewayOps(t *testing.T, m harness.Mode) {
	c := m.Start(t, harness.Options{Nodes: 2, DrivesPerNode: 1, NFS: true})
	addrs := c.NFSAddrs()
	if len(addrs) != 2 || addrs["n1"] == "" || addrs["n2"] == "" || addrs["n1"] == addrs["n2"] {
		t.Fatalf("NFS addresses %v: want one of its own for n1 and n2", addrs)
	}
	nodes, err := c.Ctl.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.NFSAddr != addrs[n.Name] {
			t.Errorf("control API: node %s NFS address %q; nfs.addrs says %q", n.Name, n.NFSAddr, addrs[n.Name])
		}
		if url := local.NFSURL(addrs[n.Name]); !strings.Contains(c.Output(), "nfs: "+n.Name+" "+url) {
			t.Errorf("weft local up did not print node %s's URL %s:\n%s", n.Name, url, c.Output())
		}
		conn, err := net.DialTimeout("tcp", addrs[n.Name], 5*time.Second)
		if err != nil {
			t.Errorf("node %s's NFS address %s: %v", n.Name, addrs[n.Name], err)
			continue
		}
		conn.Close()
	}
	if out, code := c.Weft("local", "node", "list", "--dir", c.Dir); code != 0 || !strings.Contains(out, " NFS ") || !strings.Contains(out, " "+addrs["n2"]+" ") {
		t.Errorf("weft local node list (exit %d) lacks the NFS addresses:\n%s", code, out)
	}
	waitApplied := func(version uint64) admin.NFSStatus {
		t.Helper()
		var st admin.NFSStatus
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, code := c.Weft("nfs", "status", "--json")
			if code != 0 {
				t.Fatalf("weft nfs status --json: exit %d: %s", code, out)
			}
			st = admin.NFSStatus{}
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatalf("weft nfs status --json: %v\n%s", err, out)
			}
			applied := len(st.Nodes) == 2
			for _, n := range st.Nodes {
				applied = applied && n.ExportsVersion == version
			}
			if applied {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("exports version %d not applied by every gateway in 30 s: %+v", version, st)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	st := waitApplied(0)
	for _, n := range st.Nodes {
		if !n.Gateway || len(n.Listeners) != 1 || n.Listeners[0] != addrs[n.Node] {
			t.Errorf("status of %s: %+v; want a gateway on %s", n.Node, n, addrs[n.Node])
		}
	}
	// With libnfs's nfs-ls (Debian's libnfs-utils), a client of n1: the
	// status then shows it, and its MOUNT, under n1.
	_, err = exec.LookPath("nfs-ls")
	ls := err == nil
	if !ls {
		t.Log("no nfs-ls here (libnfs-utils): the gateway is not asked to serve a client")
	} else {
		if out, err := nfsLs(t, addrs["n1"]); err != nil {
			t.Fatalf("nfs-ls / through n1 (the default export): %v\n%s", err, out)
		}
		st = waitApplied(0)
		n1 := st.Nodes[0]
		mounts := 0
		for _, o := range n1.Ops {
			if o.Procedure == "MOUNT" {
				mounts = int(o.Count)
			}
		}
		if n1.Node != "n1" || len(n1.Clients) == 0 || n1.Clients[0].Listener != addrs["n1"] || n1.Clients[0].LastSeen.IsZero() || mounts == 0 {
			t.Errorf("n1's status after nfs-ls: %+v; want its client and its MOUNT", n1)
		}
	}
	out, code := c.Weft("nfs", "status")
	for _, n := range []string{"n1", "n2"} {
		if code != 0 || !regexp.MustCompile(`(?m)^`+n+` +`+regexp.QuoteMeta(addrs[n])+` +default +[0-9]+ +[0-9]+\.[0-9]$`).MatchString(out) {
			t.Errorf("weft nfs status (exit %d) lacks node %s on %s:\n%s", code, n, addrs[n], out)
		}
	}
	if out, code := c.Weft("nfs", "export", "list"); code != 0 || !strings.Contains(out, `no export configured: the gateways export "/"`) {
		t.Errorf("weft nfs export list before any export (exit %d):\n%s", code, out)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"nfs", "export", "add", "projects"}, "want an absolute path"},
		{[]string{"nfs", "export", "add", "/projects", "--clients", "10.0.0.0/99"}, `"10.0.0.0/99" is neither an IP address nor a CIDR`},
		{[]string{"nfs", "export", "remove", "projects/"}, `export path "projects/"`},
	} {
		if out, code := c.Weft(bad.args...); code != 2 || !strings.Contains(out, bad.want) {
			t.Errorf("weft %s: exit %d, %q; want exit 2 saying %q", strings.Join(bad.args, " "), code, out, bad.want)
		}
	}
	if out, code := c.Weft("nfs", "export", "add", "/projects", "--clients", "10.0.0.0/24,127.0.0.1", "--read-only"); code != 0 ||
		!strings.Contains(out, "/projects  10.0.0.0/24,127.0.0.1  ro      squashed to 65534:65534") {
		t.Fatalf("weft nfs export add /projects (exit %d):\n%s", code, out)
	}
	if out, code := c.Weft("nfs", "export", "add", "/", "--no-root-squash"); code != 0 || !strings.Contains(out, "exports version 2") {
		t.Fatalf("weft nfs export add / (exit %d):\n%s", code, out)
	}
	if out, code := c.Weft("nfs", "export", "add", "/projects"); code != 1 || !strings.Contains(out, "/projects is exported already") {
		t.Errorf("a second export of /projects: exit %d, %q; want exit 1, refused", code, out)
	}
	out, code = c.Weft("nfs", "export", "list", "--json")
	var l admin.NFSExportList
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
		t.Fatalf("weft nfs export list --json (exit %d):\n%s", code, out)
	}
	if l.Version != 2 || l.Default || len(l.Exports) != 2 || l.Exports[0].Path != "/" || !l.Exports[0].NoRootSquash ||
		l.Exports[1].Path != "/projects" || !l.Exports[1].ReadOnly || strings.Join(l.Exports[1].Clients, ",") != "10.0.0.0/24,127.0.0.1" {
		t.Errorf("exports: %+v", l)
	}
	waitApplied(2)
	if out, code := c.Weft("nfs", "export", "remove", "/nope"); code != 1 || !strings.Contains(out, "/nope is not exported") {
		t.Errorf("weft nfs export remove /nope: exit %d, %q; want exit 1, not exported", code, out)
	}
	if out, code := c.Weft("nfs", "export", "remove", "/"); code != 0 {
		t.Fatalf("weft nfs export remove / (exit %d):\n%s", code, out)
	}
	waitApplied(3)
	if ls {
		// Only /projects is exported now, to 10.0.0.0/24 and 127.0.0.1,
		// and it does not exist: "/" is not mounted any more.
		if out, err := nfsLs(t, addrs["n2"]); err == nil {
			t.Errorf("nfs-ls / through n2 with / no longer exported: %s", out)
		}
	}
	if out, code := c.Weft("nfs", "export", "remove", "/projects"); code != 0 {
		t.Fatalf("weft nfs export remove /projects (exit %d):\n%s", code, out)
	}
	if out, code := c.Weft("nfs", "export", "list"); code != 0 || !strings.Contains(out, `no export configured: the gateways export "/"`) {
		t.Errorf("weft nfs export list after removing every export (exit %d):\n%s", code, out)
	}
	waitApplied(4)
	if ls {
		if out, err := nfsLs(t, addrs["n2"]); err != nil {
			t.Errorf("nfs-ls / through n2 with the default export again: %v\n%s", err, out)
		}
	}

	// A node killed and started again serves its address again, and
	// applies the exports as they are.
	if err := c.Ctl.Kill(t.Context(), "n2"); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", addrs["n2"], 5*time.Second); err == nil {
		conn.Close()
		t.Errorf("a killed node's NFS address %s still accepts connections", addrs["n2"])
	}
	if err := c.Ctl.Start(t.Context(), "n2"); err != nil {
		t.Fatal(err)
	}
	st = waitApplied(4)
	if n := st.Nodes[1]; n.Node != "n2" || !n.Gateway || len(n.Listeners) != 1 || n.Listeners[0] != addrs["n2"] {
		t.Errorf("n2 after its restart: %+v", n)
	}
	for _, n := range []string{"n1", "n2"} {
		a := c.NodeAdmin(n)
		resp, err := a.HTTP().Get(a.Base() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, m := range []string{"weft_nfs_addresses 1", "weft_nfs_exports_version 4", `weft_worker_state{state="running",worker="nfs ` + addrs[n] + `"} 1`} {
			if !strings.Contains(string(body), m) {
				t.Errorf("node %s's /metrics lacks %s", n, m)
			}
		}
	}
}

// nfsLs lists the root of the gateway at addr with libnfs's nfs-ls.
func nfsLs(t *testing.T, addr string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nfs-ls", local.NFSURL(addr)).CombinedOutput()
	return string(out), err
}
