package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
)

// TestNFSUsageErrors: mistakes in weft nfs and weft server --nfs are
// usage errors (exit status 2) naming the input, caught before any
// cluster is asked (none runs here).
func TestNFSUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nfs", "frob"}, `unknown command "frob" for "weft nfs"`},
		{[]string{"nfs", "export", "add"}, "takes the exported directory's PATH"},
		{[]string{"nfs", "export", "add", "projects"}, `export path "projects": want an absolute path`},
		{[]string{"nfs", "export", "add", "/projects/"}, "want it clean, as /projects"},
		{[]string{"nfs", "export", "add", "/p", "--clients", "10.0.0.0/24,bogus"}, `clients: "bogus" is neither an IP address nor a CIDR`},
		{[]string{"nfs", "export", "add", "/p", "--anon-uid", "0"}, "--anon-uid 0: the squashed identity cannot be root"},
		{[]string{"nfs", "export", "add", "/p", "--anon-gid", "-1"}, `invalid argument "-1" for "--anon-gid"`},
		{[]string{"nfs", "export", "add", "/p", "--no-root-squash", "--anon-uid", "7"}, "give one or the other"},
		{[]string{"nfs", "export", "remove", "a/b"}, `export path "a/b"`},
		{[]string{"nfs", "export", "list", "extra"}, "takes no arguments"},
		{[]string{"nfs", "status", "n1"}, "takes no arguments"},
		{[]string{"server", "--insecure", "--etcd-embed", "--data-dir", t.TempDir(), "--nfs", "127.0.0.1"}, `--nfs "127.0.0.1": want HOST:PORT`},
		{[]string{"server", "--insecure", "--etcd-embed", "--data-dir", t.TempDir(), "--nfs", "nfs.example:2049"}, `--nfs "nfs.example:2049"`},
		{[]string{"server", "--insecure", "--etcd-embed", "--data-dir", t.TempDir(), "--nfs", "127.0.0.1:2049,127.0.0.1:2049"}, "listed twice"},
	} {
		_, err := run(tc.args...)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("weft %s: %v; want a usage error saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestPrintNFS: the export table shows the default export while none is
// configured, and each export's clients, access and root; the status
// tables sum a node's rates, mark a node without a gateway and list
// clients and procedures.
func TestPrintNFS(t *testing.T) {
	var b strings.Builder
	if err := printNFSExports(&b, admin.NFSExportList{NFSExports: cluster.NFSExports{Exports: []cluster.NFSExport{}}, Default: true,
		Effective: []cluster.NFSExport{cluster.DefaultNFSExport}}); err != nil {
		t.Fatal(err)
	}
	want := `no export configured: the gateways export "/" with the defaults
PATH  CLIENTS  ACCESS  ROOT
/     *        rw      squashed to 65534:65534
`
	if b.String() != want {
		t.Errorf("default exports:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	ex := []cluster.NFSExport{{Path: "/a", Clients: []string{"10.0.0.0/24", "10.0.1.7"}, ReadOnly: true, AnonUID: 1000, AnonGID: 100}, {Path: "/b", NoRootSquash: true}}
	if err := printNFSExports(&b, admin.NFSExportList{NFSExports: cluster.NFSExports{Version: 4, Exports: ex}, Effective: ex}); err != nil {
		t.Fatal(err)
	}
	want = `exports version 4
PATH  CLIENTS               ACCESS  ROOT
/a    10.0.0.0/24,10.0.1.7  ro      squashed to 1000:100
/b    *                     rw      root
`
	if b.String() != want {
		t.Errorf("exports:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	st := admin.NFSStatus{Nodes: []admin.NFSNodeStatus{
		{Node: "n1", Gateway: true, Listeners: []string{"127.0.0.1:2049"}, ExportsVersion: 4,
			Clients: []admin.NFSClient{{Addr: "127.0.0.1:901", Listener: "127.0.0.1:2049", Ops: 12, LastSeen: now.Add(-3 * time.Second)}},
			Ops:     []admin.NFSOp{{Procedure: "READ", Count: 10, Errors: 1, Seconds: 0.02, PerSecond: 2.5}, {Procedure: "WRITE", Count: 2, Seconds: 0.01, PerSecond: 0.5}}},
		{Node: "n2"},
	}}
	if err := printNFSStatus(&b, st, now); err != nil {
		t.Fatal(err)
	}
	want = `NODE  ADDRESS         EXPORTS  CLIENTS  OPS/S
n1    127.0.0.1:2049  v4       1        3.0
n2    -               -        -        -

NODE  CLIENT         ADDRESS         OPS  LAST SEEN
n1    127.0.0.1:901  127.0.0.1:2049  12   3s ago

NODE  PROCEDURE  OPS/S  OPS  ERRORS  AVG MS
n1    READ       2.5    10   1       2.00
n1    WRITE      0.5    2    0       5.00
`
	if b.String() != want {
		t.Errorf("status:\n%s\nwant\n%s", b.String(), want)
	}
}
