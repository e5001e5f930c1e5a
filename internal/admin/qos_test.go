package admin

import (
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
	"github.com/weftfs/weft/internal/qos"
)

// TestQoSRoutes: changes are validated (a bad specification is a 400
// naming its token) and stored as versions; show and stats answer with no
// node up (no node state, no rows).
func TestQoSRoutes(t *testing.T) {
	ctx := context.Background()
	c, _ := newAPI(t)
	for _, tc := range []struct {
		ch   QoSChange
		want string
	}{
		{QoSChange{}, "needs enable or set"},
		{QoSChange{Set: []string{"pool=fast,maintenance=300"}}, `limit "300"`},
		{QoSChange{Set: []string{"maintenance=3IOPS"}}, "starts with pool=NAME"},
	} {
		_, err := c.ChangeQoS(ctx, tc.ch)
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Msg, tc.want) {
			t.Errorf("ChangeQoS(%+v) = %v; want a 400 saying %q", tc.ch, err, tc.want)
		}
	}
	on := true
	cfg, err := c.ChangeQoS(ctx, QoSChange{Enable: &on, Set: []string{"pool=fast,maintenance=300IOPS,other=unlimited", "pool=*,maintenance=100MB/s"}})
	if err != nil || cfg.Version != 1 || !cfg.Enabled {
		t.Fatalf("first change: %+v %v", cfg, err)
	}
	off := false
	if cfg, err = c.ChangeQoS(ctx, QoSChange{Enable: &off}); err != nil || cfg.Version != 2 || cfg.Enabled {
		t.Fatalf("disable: %+v %v", cfg, err)
	}
	show, err := c.QoS(ctx)
	if err != nil || show.Config.Version != 2 || strings.Join(show.Specs, " ") != "pool=fast,other=unlimited,maintenance=300IOPS pool=*,maintenance=100MB/s" {
		t.Fatalf("show: %+v %v", show, err)
	}
	if _, err := c.QoSStats(ctx, 61, 1); err == nil || !strings.Contains(err.Error(), "seconds=\"61\"") {
		t.Errorf("stats over 61 s: %v", err)
	}
	if st, err := c.QoSStats(ctx, 10, 5); err != nil || st.To-st.From != 10 || len(st.Rows) != 0 {
		t.Errorf("stats with no node up: %+v %v", st, err)
	}
}

// fakeQoS is a node's QoS state for the handler.
type fakeQoS struct {
	fine     []qos.FineSample
	overflow int64
}

func (f *fakeQoS) QoSSamples(int) []qos.Sample           { return nil }
func (f *fakeQoS) QoSLimits() map[qos.Key]qos.Limit      { return nil }
func (f *fakeQoS) QoSFine(int) ([]qos.FineSample, int64) { return f.fine, f.overflow }

// TestQoSFineStats: GET /v1/qos/stats/fine gathers every node's fine
// statistics into rows by node, interval and key, reports a node's
// overflow, names a node that answers without fine statistics (an older
// version) among the errors, and refuses bad parameters with a 400
// naming them.
func TestQoSFineStats(t *testing.T) {
	ctx := context.Background()
	store, err := cluster.Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// n2 answers as a weft without fine statistics does.
	old := peerAPI(t, "", QoSNodeState{Node: "n2", Shares: []QoSShare{}})
	registerNodes(t, store, cluster.NodeRecord{Name: "n1", GRPCAddr: "127.0.0.1:1"}, cluster.NodeRecord{Name: "n2", GRPCAddr: "127.0.0.1:2", AdminAddr: old})
	now := time.Now().Unix()
	key := qos.FineSample{Pool: "p", Class: qos.Maintenance, Dir: qos.Read, Size: qos.SizeUnit, Job: "7", Client: "n1"}
	var fine []qos.FineSample
	for _, at := range []int64{now - 4, now - 3, now - 3} { // two seconds of the first 2-second interval, one twice
		s := key
		s.At, s.FineCounts = at, qos.FineCounts{Counts: qos.Counts{Ops: 2, Bytes: 2 << 20, DriveNanos: 4e6}, MinNanos: 1e6, MaxNanos: 3e6, MinDriveNanos: 1e6, MaxDriveNanos: 3e6}
		fine = append(fine, s)
	}
	other := qos.FineSample{At: now - 1, Pool: "p", Class: qos.Other, Dir: qos.Write, Other: true, FineCounts: qos.FineCounts{Counts: qos.Counts{Ops: 5}}}
	fine = append(fine, other)
	srv := httptest.NewServer(NewHandler(Deps{Store: store, Node: NodeInfo{Name: "n1", PID: 7}, Log: log, QoS: &fakeQoS{fine: fine, overflow: 5}}))
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL)
	st, err := c.QoSFineStats(ctx, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 1 || st.Nodes[0] != "n1" || st.Overflow["n1"] != 5 || len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "node n2: keeps no fine statistics") {
		t.Errorf("nodes %v, overflow %v, errors %q", st.Nodes, st.Overflow, st.Errors)
	}
	if len(st.Rows) != 2 {
		t.Fatalf("rows: %+v", st.Rows)
	}
	if r := st.Rows[0]; r.Node != "n1" || r.Start != now-4 || r.Seconds != 2 || r.Job != "7" || r.Ops != 6 || r.IOPS != 3 || r.MinMs != 1 || r.MaxMs != 3 || r.AvgMs != 2 {
		t.Errorf("the maintenance row: %+v", r)
	}
	if r := st.Rows[1]; !r.Other || r.Start != now-2 || r.Ops != 5 {
		t.Errorf("the other row: %+v", r)
	}
	for _, q := range []string{"seconds=0", "seconds=61", "interval=5&seconds=4", "seconds=x"} {
		var v QoSFineStats
		err := c.do(ctx, http.MethodGet, APIVersion+"/qos/stats/fine?"+q, nil, &v)
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Msg, strings.SplitN(strings.SplitN(q, "&", 2)[0], "=", 2)[0]) {
			t.Errorf("?%s: %v; want a 400 naming the parameter", q, err)
		}
	}
}
