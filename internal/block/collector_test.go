package block

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftfs/weft/internal/drive"
)

func TestCollector(t *testing.T) {
	n := startNode(t, t.TempDir(), drive.SyncNever)
	ctx := context.Background()
	hdr := drive.BlockHeader{ID: drive.NewBlockID()}
	if err := n.client.Put(ctx, 1, hdr, payload(100000, 1)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.client.Get(ctx, 1, hdr.ID, 0, -1); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(n.svc)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// value[family][drive/op] of counters and gauges; histogram counts.
	got := map[string]map[string]float64{}
	for _, mf := range mfs {
		got[mf.GetName()] = map[string]float64{}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetValue() + "/"
			}
			switch {
			case m.GetCounter() != nil:
				got[mf.GetName()][key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[mf.GetName()][key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				got[mf.GetName()][key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	checks := []struct {
		family, key string
		want        float64
	}{
		{"weft_drive_ops_total", "d1/write/", 1},
		{"weft_drive_ops_total", "d1/read/", 1},
		{"weft_drive_ops_total", "d2/read/", 0},
		{"weft_drive_errors_total", "d1/read/", 0},
		{"weft_drive_inflight", "d1/write/", 0},
		{"weft_drive_latency_seconds", "d1/read/", 1},
		{"weft_drive_blocks", "d1/", 1},
		{"weft_drive_used_bytes", "d1/", drive.HeaderAlign + 100000},
		{"weft_drive_blocks", "d2/", 0},
	}
	for _, c := range checks {
		v, ok := got[c.family][c.key]
		if !ok || v != c.want {
			t.Errorf("%s{%s} = %v (present %v), want %v", c.family, c.key, v, ok, c.want)
		}
	}
	if got["weft_drive_bytes_total"]["d1/write/"] < 100000 || got["weft_drive_capacity_bytes"]["d1/"] <= 0 {
		t.Errorf("bytes/capacity: %v %v", got["weft_drive_bytes_total"], got["weft_drive_capacity_bytes"])
	}
}
