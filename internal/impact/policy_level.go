package impact

import (
	"fmt"
	"strings"
	"time"
)

// Impact level names. A level is what a window of an impact policy selects.
const (
	LevelPaused = "paused"
	LevelLow    = "low"
	LevelMedium = "medium"
	LevelHigh   = "high"
)

// MaxWorkersPerNode bounds the workers any level or window may allow one job
// on one node. Past a few dozen goroutines per job a node is limited by its
// drives, not by parallelism, and the block service's own queues take over.
const MaxWorkersPerNode = 64

// Drive classes the thresholds tell apart. They are the names of the drive
// package's classes, repeated here because package job imports no domain
// package; a class this package does not know gets the HDD thresholds.
const (
	DriveClassNVMe = "nvme"
	DriveClassSSD  = "ssd"
	DriveClassHDD  = "hdd"
)

// DriveThreshold is the load of one drive above which the throttle
// controller backs jobs off. A zero field is not checked.
type DriveThreshold struct {
	// IOPS is completed block operations per second, reads plus writes.
	// Block operations are whole units (up to 1 MiB by default), not 4 KiB
	// sectors, so the numbers are far below a drive's datasheet IOPS.
	IOPS float64
	// QueueDepth is the average number of block operations in flight on
	// the drive over the sampling interval (Little's law: summed latency
	// divided by the interval). It is the better saturation signal: past
	// the depth a drive can serve in parallel, every extra operation waits,
	// and clients see it as latency.
	QueueDepth float64
	// ClientP99 is the client latency target of a pool of drives of the
	// class: when the 99th percentile of the clients' block I/O time at
	// the drives of such a pool, on any node, passes it, the controller
	// cuts jobs within a second (Controller.CheckLatency). 0 is no target.
	// A policy's own target (Policy.ClientP99) replaces it.
	ClientP99 time.Duration
}

// Thresholds are the load limits of one impact level.
type Thresholds struct {
	// CPU is the node's CPU utilisation (busy time over all CPUs, 0 to 1)
	// above which jobs back off; 0 is not checked.
	CPU float64
	// NVMe, SSD and HDD are the per-drive limits for each drive class.
	NVMe, SSD, HDD DriveThreshold
}

// ForClass returns the drive threshold of class ("nvme", "ssd", "hdd").
// Any other class gets the HDD threshold, the most conservative one, so a
// drive of a class this package does not know is never overdriven.
func (t Thresholds) ForClass(class string) DriveThreshold {
	switch class {
	case DriveClassNVMe:
		return t.NVMe
	case DriveClassSSD:
		return t.SSD
	}
	return t.HDD
}

// Level is an impact level: the range a job's workers per node move in, and
// the load above which the controller moves them down. Workers may be
// fractional: 0.25 is one worker working a quarter of each second.
type Level struct {
	Name       string
	MinWorkers float64
	MaxWorkers float64
	// MinRate, if positive, lets the client latency control slow a job
	// of this level that is at MinWorkers and still keeps clients over
	// target: its I/O on each node through a byte rate, cut down to
	// MinRate bytes a second (Controller.CheckLatency). 0: the job keeps
	// its minimum workers at full speed.
	MinRate    float64
	Thresholds Thresholds
}

