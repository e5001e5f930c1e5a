package mount

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/kv/kvcache"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/runner"
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
//	weft_mount_opens_total{how}                  file opens: covered (no round trip, in a delegated directory) or sync
//	weft_mount_locks_total{result}               lock requests (flock, fcntl) granted, refused (EAGAIN), interrupted while waiting
//	weft_mount_unlocks_total                     unlocks that released something (closes included)
//	weft_mount_lock_waits_total                  lock requests that waited for another owner's lock
//	weft_mount_lock_waiters                      lock requests waiting now
type metaCollector struct {
	m    *meta.Meta
	c    *kvcache.Store
	desc descs
}

// descs are a collector's metric descriptions by short name.
type descs map[string]*prometheus.Desc

func (ds descs) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range ds {
		ch <- d
	}
}

// newDesc returns the description of metric name with labels.
func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

func newMetaCollector(m *meta.Meta, c *kvcache.Store) *metaCollector {
	return &metaCollector{m: m, c: c, desc: descs{
		"reads":        newDesc("weft_mount_meta_cache_reads_total", "Metadata keys and ranges read from the mount's cache (hit) or from etcd (miss).", "result"),
		"keys":         newDesc("weft_mount_meta_cache_keys", "Metadata keys the mount's cache holds."),
		"serving":      newDesc("weft_mount_meta_cache_serving", "1 while the mount's metadata cache answers reads."),
		"writeback":    newDesc("weft_mount_writeback_total", "Creates and unlinks acknowledged before their commit, by outcome.", "outcome"),
		"waiting":      newDesc("weft_mount_writeback_waiting", "Creates and unlinks acknowledged and not committed yet."),
		"delegations":  newDesc("weft_mount_delegations", "Directory delegations the mount holds."),
		"opens":        newDesc("weft_mount_opens_total", "File opens by how they saw changes committed before them (close-to-open): sync (a round trip to etcd first) or covered (in a directory the mount holds the delegation of: none needed).", "how"),
		"locks":        newDesc("weft_mount_locks_total", "File lock requests (flock, fcntl) by result: granted, refused (another owner holds a conflicting lock), interrupted (a wait cut short).", "result"),
		"unlocks":      newDesc("weft_mount_unlocks_total", "File unlocks that released something, closes included."),
		"lock_waits":   newDesc("weft_mount_lock_waits_total", "File lock requests that waited for another owner's lock."),
		"lock_waiters": newDesc("weft_mount_lock_waiters", "File lock requests waiting now."),
	}}
}

func (c *metaCollector) Describe(ch chan<- *prometheus.Desc) { c.desc.Describe(ch) }

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
	covered, synced := c.m.OpenCounts()
	metric("opens", prometheus.CounterValue, float64(covered), "covered")
	metric("opens", prometheus.CounterValue, float64(synced), "sync")
	ls := c.m.LockStats()
	metric("locks", prometheus.CounterValue, float64(ls.Granted), "granted")
	metric("locks", prometheus.CounterValue, float64(ls.Refused), "refused")
	metric("locks", prometheus.CounterValue, float64(ls.Cut), "interrupted")
	metric("unlocks", prometheus.CounterValue, float64(ls.Unlocks))
	metric("lock_waits", prometheus.CounterValue, float64(ls.Waited))
	metric("lock_waiters", prometheus.GaugeValue, float64(ls.Waiting))
}

// dataCollector exports a mount's file I/O (client.Stats):
//
//	weft_mount_bytes_total{op}                 file bytes read and written
//	weft_mount_unit_bytes_total{op}            unit (block) bytes read and written, parity included
//	weft_mount_local_units_total{op}           units read from or written to a drive on this machine directly (short-circuit read, staged write)
//	weft_mount_stripes_written_total           stripes written
//	weft_mount_underprotected_writes_total     stripes written with fewer units than their protection wants
//	weft_mount_degraded_reads_total            stripe reads rebuilt from parity
//	weft_mount_unit_errors_total               unit reads and writes that failed
//	weft_mount_corrupt_units_total             units found corrupt
//	weft_mount_prefetch_bytes_total            bytes read ahead (stripes for sequential readers, records for strided ones)
//	weft_mount_prefetch_unread_bytes_total     of those, bytes dropped before any read used them
//	weft_mount_prefetched_records_total        records prefetched for strided readers
type dataCollector struct {
	c    *client.Client
	desc descs
}

