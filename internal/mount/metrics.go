package mount

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weftfs/weft/internal/kv/kvcache"
	"github.com/weftfs/weft/internal/meta"
)

// metaCollector exports a mount's metadata cache and write-back as
// Prometheus metrics:
//
//	weft_mount_meta_cache_reads_total{result}   keys and ranges read from the cache (hit) or etcd (miss)
//	weft_mount_meta_cache_keys                   keys the cache holds
//	weft_mount_meta_cache_serving                1 while the cache answers reads
//	weft_mount_writeback_total{outcome}          creates and unlinks deferred, committed, dropped
//	weft_mount_writeback_waiting                 deferred and not committed yet
//	weft_mount_delegations                       directory delegations held
type metaCollector struct {
	m    *meta.Meta
	c    *kvcache.Store
	desc map[string]*prometheus.Desc
}

func newMetaCollector(m *meta.Meta, c *kvcache.Store) *metaCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &metaCollector{m: m, c: c, desc: map[string]*prometheus.Desc{
		"reads":       d("weft_mount_meta_cache_reads_total", "Metadata keys and ranges read from the mount's cache (hit) or from etcd (miss).", "result"),
		"keys":        d("weft_mount_meta_cache_keys", "Metadata keys the mount's cache holds."),
		"serving":     d("weft_mount_meta_cache_serving", "1 while the mount's metadata cache answers reads."),
		"writeback":   d("weft_mount_writeback_total", "Creates and unlinks acknowledged before their commit, by outcome.", "outcome"),
		"waiting":     d("weft_mount_writeback_waiting", "Creates and unlinks acknowledged and not committed yet."),
		"delegations": d("weft_mount_delegations", "Directory delegations the mount holds."),
	}}
}

func (c *metaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.desc {
		ch <- d
	}
}

func (c *metaCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.c.Stats()
	metric := func(name string, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.desc[name], t, v, labels...)
	}
	metric("reads", prometheus.CounterValue, float64(st.Hits), "hit")
	metric("reads", prometheus.CounterValue, float64(st.Misses), "miss")
	metric("keys", prometheus.GaugeValue, float64(st.Keys))
	serving := 0.0
	if st.Serving {
		serving = 1
	}
	metric("serving", prometheus.GaugeValue, serving)
	metric("writeback", prometheus.CounterValue, float64(st.Deferred), "deferred")
	metric("writeback", prometheus.CounterValue, float64(st.Committed), "committed")
	metric("writeback", prometheus.CounterValue, float64(st.Dropped), "dropped")
	metric("waiting", prometheus.GaugeValue, float64(st.Waiting))
	metric("delegations", prometheus.GaugeValue, float64(c.m.Delegations()))
}

// serveMetrics serves /metrics at addr until stop is called.
func serveMetrics(addr string, m *meta.Meta, log *slog.Logger) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	if c, ok := m.Store().(*kvcache.Store); ok {
		reg.MustRegister(newMetaCollector(m, c))
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mount: --metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server", "err", err)
		}
	}()
	return func() { srv.Close() }, nil
}
