package admin

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// TestNFSExportRoutes: a bad export is a 400 naming the field at fault
// and stores nothing; added exports are stored as versions, sorted; a
// path exported twice is a 409, one not exported a 404; with none left
// the default export of "/" is what the gateways serve.
func TestNFSExportRoutes(t *testing.T) {
	ctx := context.Background()
	c, store := newAPI(t)
	l, err := c.NFSExports(ctx)
	if err != nil || !l.Default || l.Version != 0 || len(l.Exports) != 0 || len(l.Effective) != 1 || l.Effective[0].Path != "/" {
		t.Fatalf("never configured: %+v %v", l, err)
	}
	for _, tc := range []struct {
		e    cluster.NFSExport
		want string
	}{
		{cluster.NFSExport{}, "export path is empty"},
		{cluster.NFSExport{Path: "projects"}, `export path "projects": want an absolute path`},
		{cluster.NFSExport{Path: "/a/../b"}, "want it clean, as /b"},
		{cluster.NFSExport{Path: "/p", Clients: []string{"10.0.0.0/24", "10.0.0.0/33"}}, `clients: "10.0.0.0/33"`},
		{cluster.NFSExport{Path: "/p", Clients: []string{"host.example"}}, `clients: "host.example"`},
	} {
		_, err := c.AddNFSExport(ctx, tc.e)
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Msg, tc.want) {
			t.Errorf("AddNFSExport(%+v) = %v; want a 400 saying %q", tc.e, err, tc.want)
		}
	}
	// A body with a field the API does not know is refused too, naming it.
	var v NFSExportList
	err = c.do(ctx, http.MethodPost, APIVersion+"/nfs/exports", map[string]any{"path": "/p", "readonly": true}, &v)
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Msg, `"readonly"`) {
		t.Errorf("an unknown field: %v; want a 400 naming it", err)
	}
	if x, _, err := store.NFSExports(ctx); err != nil || x.Version != 0 {
		t.Fatalf("refused changes stored something: %+v %v", x, err)
	}

	p := cluster.NFSExport{Path: "/projects", Clients: []string{"10.0.0.0/24", "10.0.1.7"}, AnonUID: 1000, AnonGID: 1000}
	if l, err = c.AddNFSExport(ctx, p); err != nil || l.Version != 1 || l.Default || len(l.Exports) != 1 || l.Exports[0].Path != "/projects" {
		t.Fatalf("add /projects: %+v %v", l, err)
	}
	if l, err = c.AddNFSExport(ctx, cluster.NFSExport{Path: "/archive", ReadOnly: true}); err != nil || l.Version != 2 || len(l.Exports) != 2 ||
		l.Exports[0].Path != "/archive" || !l.Exports[0].ReadOnly || len(l.Effective) != 2 {
		t.Fatalf("add /archive: %+v %v", l, err)
	}
	if _, err := c.AddNFSExport(ctx, cluster.NFSExport{Path: "/projects", ReadOnly: true}); !errors.As(err, &ae) || ae.Status != http.StatusConflict ||
		!strings.Contains(ae.Msg, "/projects is exported already") {
		t.Errorf("add /projects again: %v; want a 409", err)
	}
	x, _, err := store.NFSExports(ctx)
	if err != nil || x.Version != 2 || x.By == "" || x.Updated.IsZero() || len(x.Exports[1].Clients) != 2 || x.Exports[1].AnonUID != 1000 {
		t.Fatalf("stored: %+v %v", x, err)
	}
	for _, tc := range []struct{ path, want string }{{"", "path: missing"}, {"rel", `export path "rel"`}} {
		err := c.do(ctx, http.MethodDelete, APIVersion+"/nfs/exports?path="+tc.path, nil, &v)
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Msg, tc.want) {
			t.Errorf("remove %q: %v; want a 400 saying %q", tc.path, err, tc.want)
		}
	}
	if _, err := c.RemoveNFSExport(ctx, "/nope"); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Errorf("remove /nope: %v; want a 404", err)
	}
	if l, err = c.RemoveNFSExport(ctx, "/archive"); err != nil || l.Version != 3 || len(l.Exports) != 1 || l.Exports[0].Path != "/projects" {
		t.Fatalf("remove /archive: %+v %v", l, err)
	}
	if l, err = c.RemoveNFSExport(ctx, "/projects"); err != nil || l.Version != 4 || !l.Default || len(l.Effective) != 1 || !reflect.DeepEqual(l.Effective[0], cluster.DefaultNFSExport) {
		t.Fatalf("remove the last: %+v %v", l, err)
	}
}