func newDataCollector(c *client.Client) *dataCollector {
	return &dataCollector{c: c, desc: descs{
		"bytes":          newDesc("weft_mount_bytes_total", "File bytes read and written through the mount.", "op"),
		"unit_bytes":     newDesc("weft_mount_unit_bytes_total", "Unit bytes read from and written to drives, parity included.", "op"),
		"local":          newDesc("weft_mount_local_units_total", "Units read from or written to a drive on this machine directly (short-circuit reads, staged writes).", "op"),
		"unsynced":       newDesc("weft_mount_unsynced_units_total", "Units of files born under a delegation staged on this machine without a sync of their own; the data barriers sync them before their commit."),
		"data_syncs":     newDesc("weft_mount_data_syncs_total", "Data barriers that synced drives' file systems (syncfs) for unsynced units before a commit naming them."),
		"stripes":        newDesc("weft_mount_stripes_written_total", "Stripes written."),
		"holes":          newDesc("weft_mount_zero_stripes_total", "Stripe write-outs of zeros only, committed as holes (nothing stored)."),
		"inline":         newDesc("weft_mount_inline_stripes_total", "Stripes written inline: a small file's bytes committed in its stripe map, no block I/O (weft mount --inline-max)."),
		"underprotected": newDesc("weft_mount_underprotected_writes_total", "Stripes written below their protection: units not placed, or too few nodes or drives (left for repair)."),
		"degraded":       newDesc("weft_mount_degraded_reads_total", "Stripe reads that rebuilt a unit from the others."),
		"unreadable":     newDesc("weft_mount_unreadable_reads_total", "Stripe reads that failed: too few units readable (EIO)."),
		"unit_errors":    newDesc("weft_mount_unit_errors_total", "Unit reads and writes that failed."),
		"corrupt":        newDesc("weft_mount_corrupt_units_total", "Units found corrupt (checksum or identity mismatch)."),
		"prefetch":       newDesc("weft_mount_prefetch_bytes_total", "Bytes read ahead of readers: stripes for sequential readers, records for strided ones."),
		"unread":         newDesc("weft_mount_prefetch_unread_bytes_total", "Bytes read ahead that were dropped before any read used them (prefetch waste; cap it with weft mount --max-readahead)."),
		"records":        newDesc("weft_mount_prefetched_records_total", "Records prefetched for strided readers."),
	}}
}

func (c *dataCollector) Describe(ch chan<- *prometheus.Desc) { c.desc.Describe(ch) }

func (c *dataCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.c.Stats()
	counter := func(name string, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.desc[name], prometheus.CounterValue, float64(v), labels...)
	}
	counter("bytes", st.BytesRead, "read")
	counter("bytes", st.BytesWritten, "write")
	counter("unit_bytes", st.UnitBytesRead, "read")
	counter("unit_bytes", st.UnitBytesWritten, "write")
	counter("local", st.LocalReads, "read")
	counter("local", st.LocalWrites, "write")
	counter("unsynced", st.UnsyncedWrites)
	counter("data_syncs", st.DataSyncs)
	counter("stripes", st.StripesWritten)
	counter("holes", st.HolesKept)
	counter("inline", st.InlineWritten)
	counter("underprotected", st.UnderProtectedWrites)
	counter("degraded", st.DegradedReads)
	counter("unreadable", st.UnreadableReads)
	counter("unit_errors", st.UnitErrors)
	counter("corrupt", st.CorruptUnits)
	counter("prefetch", st.PrefetchBytes)
	counter("unread", st.PrefetchUnreadBytes)
	counter("records", st.StridedRecords)
}

// loopback refuses a --metrics address that is not on a loopback
// interface: the metrics and workers are served without authentication,
// for a collector on the mount's machine.
func loopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("mount: --metrics %q: want HOST:PORT on loopback, e.g. 127.0.0.1:9101: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("mount: --metrics %s: the mount's metrics are served without authentication, on a loopback address only (127.0.0.1:PORT or [::1]:PORT); "+
			"scrape them from this machine", addr)
	}
	return nil
}

// serveMetrics serves, at addr until stop is called, /metrics (the
// collectors above, run's workers, Go and process metrics) and /workers
// (run's workers, as admin.Workers of mount point dir), from run's
// "metrics" worker; with pprof, Go profiles at /debug/pprof/ too.
func serveMetrics(addr string, pprof bool, m *meta.Meta, c *client.Client, run *runner.Runner, dir string) (stop func(), err error) {
	reg := prometheus.NewRegistry()
	if c, ok := m.Store().(*kvcache.Store); ok {
		reg.MustRegister(newMetaCollector(m, c))
	}
	reg.MustRegister(newDataCollector(c), runner.NewCollector(run))
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := loopback(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mount: --metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/workers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(admin.Workers{Mount: dir, Workers: run.Status()})
	})
	if pprof {
		mux.HandleFunc("/debug/pprof/", httppprof.Index)
		mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	h, err := run.Go("metrics", serveWorker{srv: srv, ln: ln}, runner.Options{})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("mount: --metrics %s: %w", addr, err)
	}
	return func() {
		srv.Close()
		_ = h.Stop(context.Background())
	}, nil
}

// serveWorker serves srv on ln in one blocking step, until srv is closed
// or the worker stopped.
type serveWorker struct {
	srv *http.Server
	ln  net.Listener
}

func (w serveWorker) Step(ctx context.Context) (runner.State, error) {
	defer context.AfterFunc(ctx, func() { w.srv.Close() })()
	if err := w.srv.Serve(w.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return runner.Done, fmt.Errorf("mount: metrics server: %w", err)
	}
	return runner.Done, nil
}
