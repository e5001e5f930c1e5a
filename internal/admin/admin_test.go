package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

func newAPI(t *testing.T) (*Client, *cluster.Store) {
	t.Helper()
	store, err := cluster.Open(context.Background(), etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(Deps{Store: store, Node: NodeInfo{Name: "n1", PID: 7}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	return NewClient(srv.URL), store
}

// registerNodes registers recs as nodes that are up (each with a session
// closed at the end of the test).
func registerNodes(t *testing.T, store *cluster.Store, recs ...cluster.NodeRecord) {
	t.Helper()
	for _, rec := range recs {
		sess, err := store.RegisterNode(context.Background(), rec, cluster.NodeLive{PID: 1}, 10*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
	}
}

// peerAPI is another node's admin API answering v, as JSON, at path (any
// path if path is ""); it returns its URL.
func peerAPI(t *testing.T, path string, v any) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if path != "" && r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestAPIRoundTrips(t *testing.T) {
	ctx := context.Background()
	c, store := newAPI(t)
	if n, err := c.Node(ctx); err != nil || n.Name != "n1" || n.PID != 7 {
		t.Fatalf("node = %+v, %v", n, err)
	}
	var drives []cluster.DriveID
	for i := range 6 {
		id, _ := store.AllocDriveID(ctx)
		if _, err := store.RegisterDrive(ctx, cluster.DriveRecord{ID: id, Node: "n1", Path: fmt.Sprintf("/d%d", i), Class: "ssd", Pool: "fast"}); err != nil {
			t.Fatal(err)
		}
		drives = append(drives, id)
	}
	if _, err := c.CreatePool(ctx, "fast", "ec:4+2"); err != nil {
		t.Fatal(err)
	}
	var ae *Error
	if _, err := c.CreatePool(ctx, "fast", "ec:4+2"); !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		t.Fatalf("duplicate pool: %v", err)
	}
	if _, err := c.CreatePool(ctx, "slow", "raid6"); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "raid6") {
		t.Fatalf("bad protection: %v", err)
	}
	if _, err := c.CreatePool(ctx, "wide", "ec:32+8"); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "needs 40 drives") {
		t.Fatalf("too wide a protection: %v", err)
	}
	id := drives[0]
	d, err := c.SetDriveStatus(ctx, id, cluster.StatusSuspended)
	if err != nil || d.Status != cluster.StatusSuspended {
		t.Fatalf("suspend = %+v, %v", d, err)
	}
	if d, err = c.SetDriveStatus(ctx, id, cluster.StatusReady); err != nil || d.Status != cluster.StatusReady {
		t.Fatalf("resume = %+v, %v", d, err)
	}
	if _, err := c.SetDriveStatus(ctx, 99, cluster.StatusReady); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Fatalf("unknown drive: %v", err)
	}
	listed, err := c.Drives(ctx)
	if err != nil || len(listed) != 6 || listed[0].State != cluster.Down {
		t.Fatalf("drives = %+v, %v", listed, err)
	}
	pools, err := c.Pools(ctx)
	if err != nil || len(pools) != 1 || pools[0].Drives != 6 {
		t.Fatalf("pools = %+v, %v", pools, err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Health != cluster.Degraded || st.Drives != 6 {
		t.Fatalf("status = %+v, %v", st, err)
	}
}

func TestClientFailsOverToTheNextNode(t *testing.T) {
	c, _ := newAPI(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // a node that is down: connection refused
	c2 := NewClient(dead.URL + "," + c.Base())
	if _, err := c2.Nodes(context.Background()); err != nil {
		t.Fatalf("with one node down: %v", err)
	}
	if _, err := NewClient(dead.URL).Nodes(context.Background()); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("all down: %v", err)
	}
}

func TestDiscover(t *testing.T) {
	t.Setenv("WEFT_ADMIN", "")
	t.Chdir(t.TempDir())
	if _, err := Discover(""); !errors.Is(err, ErrNoCluster) {
		t.Fatalf("nothing configured: %v", err)
	}
	if a, _ := Discover("h:1"); a != "h:1" {
		t.Fatalf("flag: %q", a)
	}
	t.Setenv("WEFT_ADMIN", "h:2")
	if a, _ := Discover(""); a != "h:2" {
		t.Fatalf("env: %q", a)
	}
}
