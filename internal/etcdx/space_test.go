package etcdx_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// The watcher reads the members' database sizes and quotas, and says
// whether the fullest is under its limit.
func TestSpaceWatcher(t *testing.T) {
	c := etcdtest.NewCluster(t, 3)
	w := etcdx.NewSpaceWatcher(c.Client(t), nil)
	if _, ok := w.Space(); ok || !w.Below() {
		t.Fatal("before any answer: want unknown, and below")
	}
	ctx := context.Background()
	if _, err := w.Step(ctx); err != nil {
		t.Fatal(err)
	}
	s, ok := w.Space()
	if !ok || s.Used <= 0 || s.Quota < s.Used || !w.Below() {
		t.Fatalf("after a step: %+v %v, below %v", s, ok, w.Below())
	}
	t.Log(s)
	reg := prometheus.NewRegistry()
	reg.MustRegister(etcdx.NewSpaceCollector(w))
	metrics := func() map[string][]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				out[mf.GetName()] = append(out[mf.GetName()], m.GetGauge().GetValue())
			}
		}
		return out
	}
	if m := metrics(); len(m["weft_etcd_db_size_bytes"]) != 3 || len(m["weft_etcd_db_quota_bytes"]) != 3 || m["weft_etcd_inline_allowed"][0] != 1 {
		t.Fatalf("metrics %v", m)
	}
	w.Limit = 1e-9 // any database is past it
	if _, err := w.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Below() || metrics()["weft_etcd_inline_allowed"][0] != 0 {
		t.Fatal("past the limit: still below")
	}
	w.Limit = 1
	if _, err := w.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if !w.Below() {
		t.Fatal("back under the limit: not below")
	}
}

func TestFullestMember(t *testing.T) {
	resp := func(used, quota int64) *pb.StatusResponse {
		return &pb.StatusResponse{DbSize: used, DbSizeQuota: quota}
	}
	s, ok := etcdx.FullestMember([]etcdx.MemberStatus{
		{Endpoint: "a", Resp: resp(100, 1000)},
		{Endpoint: "b", Err: errors.New("down")},
		{Endpoint: "c", Resp: resp(300, 1000)},
		{Endpoint: "d", Resp: resp(400, 4000)},
	})
	if !ok || s.Member != "c" || s.Fraction() != 0.3 {
		t.Fatalf("fullest %+v %v", s, ok)
	}
	// No quota reported: etcd's default (2 GiB).
	if s, _ := etcdx.FullestMember([]etcdx.MemberStatus{{Endpoint: "a", Resp: resp(1<<30, 0)}}); s.Fraction() != 0.5 {
		t.Fatalf("default quota: %+v", s)
	}
	if _, ok := etcdx.FullestMember([]etcdx.MemberStatus{{Endpoint: "b", Err: errors.New("down")}}); ok {
		t.Fatal("no answer: want unknown")
	}
}

// A member started with a quota reports it, and the space watcher's
// limit for inline data follows it.
func TestMemberQuota(t *testing.T) {
	client := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	m, err := etcdx.Start(context.Background(), etcdx.MemberConfig{Name: "q", Dir: t.TempDir(), ClientURL: client, PeerURL: peer, QuotaBytes: 256 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cli, err := etcdx.NewClient(context.Background(), []string{client})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	w := etcdx.NewSpaceWatcher(cli, nil)
	if _, err := w.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s, ok := w.Space(); !ok || s.Quota != 256<<20 {
		t.Fatalf("space %+v %v; want a quota of 256 MiB", s, ok)
	}
}
