package admin

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/job"
)

// The callback routes: add (201), a bad field (400 naming it), a name
// taken (409), list, delete, a name not there (404); and one event with
// its runs.
func TestCallbackRoutes(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.New(t)
	store, err := cluster.Open(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := job.New(job.Config{Client: cli, Node: "n1", Env: nopEnv{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(Deps{Store: store, Jobs: eng, Node: NodeInfo{Name: "n1"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL)

	req := AddCallbackRequest{Name: "page", Events: []string{job.EventLowSpace, job.EventPoolThreshold}, Command: "/usr/local/bin/page", Args: []string{"%pool"}, Timeout: "90s"}
	cb, err := c.AddCallback(ctx, req)
	if err != nil || cb.Timeout != 90*time.Second || cb.Created.IsZero() || len(cb.Events) != 2 {
		t.Fatalf("add = %+v, %v", cb, err)
	}
	resp, err := http.Post(srv.URL+"/v1/callbacks", "application/json", bytes.NewBufferString(`{"name":"all","events":["all"],"command":"/bin/true"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/callbacks: %d, want 201", resp.StatusCode)
	}
	for _, tc := range []struct {
		what string
		req  AddCallbackRequest
		code int
		part string
	}{
		{"name taken", req, http.StatusConflict, "callback page"},
		{"bad name", AddCallbackRequest{Name: "Page!", Events: []string{"low-space"}, Command: "/bin/true"}, http.StatusBadRequest, `callback name "Page!"`},
		{"bad kind", AddCallbackRequest{Name: "x", Events: []string{"lowspace"}, Command: "/bin/true"}, http.StatusBadRequest, `event kind "lowspace"`},
		{"no kind", AddCallbackRequest{Name: "x", Command: "/bin/true"}, http.StatusBadRequest, "no event kinds"},
		{"relative command", AddCallbackRequest{Name: "x", Events: []string{"all"}, Command: "page.sh"}, http.StatusBadRequest, `command "page.sh"`},
		{"bad timeout", AddCallbackRequest{Name: "x", Events: []string{"all"}, Command: "/bin/true", Timeout: "soon"}, http.StatusBadRequest, `timeout "soon"`},
		{"long timeout", AddCallbackRequest{Name: "x", Events: []string{"all"}, Command: "/bin/true", Timeout: "1h"}, http.StatusBadRequest, "timeout 1h0m0s"},
	} {
		_, err := c.AddCallback(ctx, tc.req)
		wantStatus(t, tc.what, err, tc.code, tc.part)
	}
	resp, err = http.Post(srv.URL+"/v1/callbacks", "application/json", bytes.NewBufferString(`{"name":"x","events":["all"],"command":"/bin/true","shell":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "shell") {
		t.Fatalf("unknown field: %d %s", resp.StatusCode, body)
	}

	cbs, err := c.Callbacks(ctx)
	if err != nil || len(cbs) != 2 || cbs[0].Name != "all" || cbs[1].Name != "page" || cbs[1].Args[0] != "%pool" {
		t.Fatalf("list = %+v, %v", cbs, err)
	}
	if err := c.DeleteCallback(ctx, "page"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "delete again", c.DeleteCallback(ctx, "page"), http.StatusNotFound, "callback page")
	wantStatus(t, "delete a bad name", c.DeleteCallback(ctx, "Pa ge"), http.StatusBadRequest, `callback name "Pa ge"`)
	if cbs, err = c.Callbacks(ctx); err != nil || len(cbs) != 1 {
		t.Fatalf("list after delete = %+v, %v", cbs, err)
	}

	ev, err := eng.RecordEvent(ctx, job.Event{Kind: job.EventLowSpace, Subject: "pool fast", Outcome: "x", Params: map[string]string{"pool": "fast"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.JobEvent(ctx, ev.ID)
	if err != nil || got.ID != ev.ID || got.Params["pool"] != "fast" {
		t.Fatalf("JobEvent(%d) = %+v, %v", ev.ID, got, err)
	}
	_, err = c.JobEvent(ctx, 77)
	wantStatus(t, "event 77", err, http.StatusNotFound, "event 77")
	resp, err = http.Get(srv.URL + "/v1/job-events/seven")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET /v1/job-events/seven: %d, want 400", resp.StatusCode)
	}
}
