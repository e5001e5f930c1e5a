package runner

import "github.com/prometheus/client_golang/prometheus"

// collector exports a runner's workers as Prometheus metrics:
//
//	weft_worker_steps_total{worker}          steps finished
//	weft_worker_errors_total{worker}         steps that failed
//	weft_worker_state{worker,state}          1 for the worker's state, 0 for the others
//	weft_worker_last_step_seconds{worker}    duration of the last finished step
type collector struct {
	r                                *Runner
	steps, errors, state, lastSecond *prometheus.Desc
}

// NewCollector returns a Prometheus collector of r's workers (see the
// metric names above). Register it once per registry.
func NewCollector(r *Runner) prometheus.Collector {
	return &collector{r: r,
		steps:      prometheus.NewDesc("weft_worker_steps_total", "Steps finished by a background worker of this process.", []string{"worker"}, nil),
		errors:     prometheus.NewDesc("weft_worker_errors_total", "Steps of a background worker of this process that failed.", []string{"worker"}, nil),
		state:      prometheus.NewDesc("weft_worker_state", "1 for the state a background worker of this process is in, 0 for the others.", []string{"worker", "state"}, nil),
		lastSecond: prometheus.NewDesc("weft_worker_last_step_seconds", "Duration of a background worker's last finished step.", []string{"worker"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.steps
	ch <- c.errors
	ch <- c.state
	ch <- c.lastSecond
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c.r.Status() {
		ch <- prometheus.MustNewConstMetric(c.steps, prometheus.CounterValue, float64(w.Steps), w.Name)
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(w.Errors), w.Name)
		ch <- prometheus.MustNewConstMetric(c.lastSecond, prometheus.GaugeValue, w.LastDuration.Seconds(), w.Name)
		for _, s := range States() {
			v := 0.0
			if s == w.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, w.Name, s)
		}
	}
}
