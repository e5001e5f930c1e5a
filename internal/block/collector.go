package block

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftfs/weft/internal/drive"
)

// DriveSource lists the drives a Collector exports; *Service is one.
type DriveSource interface {
	Drives() []*drive.Drive
}

var _ DriveSource = (*Service)(nil)

// Collector exports the I/O counters and space usage of a node's drives as
// Prometheus metrics, read at scrape time (no background work, no global
// registration: register it on the server's own registry):
//
//	weft_drive_ops_total{drive,op}             completed operations (op: read, write)
//	weft_drive_errors_total{drive,op}          failed operations
//	weft_drive_bytes_total{drive,op}           bytes moved to or from disk
//	weft_drive_inflight{drive,op}              operations in progress (queue depth)
//	weft_drive_latency_seconds{drive,op}       latency histogram
//	weft_drive_capacity_bytes{drive}           file system size
//	weft_drive_free_bytes{drive}               free bytes after the reserve
//	weft_drive_used_bytes{drive}               bytes in block files
//	weft_drive_blocks{drive}                   number of blocks
type Collector struct {
	src                                 DriveSource
	ops, errs, bytes, inflight, latency *prometheus.Desc
	capacity, free, used, blocks        *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector of the drives of src.
func NewCollector(src DriveSource) *Collector {
	opLabels := []string{"drive", "op"}
	driveLabel := []string{"drive"}
	return &Collector{
		src:      src,
		ops:      prometheus.NewDesc("weft_drive_ops_total", "Completed drive I/O operations.", opLabels, nil),
		errs:     prometheus.NewDesc("weft_drive_errors_total", "Failed drive I/O operations.", opLabels, nil),
		bytes:    prometheus.NewDesc("weft_drive_bytes_total", "Bytes moved to or from the drive.", opLabels, nil),
		inflight: prometheus.NewDesc("weft_drive_inflight", "Drive I/O operations in progress.", opLabels, nil),
		latency:  prometheus.NewDesc("weft_drive_latency_seconds", "Latency of drive I/O operations.", opLabels, nil),
		capacity: prometheus.NewDesc("weft_drive_capacity_bytes", "Size of the file system holding the drive.", driveLabel, nil),
		free:     prometheus.NewDesc("weft_drive_free_bytes", "Free bytes on the drive after its reserve.", driveLabel, nil),
		used:     prometheus.NewDesc("weft_drive_used_bytes", "Bytes in the drive's block files.", driveLabel, nil),
		blocks:   prometheus.NewDesc("weft_drive_blocks", "Number of blocks on the drive.", driveLabel, nil),
	}
}

// Describe sends the descriptors of all metrics.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ops, c.errs, c.bytes, c.inflight, c.latency, c.capacity, c.free, c.used, c.blocks} {
		ch <- d
	}
}

// Collect reads every drive's counters and usage (one statfs per drive).
// A drive whose usage cannot be read exports its counters only.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	bounds := drive.LatencyBuckets()
	for _, d := range c.src.Drives() {
		id := d.ID().String()
		snap := d.Counters()
		for _, op := range []struct {
			name string
			s    drive.OpStats
		}{{drive.OpRead.String(), snap.Read}, {drive.OpWrite.String(), snap.Write}} {
			ch <- prometheus.MustNewConstMetric(c.ops, prometheus.CounterValue, float64(op.s.Ops), id, op.name)
			ch <- prometheus.MustNewConstMetric(c.errs, prometheus.CounterValue, float64(op.s.Errors), id, op.name)
			ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(op.s.Bytes), id, op.name)
			ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(op.s.InFlight), id, op.name)
			cum := make(map[float64]uint64, len(bounds))
			var n uint64
			for i, b := range bounds {
				n += op.s.Buckets[i]
				cum[b.Seconds()] = n
			}
			n += op.s.Buckets[len(bounds)]
			ch <- prometheus.MustNewConstHistogram(c.latency, n, op.s.Latency.Seconds(), cum, id, op.name)
		}
		u, err := d.Usage()
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(u.TotalBytes), id)
		ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(u.FreeBytes), id)
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(u.UsedBytes), id)
		ch <- prometheus.MustNewConstMetric(c.blocks, prometheus.GaugeValue, float64(u.Blocks), id)
	}
}
