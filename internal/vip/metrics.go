package vip

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics of a Manager (register it once per registry; it is a
// prometheus.Collector):
//
//	weft_vip_held{addr}                 1 while this node serves addr, else 0
//	weft_vip_epoch{addr}                the epoch of this node's holding of addr (0: not held)
//	weft_vip_takeovers_total            addresses this node took
//	weft_vip_releases_total{reason}     addresses it gave up: fenced, link down, key lost, stopped
//	weft_vip_fences_total               leases it fenced (could not renew in time, or expired)
//	weft_vip_link_failures_total        public link checks that failed after passing
//	weft_vip_link_up                    1 while the public link check passes
//	weft_vip_hook_errors_total          hook commands that failed
//	weft_vip_lease_renewed_age_seconds  time since the last successful renewal was sent
var (
	descHeld      = prometheus.NewDesc("weft_vip_held", "1 while this node serves the service address.", []string{"addr"}, nil)
	descEpoch     = prometheus.NewDesc("weft_vip_epoch", "Epoch of this node's holding of the service address (0: not held).", []string{"addr"}, nil)
	descTakeovers = prometheus.NewDesc("weft_vip_takeovers_total", "Service addresses this node took.", nil, nil)
	descReleases  = prometheus.NewDesc("weft_vip_releases_total", "Service addresses this node gave up, by reason.", []string{"reason"}, nil)
	descFences    = prometheus.NewDesc("weft_vip_fences_total", "Leases this node fenced itself for (not renewed in time, or expired).", nil, nil)
	descLinkFail  = prometheus.NewDesc("weft_vip_link_failures_total", "Public link checks that failed after passing.", nil, nil)
	descLinkUp    = prometheus.NewDesc("weft_vip_link_up", "1 while the public link check passes.", nil, nil)
	descHookErr   = prometheus.NewDesc("weft_vip_hook_errors_total", "Address hook commands that failed.", nil, nil)
	descRenewAge  = prometheus.NewDesc("weft_vip_lease_renewed_age_seconds", "Time since the last successful lease renewal was sent.", nil, nil)
)

var _ prometheus.Collector = (*Manager)(nil)

// Describe implements prometheus.Collector.
func (m *Manager) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHeld, descEpoch, descTakeovers, descReleases, descFences, descLinkFail, descLinkUp, descHookErr, descRenewAge} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.addrs {
		h, ok := m.held[a]
		v := 0.0
		if ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descHeld, prometheus.GaugeValue, v, a.String())
		ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, float64(h.epoch), a.String())
	}
	st := m.stats
	ch <- prometheus.MustNewConstMetric(descTakeovers, prometheus.CounterValue, float64(st.takeovers))
	reasons := make([]string, 0, len(st.releases))
	for r := range st.releases {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		ch <- prometheus.MustNewConstMetric(descReleases, prometheus.CounterValue, float64(st.releases[r]), r)
	}
	ch <- prometheus.MustNewConstMetric(descFences, prometheus.CounterValue, float64(st.fences))
	ch <- prometheus.MustNewConstMetric(descLinkFail, prometheus.CounterValue, float64(st.linkFailures))
	up := 1.0
	if m.linkDown {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(descLinkUp, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(descHookErr, prometheus.CounterValue, float64(st.hookErrors))
	if !st.lastRenew.IsZero() {
		ch <- prometheus.MustNewConstMetric(descRenewAge, prometheus.GaugeValue, time.Since(st.lastRenew).Seconds())
	}
}
