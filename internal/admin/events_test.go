package admin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/job"
)

type nopEnv struct{}

func (nopEnv) Node() string      { return "n1" }
func (nopEnv) Log() *slog.Logger { return slog.New(slog.DiscardHandler) }

// The job-event, status and settings routes over an engine that is not
// started (they only read and write etcd).
func TestJobEventsStatusSettings(t *testing.T) {
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

	for i := range 60 {
		if _, err := eng.RecordEvent(ctx, job.Event{Kind: job.EventDriveAdded, Subject: "d" + string(rune('a'+i%26)), Outcome: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := c.JobEvents(ctx, 0)
	if err != nil || len(evs) != DefaultEventLimit || evs[0].ID != 11 || evs[len(evs)-1].ID != 60 {
		t.Fatalf("default events: %d, %v", len(evs), err)
	}
	if evs, err = c.JobEvents(ctx, 3); err != nil || len(evs) != 3 || evs[2].ID != 60 {
		t.Fatalf("3 events: %+v, %v", evs, err)
	}
	var ae *Error
	if _, err := c.JobEvents(ctx, 5000); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "5000") {
		t.Fatalf("limit 5000: %v", err)
	}
	resp, err := http.Get(srv.URL + "/v1/job-events?limit=ten")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `limit \"ten\"`) {
		t.Fatalf("limit=ten: %d %s", resp.StatusCode, body)
	}

	st, err := c.Status(ctx)
	if err != nil || st.JobEngine == nil || st.JobEngine.Mode != job.ModeNormal {
		t.Fatalf("status: %+v, %v", st.JobEngine, err)
	}
	if err := eng.SetLowSpace(ctx, true, "pool default: 3.1% free, below the 5% threshold"); err != nil {
		t.Fatal(err)
	}
	if st, err = c.Status(ctx); err != nil || st.JobEngine.Mode != job.ModeLowSpace || st.JobEngine.Since.IsZero() ||
		!strings.Contains(st.JobEngine.String(), "pool default: 3.1% free") {
		t.Fatalf("status in low-space mode: %+v, %v", st.JobEngine, err)
	}

	// A partial settings body changes only the fields it has.
	resp, err = http.Post(srv.URL+"/v1/job-settings", "application/json", bytes.NewBufferString(`{"low_space_threshold": 12}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got, err := c.JobSettings(ctx)
	if want := (job.Settings{MaxRunning: 3, KeepJobs: 100, LowSpaceThreshold: 12, RebalanceThreshold: 5}); err != nil || resp.StatusCode != http.StatusOK || got != want {
		t.Fatalf("after a partial POST: %d %+v, %v; want %+v", resp.StatusCode, got, err, want)
	}
	got.RebalanceThreshold = 77
	if _, err := c.SetJobSettings(ctx, got); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "rebalance_threshold 77") {
		t.Fatalf("rebalance_threshold 77: %v", err)
	}
}
