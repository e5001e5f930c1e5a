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
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/job"
)

// scanType is a job type with a monthly default schedule, like mediascan.
type scanType struct{}

func (scanType) Name() string                        { return "scan" }
func (scanType) Set() job.ExclusionSet               { return job.SetRestripe }
func (scanType) Phases() []job.Phase                 { return []job.Phase{nopPhase{}} }
func (scanType) DefaultSchedule() string             { return "0 2 1 * *" }
func (scanType) Defaults() (int, string)             { return 8, "low" }
func (scanType) FreesSpace() bool                    { return false }
func (scanType) CheckParams(map[string]string) error { return nil }

type nopPhase struct{}

func (nopPhase) Name() string { return "nop" }
func (nopPhase) Split(context.Context, job.Env, *job.Job) ([]job.TaskSpec, error) {
	return nil, nil
}
func (nopPhase) Items(context.Context, job.Env, string, uint64, uint64, int) ([]uint64, error) {
	return nil, nil
}
func (nopPhase) Process(context.Context, job.Env, *job.Job, string, uint64) (job.ItemResult, error) {
	return job.ItemResult{}, nil
}

// The job-types routes show, change, clear and refuse schedules; a body
// without "schedule" (an older client) keeps the schedule.
func TestJobTypeSchedules(t *testing.T) {
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
	if err := eng.Register(scanType{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(Deps{Store: store, Jobs: eng, Node: NodeInfo{Name: "n1"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL)

	scan := func(types []job.TypeView, err error) job.TypeView {
		t.Helper()
		if err != nil || len(types) != 1 || types[0].Name != "scan" {
			t.Fatalf("types: %+v, %v", types, err)
		}
		return types[0]
	}
	v := scan(c.JobTypes(ctx))
	if v.Schedule != "0 2 1 * *" || v.DefaultSchedule != "0 2 1 * *" || v.NextRun.IsZero() || v.NextRun.Day() != 1 || v.NextRun.Hour() != 2 {
		t.Fatalf("default: %+v", v)
	}

	ts := v.TypeSettings
	ts.Schedule = "TZ=Europe/Paris 30 3 * * sat"
	v = scan(c.ModifyJobType(ctx, "scan", ts))
	if v.Schedule != ts.Schedule || v.NextRun.In(mustZone(t, "Europe/Paris")).Weekday() != 6 || v.NextRun.In(mustZone(t, "Europe/Paris")).Hour() != 3 {
		t.Fatalf("modified: %q next %s", v.Schedule, v.NextRun)
	}

	ts.Schedule = "0 0 * * mon-xyz"
	var ae *Error
	if _, err := c.ModifyJobType(ctx, "scan", ts); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest ||
		!strings.Contains(err.Error(), `day-of-week field "mon-xyz": "xyz" is not a number (0-7) or a name (sun-sat)`) {
		t.Fatalf("bad schedule: %v", err)
	}

	// An older client's body: priority changes, the schedule stays.
	resp, err := http.Post(srv.URL+"/v1/job-types/scan", "application/json", bytes.NewBufferString(`{"priority": 9, "policy": "low", "enabled": true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v = scan(c.JobTypes(ctx)); resp.StatusCode != http.StatusOK || v.Priority != 9 || v.Schedule != "TZ=Europe/Paris 30 3 * * sat" {
		t.Fatalf("older client: %d %+v", resp.StatusCode, v.TypeSettings)
	}

	ts = v.TypeSettings
	ts.Schedule = ""
	if v = scan(c.ModifyJobType(ctx, "scan", ts)); v.Schedule != "" || !v.NextRun.IsZero() || v.DefaultSchedule != "0 2 1 * *" {
		t.Fatalf("cleared: %+v", v)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
