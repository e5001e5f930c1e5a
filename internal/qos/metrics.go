package qos

import "github.com/prometheus/client_golang/prometheus"

// collector exports a Gate as Prometheus metrics:
//
//	weft_qos_ops_total{pool,class,dir}            block I/Os done
//	weft_qos_bytes_total{pool,class,dir}          bytes of them
//	weft_qos_queued_seconds_total{pool,class,dir} time they spent queued by QoS
//	weft_qos_drive_seconds_total{pool,class,dir}  time they spent at the drive
//	weft_qos_limit_iops{pool,class}               this node's share of an IOPS limit
//	weft_qos_limit_bytes_per_second{pool,class}   this node's share of a bytes limit
//	weft_qos_waiting{pool,class}                  I/Os queued by QoS now
//	weft_qos_client_p99_seconds{pool}             p99 drive time of client I/O, last 1-2 s
//
// The rate of queued_seconds_total is the average number of I/Os queued
// by QoS, that of drive_seconds_total the average pending at the drive.
type collector struct {
	g                              *Gate
	ops, bytes, queued, drive      *prometheus.Desc
	limitIOPS, limitBytes, waiting *prometheus.Desc
	clientP99                      *prometheus.Desc
}

// NewCollector returns a Prometheus collector of g (see the metric names
// above). Register it once per registry.
func NewCollector(g *Gate) prometheus.Collector {
	io := []string{"pool", "class", "dir"}
	key := []string{"pool", "class"}
	return &collector{g: g,
		ops:        prometheus.NewDesc("weft_qos_ops_total", "Block I/Os done by this node, by pool, QoS class and direction.", io, nil),
		bytes:      prometheus.NewDesc("weft_qos_bytes_total", "Bytes of the block I/Os done by this node.", io, nil),
		queued:     prometheus.NewDesc("weft_qos_queued_seconds_total", "Time block I/Os spent queued by QoS (its rate: the average number queued).", io, nil),
		drive:      prometheus.NewDesc("weft_qos_drive_seconds_total", "Time block I/Os spent at the drive (its rate: the average number pending outside QoS).", io, nil),
		limitIOPS:  prometheus.NewDesc("weft_qos_limit_iops", "This node's share of the cluster-wide IOPS limit of a pool and class.", key, nil),
		limitBytes: prometheus.NewDesc("weft_qos_limit_bytes_per_second", "This node's share of the cluster-wide bytes-per-second limit of a pool and class.", key, nil),
		waiting:    prometheus.NewDesc("weft_qos_waiting", "Block I/Os queued by QoS now.", key, nil),
		clientP99: prometheus.NewDesc("weft_qos_client_p99_seconds",
			"99th percentile of the drive time of this node's client (other) block I/Os of a pool over the last 1-2 s; absent under 10 I/Os.", []string{"pool"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ops, c.bytes, c.queued, c.drive, c.limitIOPS, c.limitBytes, c.waiting, c.clientP99} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for k, t := range c.g.stats.Totals() {
		lv := []string{k.Pool, string(k.Class), string(k.Dir)}
		ch <- prometheus.MustNewConstMetric(c.ops, prometheus.CounterValue, float64(t.Ops), lv...)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(t.Bytes), lv...)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.CounterValue, float64(t.QueueNanos)/1e9, lv...)
		ch <- prometheus.MustNewConstMetric(c.drive, prometheus.CounterValue, float64(t.DriveNanos)/1e9, lv...)
	}
	for k, l := range c.g.Limits() {
		if l.IOPS > 0 {
			ch <- prometheus.MustNewConstMetric(c.limitIOPS, prometheus.GaugeValue, l.IOPS, k.Pool, string(k.Class))
		}
		if l.BytesPerSec > 0 {
			ch <- prometheus.MustNewConstMetric(c.limitBytes, prometheus.GaugeValue, l.BytesPerSec, k.Pool, string(k.Class))
		}
	}
	for k, n := range c.g.Waiting() {
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n), k.Pool, string(k.Class))
	}
	for pool, l := range c.g.stats.ClientP99(c.g.now()) {
		ch <- prometheus.MustNewConstMetric(c.clientP99, prometheus.GaugeValue, l.P99.Seconds(), pool)
	}
}
