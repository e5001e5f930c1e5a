package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/runner"
)

// TestNodeWorkers: a started node runs its background work as workers of
// its runner, lists them through the admin API (its own, and another
// node's through any node), exports them as metrics, and stops them all
// when it stops.
func TestNodeWorkers(t *testing.T) {
	ctx := context.Background()
	etcd := etcdtest.NewTLSCluster(t, 1)
	root := t.TempDir()
	cfg1, cfg2 := nodeConfig(t, "n1", etcd, root), nodeConfig(t, "n2", etcd, root) // both known when n1 enables etcd's authentication
	n1 := startTestNode(t, cfg1)
	n2 := startTestNode(t, cfg2)

	// What each worker may be doing right after the start (no timing is
	// assumed: a worker without a delay may be in its first step).
	want := map[string][]string{
		"admin-api":        {runner.StateRunning}, // serving: one blocking step
		"block-service":    {runner.StateRunning},
		"lease":            {runner.StateRunning, runner.StateIdle},
		"drainer":          {runner.StateRunning, runner.StateIdle},
		"publish":          {runner.StateIdle},                      // first step after UsageInterval
		"throttle":         {runner.StateIdle},                      // ticked once by startJobs, then every 5 s
		"throttle-latency": {runner.StateIdle, runner.StateRunning}, // every 500 ms
		"events":           {runner.StateIdle},
		"callbacks":        {runner.StateIdle, runner.StateRunning}, // first step after job.CallbackInterval
		"qos-follow":       {runner.StateRunning},                   // watching: one blocking step
		"qos-share":        {runner.StateRunning, runner.StateIdle}, // every QoSShareInterval
		"etcd-space":       {runner.StateRunning, runner.StateIdle}, // every etcdx.SpaceInterval
	}
	check := func(who string, ws admin.Workers, node string) {
		t.Helper()
		if ws.Node != node {
			t.Fatalf("%s: workers of node %q, want %q", who, ws.Node, node)
		}
		var names []string
		for _, w := range ws.Workers {
			names = append(names, w.Name)
			if !slices.Contains(want[w.Name], w.State) || w.Errors != 0 {
				t.Errorf("%s: worker %+v; want state in %v and no errors", who, w, want[w.Name])
			}
			if w.Name == "publish" && (w.Steps != 0 || w.NextRun.IsZero()) {
				t.Errorf("%s: publish before its first interval: %+v", who, w)
			}
		}
		if got := strings.Join(names, " "); got != "admin-api block-service callbacks drainer etcd-space events lease publish qos-follow qos-share throttle throttle-latency" {
			t.Fatalf("%s: workers %s", who, got)
		}
	}
	ws, err := n1.api.NodeWorkers(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	check("n1's own", ws, "n1")
	if ws, err = n1.api.NodeWorkers(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	check("n1 by name", ws, "n1")
	if ws, err = n1.api.NodeWorkers(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	check("n2 through n1", ws, "n2")

	// Unknown and down nodes are refused by name.
	_, err = n1.api.NodeWorkers(ctx, "n7")
	var ae *admin.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || !strings.Contains(err.Error(), `"n7"`) {
		t.Fatalf("workers of an unknown node = %v; want 404 naming it", err)
	}

	// The metrics carry the workers.
	resp, err := n1.api.HTTP().Get(n1.api.Base() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`weft_worker_steps_total{worker="drainer"}`, `weft_worker_state{state="running",worker="admin-api"} 1`, `weft_worker_errors_total{worker="lease"} 0`} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	// A stopped node has stopped every worker; the servers ended their step.
	s2 := n2.s
	n2.stop()
	for _, w := range s2.run.Status() {
		wantState := runner.StateStopped
		if w.Name == "admin-api" || w.Name == "block-service" {
			wantState = runner.StateDone
		}
		if w.State != wantState {
			t.Errorf("after the stop: %+v, want %s", w, wantState)
		}
	}
	_, err = n1.api.NodeWorkers(ctx, "n2")
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "n2 is down") {
		t.Fatalf("workers of a down node = %v; want 503 naming it", err)
	}
}
