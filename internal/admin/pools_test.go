package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/meta"
)

// newPoolAPI returns an API over a store with four ssd drives in pool
// "default" and a namespace fake.
func newPoolAPI(t *testing.T, ns *fakeNS) (*Client, *cluster.Store, []cluster.DriveID) {
	t.Helper()
	ctx := context.Background()
	store, err := cluster.Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreatePool(ctx, "default", "mirror:2", true); err != nil {
		t.Fatal(err)
	}
	var ids []cluster.DriveID
	for i := range 4 {
		id, _ := store.AllocDriveID(ctx)
		if _, err := store.RegisterDrive(ctx, cluster.DriveRecord{ID: id, Node: "n1", Path: fmt.Sprintf("/d%d", i), Class: "ssd", Pool: "default"}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	srv := httptest.NewServer(NewHandler(Deps{Store: store, Namespace: ns, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	return NewClient(srv.URL), store, ids
}

// wantStatus fails unless err is an API error with status code and a
// message containing part.
func wantStatus(t *testing.T, what string, err error, code int, part string) {
	t.Helper()
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != code || !strings.Contains(ae.Msg, part) {
		t.Fatalf("%s: err = %v, want HTTP %d with %q", what, err, code, part)
	}
}

func TestPoolRoutes(t *testing.T) {
	ctx := context.Background()
	ns := &fakeNS{usage: map[string]meta.Usage{"default": {Inodes: 3, Bytes: 100, Allocated: 200}}}
	c, _, _ := newPoolAPI(t, ns)
	p, err := c.CreatePoolSpec(ctx, "fast", cluster.PoolSpec{Protection: "mirror:2", Class: "ssd", High: 85, Low: 60})
	if err != nil || p.Class != "ssd" || p.High != 85 || p.Low != 60 {
		t.Fatalf("create = %+v, %v", p, err)
	}
	_, err = c.CreatePoolSpec(ctx, "x", cluster.PoolSpec{Protection: "mirror:2", Class: "floppy"})
	wantStatus(t, "bad class", err, http.StatusBadRequest, `class "floppy"`)
	_, err = c.CreatePoolSpec(ctx, "x", cluster.PoolSpec{Protection: "mirror:2", High: 40, Low: 50})
	wantStatus(t, "bad thresholds", err, http.StatusBadRequest, "thresholds 40,50")
	if p, err = c.ModifyPool(ctx, "fast", cluster.PoolSpec{High: 95, Low: 90}); err != nil || p.High != 95 || p.Low != 90 || p.Class != "ssd" {
		t.Fatalf("modify = %+v, %v", p, err)
	}
	_, err = c.ModifyPool(ctx, "nope", cluster.PoolSpec{Class: "hdd"})
	wantStatus(t, "modify unknown", err, http.StatusNotFound, "pool nope")
	views, err := c.PoolViews(ctx)
	if err != nil || len(views) != 2 {
		t.Fatalf("list = %+v, %v", views, err)
	}
	if d := views[0]; d.Name != "default" || !d.UsageKnown || d.Inodes != 3 || d.Allocated != 200 || d.Drives != 4 {
		t.Fatalf("default = %+v", d)
	}
	err = c.DeletePool(ctx, "default")
	wantStatus(t, "delete with files", err, http.StatusConflict, "still holds 3 files and directories")
	ns.usage = nil
	err = c.DeletePool(ctx, "default")
	wantStatus(t, "delete with drives", err, http.StatusConflict, "still has drives d1, d2, d3, d4")
	if err := c.DeletePool(ctx, "fast"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "delete twice", c.DeletePool(ctx, "fast"), http.StatusNotFound, "pool fast")
}

// The file routes check what they can before touching the file; without
// a job engine they answer 503 (the cluster test runs them end to end).
func TestFileLayoutRoutesNeedJobs(t *testing.T) {
	ctx := context.Background()
	ns := &fakeNS{attrs: map[meta.LIN]meta.Attr{5: {LIN: 5, Type: meta.TypeFile, Pool: "default"}}}
	c, _, _ := newPoolAPI(t, ns)
	_, err := c.SetFilePool(ctx, 5, "default")
	wantStatus(t, "no engine", err, http.StatusServiceUnavailable, "no job engine")
	if ns.attrs[5].Pool != "default" {
		t.Fatalf("attrs changed: %+v", ns.attrs[5])
	}
}
