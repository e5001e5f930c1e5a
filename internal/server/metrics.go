package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftfs/weft/internal/impact"
	"github.com/weftfs/weft/internal/job"
)

// jobCollector exports the node's job-engine counters and the throttle's
// per-job allowances as Prometheus metrics:
//
//	weft_job_items_total{result}        items processed (ok, retried, failed)
//	weft_job_bytes_total                bytes the items reported
//	weft_job_tasks_total{event}         tasks claimed, stolen, done, released, lost
//	weft_job_checkpoints_total          checkpoint writes
//	weft_job_coordinator                1 on the coordinator's node
//	weft_job_workers{job,policy}        workers the throttle allows a job here
//	weft_job_duty{job,policy}           their duty cycle (0-1)
//	weft_node_cpu_busy                  the node's CPU use at the last throttle tick (0-1)
type jobCollector struct {
	eng  *job.Engine
	ctl  *impact.Controller
	desc map[string]*prometheus.Desc
}

func newJobCollector(eng *job.Engine, ctl *impact.Controller) *jobCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &jobCollector{eng: eng, ctl: ctl, desc: map[string]*prometheus.Desc{
		"items":       d("weft_job_items_total", "Job items processed on this node, by result.", "result"),
		"bytes":       d("weft_job_bytes_total", "Bytes reported by job items processed on this node."),
		"tasks":       d("weft_job_tasks_total", "Job task events on this node.", "event"),
		"checkpoints": d("weft_job_checkpoints_total", "Job checkpoint writes on this node."),
		"coordinator": d("weft_job_coordinator", "1 if this node is the job coordinator."),
		"workers":     d("weft_job_workers", "Workers the throttle allows a job on this node.", "job", "policy"),
		"duty":        d("weft_job_duty", "Duty cycle of a job's workers on this node (0-1).", "job", "policy"),
		"cpu":         d("weft_node_cpu_busy", "Node CPU use at the last throttle tick (0-1)."),
	}}
}

func (c *jobCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.desc {
		ch <- d
	}
}

func (c *jobCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.eng.Metrics()
	counter := func(name string, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.desc[name], prometheus.CounterValue, float64(v), labels...)
	}
	counter("items", m.ItemsProcessed, "ok")
	counter("items", m.ItemRetries, "retried")
	counter("items", m.ItemFailures, "failed")
	counter("bytes", m.Bytes)
	counter("tasks", m.TasksClaimed, "claimed")
	counter("tasks", m.TasksStolen, "stolen")
	counter("tasks", m.TasksDone, "done")
	counter("tasks", m.TasksReleased, "released")
	counter("tasks", m.TasksLost, "lost")
	counter("checkpoints", m.Checkpoints)
	coord := 0.0
	if c.eng.IsCoordinator() {
		coord = 1
	}
	ch <- prometheus.MustNewConstMetric(c.desc["coordinator"], prometheus.GaugeValue, coord)
	if c.ctl == nil {
		return
	}
	st := c.ctl.Status()
	ch <- prometheus.MustNewConstMetric(c.desc["cpu"], prometheus.GaugeValue, st.Load.CPU)
	for _, j := range st.Jobs {
		ch <- prometheus.MustNewConstMetric(c.desc["workers"], prometheus.GaugeValue, float64(j.Workers), j.Job, j.Policy)
		ch <- prometheus.MustNewConstMetric(c.desc["duty"], prometheus.GaugeValue, j.Duty, j.Job, j.Policy)
	}
}