// Levels returns the built-in impact levels, from the least to the most
// intrusive. The result is a fresh slice the caller may keep.
//
// Workers per node (after the job engines we learn from, where a low job runs one or
// two threads per node, a medium one four to six, a high one a dozen or
// more):
//
//	paused  0    – 0    the job holds its place but does no work
//	low     0.25 – 2    a quarter worker still makes progress under load,
//	                    its I/O slowed down to 1 MiB/s a node while it
//	                    keeps clients over their latency target
//	medium  1    – 6    the default for repair: one full worker at worst
//	high    2    – 16   catch-up at night or after a failure
//
// Only low lets the latency control slow a job below its minimum workers
// (MinRate): low is the level that yields to clients whatever the work
// left; a medium repair, the default, keeps one worker at full speed so
// that a cluster busy with clients still regains its protection.
//
// Thresholds rise with the level: a low job gets out of the way as soon as
// clients use the node; a high one only when the node is close to saturated.
//
//	          cpu   hdd iops/qd   ssd iops/qd    nvme iops/qd
//	low       50%    60 / 2        5000 /  8      20000 / 16
//	medium    70%   100 / 4       10000 / 16      50000 / 32
//	high      90%   150 / 8       20000 / 32     100000 / 64
//
// Reasons, per class (operations are block units of up to 1 MiB):
//   - HDD: a spindle serves 100–200 operations per second whatever the
//     size up to about 1 MiB, because seeks dominate, and it serves one at a
//     time: at queue depth q a client request waits about q service times
//     (8–10 ms each). Depth 2 (low) means clients already queue; 8 (high)
//     means 80 ms waits, the most a maintenance job should cause.
//   - SSD (SATA/SAS): 32 command slots; large transfers saturate the link
//     at depth 8–16, so depth past 8 (low) to 32 (high, the slot count)
//     is queueing, not parallelism.
//   - NVMe: many deep hardware queues; latency stays flat until depth
//     32–64 and throughput keeps growing past it, hence the highest limits.
//
// CPU: utilisation is averaged over all CPUs, so 50% on a node whose
// clients use half its cores is already contention for a low job.
//
// Client p99 targets (the 99th percentile of the clients' block I/O time
// at the drives of a pool, reads and durable writes alike):
//
//	          hdd     ssd     nvme
//	low       50 ms   10 ms   5 ms
//	medium   100 ms   20 ms  10 ms
//	high      none    none   none
//
// A client's block operation is up to one 1 MiB unit, and a write is
// synced before it is acknowledged. On an HDD that is one 8–10 ms service
// time when the client is alone; at low's queue depth of 2 a client waits
// behind about one job operation, and the tail of a few queued seeks is
// 30–40 ms: 50 ms is five service times, where a job is clearly in the
// way; medium tolerates ten. A SATA/SAS SSD moves 1 MiB in about 2 ms
// plus a sync of 1–2 ms: 10 ms (low) is five such operations queued
// ahead of the client. An NVMe drive does it in well under a millisecond
// (0.4 ms at 2.5 GB/s, a sync with power-loss protection in tens of µs);
// 5 ms leaves room for the file system's own journal commits, which no
// throttle can remove. Medium doubles low's targets; high has none, it is
// the level an administrator chooses to catch up regardless.
// Paused has no workers to back off; it carries the low thresholds so that
// status shows meaningful pressure.
func Levels() []Level {
	low := Thresholds{
		CPU:  0.50,
		HDD:  DriveThreshold{IOPS: 60, QueueDepth: 2, ClientP99: 50 * time.Millisecond},
		SSD:  DriveThreshold{IOPS: 5000, QueueDepth: 8, ClientP99: 10 * time.Millisecond},
		NVMe: DriveThreshold{IOPS: 20000, QueueDepth: 16, ClientP99: 5 * time.Millisecond},
	}
	return []Level{
		{Name: LevelPaused, MinWorkers: 0, MaxWorkers: 0, Thresholds: low},
		{Name: LevelLow, MinWorkers: 0.25, MaxWorkers: 2, MinRate: LatencyRateMin, Thresholds: low},
		{Name: LevelMedium, MinWorkers: 1, MaxWorkers: 6, Thresholds: Thresholds{
			CPU:  0.70,
			HDD:  DriveThreshold{IOPS: 100, QueueDepth: 4, ClientP99: 100 * time.Millisecond},
			SSD:  DriveThreshold{IOPS: 10000, QueueDepth: 16, ClientP99: 20 * time.Millisecond},
			NVMe: DriveThreshold{IOPS: 50000, QueueDepth: 32, ClientP99: 10 * time.Millisecond},
		}},
		{Name: LevelHigh, MinWorkers: 2, MaxWorkers: 16, Thresholds: Thresholds{
			CPU:  0.90,
			HDD:  DriveThreshold{IOPS: 150, QueueDepth: 8},
			SSD:  DriveThreshold{IOPS: 20000, QueueDepth: 32},
			NVMe: DriveThreshold{IOPS: 100000, QueueDepth: 64},
		}},
	}
}

// LookupLevel returns the built-in level called name. An unknown name is an
// error wrapping ErrInvalid that lists the known levels.
func LookupLevel(name string) (Level, error) {
	lv, err := levelByName(name)
	if err != nil {
		return Level{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return lv, nil
}

// levelByName is LookupLevel with an error that does not wrap ErrInvalid.
func levelByName(name string) (Level, error) {
	levels := Levels()
	names := make([]string, len(levels))
	for i, l := range levels {
		if l.Name == name {
			return l, nil
		}
		names[i] = l.Name
	}
	return Level{}, fmt.Errorf("unknown impact level %q: want one of %s", name, strings.Join(names, ", "))
}
