package server

import (
	"github.com/prometheus/client_golang/prometheus"
)

// nfsCollector exports the NFS gateway's statistics (NFSRole.NFSStatus)
// as Prometheus metrics, read at each scrape:
//
//	weft_nfs_requests_total{procedure}   requests answered
//	weft_nfs_errors_total{procedure}     of them, answered with an error
//	weft_nfs_request_seconds{procedure}  a summary of the time spent
//	                                     answering (its _sum and _count:
//	                                     rate(_sum)/rate(_count) is the
//	                                     mean latency)
//	weft_nfs_clients                     clients the gateway lists
//	weft_nfs_addresses                   addresses served
//	weft_nfs_exports_version             exports configuration applied
//	weft_nfs_connections_refused_total   connections closed at once, an
//	                                     address holding its maximum
type nfsCollector struct {
	r                                             *NFSRole
	reqs, errs, secs, clients, addrs, ev, refused *prometheus.Desc
}

var _ prometheus.Collector = (*nfsCollector)(nil)

func newNFSCollector(r *NFSRole) *nfsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &nfsCollector{r: r,
		reqs:    d("weft_nfs_requests_total", "NFS and MOUNT requests the node's gateway answered, by procedure.", "procedure"),
		errs:    d("weft_nfs_errors_total", "NFS and MOUNT requests the node's gateway answered with an error, by procedure.", "procedure"),
		secs:    d("weft_nfs_request_seconds", "Time the node's NFS gateway spent answering requests, by procedure.", "procedure"),
		clients: d("weft_nfs_clients", "Clients the node's NFS gateway lists."),
		addrs:   d("weft_nfs_addresses", "Addresses the node's NFS gateway serves."),
		ev:      d("weft_nfs_exports_version", "Version of the exports configuration the node's NFS gateway applies (0: none configured)."),
		refused: d("weft_nfs_connections_refused_total", "Client connections the node's NFS gateway closed at once because the address held its maximum of connections."),
	}
}

func (c *nfsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.reqs, c.errs, c.secs, c.clients, c.addrs, c.ev, c.refused} {
		ch <- d
	}
}

func (c *nfsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.r.NFSStatus()
	for _, o := range st.Ops {
		ch <- prometheus.MustNewConstMetric(c.reqs, prometheus.CounterValue, float64(o.Count), o.Procedure)
		ch <- prometheus.MustNewConstMetric(c.errs, prometheus.CounterValue, float64(o.Errors), o.Procedure)
		ch <- prometheus.MustNewConstSummary(c.secs, o.Count, o.Seconds, nil, o.Procedure)
	}
	ch <- prometheus.MustNewConstMetric(c.clients, prometheus.GaugeValue, float64(len(st.Clients)))
	ch <- prometheus.MustNewConstMetric(c.addrs, prometheus.GaugeValue, float64(len(st.Listeners)))
	ch <- prometheus.MustNewConstMetric(c.ev, prometheus.GaugeValue, float64(st.ExportsVersion))
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.RefusedConns))
}
