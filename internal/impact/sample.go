package impact

import (
	"errors"
	"fmt"
	"sync"
)

// ErrSampleWarmup is returned by the first Sampler.Sample: CPU utilisation is
// a rate, and there is no earlier reading to measure it from yet.
var ErrSampleWarmup = errors.New("impact: first load sample: no interval to measure yet")

// CPUTimes are the node's cumulative CPU time counters, over all CPUs, in
// the kernel's clock ticks. Only differences between two readings mean
// anything.
type CPUTimes struct {
	// Busy is time spent doing work (everything but idle and I/O wait).
	Busy uint64
	// Total is all time, Busy included.
	Total uint64
}

// CPUSource reads the node's cumulative CPU times. ProcStat is the
// production source; tests feed their own.
type CPUSource interface {
	CPUTimes() (CPUTimes, error)
}

// DriveLoad is one local drive's load over the last sampling interval.
type DriveLoad struct {
	// Drive names the drive in status and reasons (e.g. its id).
	Drive string
	// Class is "nvme", "ssd" or "hdd" (see Thresholds.ForClass).
	Class string
	// IOPS is completed operations per second, reads plus writes.
	IOPS float64
	// QueueDepth is the average number of operations in flight.
	QueueDepth float64
}

// LoadSource reports the load of each local drive since its previous call
// (the server adapts the drives' I/O counters: the rates between the
// previous snapshot and a new one). The first call may return nothing.
// It must be cheap and must not block on I/O.
type LoadSource interface {
	DriveLoads() []DriveLoad
}

// QueueSource reports how many of the jobs' I/Os QoS holds back on this
// node now (the server adapts its QoS gate: the maintenance I/Os waiting
// for their tokens). It must be cheap and must not block.
type QueueSource interface {
	MaintenanceQueued() float64
}

// Load is a node's load over one sampling interval.
type Load struct {
	// CPU is the fraction of the node's CPU time that was busy, 0 to 1.
	CPU    float64
	Drives []DriveLoad
	// QoSQueued is the number of the jobs' I/Os QoS held back when the
	// load was sampled (0 without a QueueSource).
	QoSQueued float64 `json:",omitempty"`
}

// Sampler measures the node's load: CPU utilisation from the difference of
// two CPU time readings, and the drives' loads from a LoadSource. It is
// safe for concurrent use.
type Sampler struct {
	cpu    CPUSource
	drives LoadSource

	queue QueueSource // nil: none (SetQueueSource)

	mu   sync.Mutex
	prev *CPUTimes // nil until the first reading
	last float64   // CPU utilisation of the last interval with any ticks
}

// NewSampler returns a sampler over cpu and drives. Either may be nil: a
// node without a CPU source reports 0 CPU (throttling then follows the
// drives only), one without drives reports none.
func NewSampler(cpu CPUSource, drives LoadSource) *Sampler {
	return &Sampler{cpu: cpu, drives: drives}
}

// SetQueueSource makes every Sample report q's MaintenanceQueued as
// Load.QoSQueued. Call it before the first Sample.
func (s *Sampler) SetQueueSource(q QueueSource) { s.queue = q }

// Sample returns the load since the previous call. The first call only
// records the CPU times and returns ErrSampleWarmup; a failed CPU reading
// returns its error (the controller then holds every job where it is).
// When no CPU tick elapsed between two calls, or the counters went
// backwards (a counter reset), it reports the previous interval's CPU.
func (s *Sampler) Sample() (Load, error) {
	var l Load
	if s.drives != nil {
		l.Drives = s.drives.DriveLoads()
	}
	if s.queue != nil {
		l.QoSQueued = s.queue.MaintenanceQueued()
	}
	if s.cpu == nil {
		return l, nil
	}
	cur, err := s.cpu.CPUTimes()
	if err != nil {
		return Load{}, fmt.Errorf("impact: sample cpu: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.prev
	s.prev = &cur
	if prev == nil {
		return Load{}, ErrSampleWarmup
	}
	if cur.Total > prev.Total && cur.Busy >= prev.Busy {
		s.last = min(1, float64(cur.Busy-prev.Busy)/float64(cur.Total-prev.Total))
	}
	l.CPU = s.last
	return l, nil
}