// fakeNFS is a node's gateway for the handler.
type fakeNFS struct{ st NFSNodeStatus }

func (f fakeNFS) NFSStatus() NFSNodeStatus { return f.st }

// TestNFSStatus: GET /v1/nfs/status gathers this node's gateway, another
// node's through its admin API and a node without a gateway, sorted by
// name, and names a node whose admin address answers as another node.
func TestNFSStatus(t *testing.T) {
	ctx := context.Background()
	store, err := cluster.Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	answer := func(st NFSNodeStatus) string { return peerAPI(t, APIVersion+"/node/nfs", st) }
	seen := time.Now().UTC().Truncate(time.Second)
	n0 := answer(NFSNodeStatus{Node: "n0", Gateway: true, Listeners: []string{"127.0.0.1:2050"}, ExportsVersion: 3,
		Clients: []NFSClient{{Addr: "127.0.0.1:700", Listener: "127.0.0.1:2050", Ops: 5, LastSeen: seen}}, Ops: []NFSOp{{Procedure: "GETATTR", Count: 5, PerSecond: 0.5}}})
	n2 := answer(NFSNodeStatus{Node: "n2", Listeners: []string{}})
	liar := answer(NFSNodeStatus{Node: "n0"})
	registerNodes(t, store, cluster.NodeRecord{Name: "n0", GRPCAddr: "127.0.0.1:1", AdminAddr: n0}, cluster.NodeRecord{Name: "n1", GRPCAddr: "127.0.0.1:2"},
		cluster.NodeRecord{Name: "n2", GRPCAddr: "127.0.0.1:3", AdminAddr: n2}, cluster.NodeRecord{Name: "n3", GRPCAddr: "127.0.0.1:4", AdminAddr: liar})
	own := NFSNodeStatus{Gateway: true, Listeners: []string{"127.0.0.1:2049"}, ExportsVersion: 3, Clients: []NFSClient{}, Ops: []NFSOp{}}
	srv := httptest.NewServer(NewHandler(Deps{Store: store, Node: NodeInfo{Name: "n1", PID: 7}, Log: log, NFS: fakeNFS{own}}))
	t.Cleanup(srv.Close)
	st, err := NewClient(srv.URL).NFSStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 3 || st.Nodes[0].Node != "n0" || st.Nodes[1].Node != "n1" || st.Nodes[2].Node != "n2" {
		t.Fatalf("nodes: %+v", st.Nodes)
	}
	if n := st.Nodes[0]; !n.Gateway || n.Listeners[0] != "127.0.0.1:2050" || len(n.Clients) != 1 || !n.Clients[0].LastSeen.Equal(seen) || n.Ops[0].PerSecond != 0.5 {
		t.Errorf("n0 (asked through its admin API): %+v", n)
	}
	if n := st.Nodes[1]; !n.Gateway || n.Listeners[0] != "127.0.0.1:2049" || n.ExportsVersion != 3 {
		t.Errorf("n1 (this node): %+v", n)
	}
	if n := st.Nodes[2]; n.Gateway {
		t.Errorf("n2 has no gateway: %+v", n)
	}
	if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], `node n3: its admin address`) || !strings.Contains(st.Errors[0], `answered by node "n0"`) {
		t.Errorf("errors: %q", st.Errors)
	}
	// A node without a gateway answers for itself with Gateway false.
	plain := httptest.NewServer(NewHandler(Deps{Store: store, Node: NodeInfo{Name: "n9"}, Log: log}))
	t.Cleanup(plain.Close)
	var mine NFSNodeStatus
	if err := NewClient(plain.URL).do(ctx, http.MethodGet, APIVersion+"/node/nfs", nil, &mine); err != nil || mine.Gateway || mine.Node != "n9" {
		t.Errorf("a node without a gateway: %+v %v", mine, err)
	}
}
