package impact

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The delays a figure has on its way to the controller, as the server
// builds it (qos.Stats.ClientP99's window, the qos-share worker's
// publication every second): a spike shows in a remote node's figure at
// most figureRise after it starts, and still shows figureFall after it
// ends.
const (
	figureRise = time.Second
	figureFall = 2*time.Second + time.Second
)

// TestLatencyReaction checks the bounds with the server's delays
// modelled: for each level with targets and each drive class, a job at
// its level's maximum backs off within 2 s of a client latency spike
// starting on another node, and is back at its maximum within 10 s of the
// spike ending.
func TestLatencyReaction(t *testing.T) {
	for _, level := range []string{LevelLow, LevelMedium} {
		for _, class := range []string{DriveClassNVMe, DriveClassSSD, DriveClassHDD} {
			t.Run(level+"/"+class, func(t *testing.T) {
				lv, _ := LookupLevel(level)
				target := lv.Thresholds.ForClass(class).ClientP99
				r := newLatencyRig(t, level, class)
				r.growToMax(lv.MaxWorkers)
				r.run(10 * time.Second) // a spike, not the job's own last rise

				spike := r.now.Add(1234 * time.Millisecond) // off the checks' grid
				end := spike.Add(20 * time.Second)
				r.figure = func(now time.Time) time.Duration {
					if !now.Before(spike.Add(figureRise)) && now.Before(end.Add(figureFall)) {
						return 3 * target
					}
					return target / 2
				}
				cut, back := time.Time{}, time.Time{}
				for r.now.Before(end.Add(30 * time.Second)) {
					r.step()
					w := r.workers()
					if cut.IsZero() && w < lv.MaxWorkers {
						cut = r.now
					}
					if !cut.IsZero() && back.IsZero() && !r.now.Before(end) && w == lv.MaxWorkers {
						back = r.now
					}
				}
				if cut.IsZero() || cut.Sub(spike) > 2*time.Second {
					t.Errorf("backed off %v after the spike started, want within 2s", cut.Sub(spike))
				}
				if back.IsZero() || back.Sub(end) > 10*time.Second {
					t.Errorf("back at %v workers %v after the spike ended, want within 10s", lv.MaxWorkers, back.Sub(end))
				}
			})
		}
	}
}

// TestLatencyNoFlap runs a client p99 that crosses the target every
// second for a minute: the job is cut down to its minimum and stays there
// (no return, no growth), rather than going up and down with the figure.
func TestLatencyNoFlap(t *testing.T) {
	r := newLatencyRig(t, LevelMedium, DriveClassSSD)
	r.growToMax(6)
	r.run(10 * time.Second)
	start := r.now
	r.figure = func(now time.Time) time.Duration {
		if now.Sub(start)/time.Second%2 == 0 {
			return 21 * time.Millisecond
		}
		return 19 * time.Millisecond
	}
	var ups, downs int
	last := r.workers()
	for r.now.Before(start.Add(time.Minute)) {
		r.step()
		switch w := r.workers(); {
		case w > last:
			ups++
		case w < last:
			downs++
		}
		last = r.workers()
	}
	if ups != 0 || last != 1 || downs > 3 {
		t.Errorf("crossing the target each second: %d rises, %d cuts, ending at %v workers; want 0 rises, at most 3 cuts (6, 3, 1), ending at 1", ups, downs, last)
	}
}

// latencyRig is a controller with one job on a quiet node, driven as the
// server's throttle and throttle-latency workers drive it.
type latencyRig struct {
	t        *testing.T
	now      time.Time
	lastTick time.Time
	c        *Controller
	class    string
	figure   func(now time.Time) time.Duration // the remote node's p99 at now
}

func newLatencyRig(t *testing.T, policy, class string) *latencyRig {
	r := &latencyRig{t: t, now: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), class: class}
	r.lastTick = r.now
	r.figure = func(time.Time) time.Duration { return 0 }
	var err error
	r.c, err = NewController(ControllerConfig{
		Sampler: &scriptSampler{load: Load{CPU: 0.05, Drives: []DriveLoad{{Drive: "d1", Class: class, IOPS: 1, QueueDepth: 0.1}}}},
		Now:     func() time.Time { return r.now }, Zone: time.UTC, Latency: r,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.c.Allowance("j", policy)
	return r
}

func (r *latencyRig) ClientLatency() []PoolLatency {
	if d := r.figure(r.now); d > 0 {
		return []PoolLatency{{Pool: "p", Class: r.class, Node: "n2", P99: d}}
	}
	return nil
}

// step moves the clock one LatencyCheckInterval: the runner asks the
// allowance, the fast check runs, and the tick when it is due.
func (r *latencyRig) step() {
	r.now = r.now.Add(LatencyCheckInterval)
	r.c.Allowance("j", r.c.Status().Jobs[0].Policy)
	r.c.CheckLatency()
	if r.now.Sub(r.lastTick) >= DefaultThrottleInterval {
		if err := r.c.Tick(context.Background()); err != nil {
			r.t.Fatal(err)
		}
		r.lastTick = r.now
	}
}

// run steps for d.
func (r *latencyRig) run(d time.Duration) {
	for end := r.now.Add(d); r.now.Before(end); {
		r.step()
	}
}

func (r *latencyRig) workers() float64 { return r.c.Status().Jobs[0].Target }

func (r *latencyRig) growToMax(max float64) {
	for i := 0; i < 1000 && r.workers() < max; i++ {
		r.step()
	}
	if r.workers() != max {
		r.t.Fatal(fmt.Sprintf("quiet node: %v workers, want the level's %v", r.workers(), max))
	}
}

// TestLatencyRelapse: when the job's own I/O is what puts the clients
// over target (here: over whenever it has more than 3 workers), a return
// goes back to the workers it had before the rise that did it, and the
// tick waits LatencyProbe before trying more: the job settles at 3 and
// probes 4 about twice a minute, rather than swinging every few seconds.
func TestLatencyRelapse(t *testing.T) {
	r := newLatencyRig(t, LevelMedium, DriveClassSSD)
	r.growToMax(6)
	r.run(10 * time.Second)
	start := r.now
	r.figure = func(time.Time) time.Duration {
		if r.workers() > 3 {
			return 30 * time.Millisecond
		}
		return 5 * time.Millisecond
	}
	var rises []string
	var at3 time.Duration
	last := r.workers()
	for r.now.Before(start.Add(2 * time.Minute)) {
		r.step()
		if w := r.workers(); w > last {
			rises = append(rises, fmt.Sprintf("%v→%v", last, w))
		}
		last = r.workers()
		if last == 3 {
			at3 += LatencyCheckInterval
		}
	}
	t.Logf("rises: %v; at 3 workers %v of 2m", rises, at3)
	// The first trip (sitting at 6 for 10 s: not the job's own rise, as
	// far as the controller can tell) returns to 6 and relapses; from then
	// on the job comes back to 3 after each probe of 4.
	probes := 0
	for _, rise := range rises {
		if rise == "3→4" {
			probes++
		}
	}
	if probes > 4 {
		t.Errorf("rises %v: %d probes of 4 workers in 2 minutes, want at most two a minute", rises, probes)
	}
	for _, rise := range rises[min(1, len(rises)):] {
		if rise != "3→4" && rise != "2→3" {
			t.Errorf("rises %v: %s after settling, want only probes 3→4 and returns 2→3", rises, rise)
		}
	}
	if at3 < 90*time.Second {
		t.Errorf("at 3 workers only %v of 2 minutes, want most of it", at3)
	}
}

// TestLatencyRate: a low job at its minimum workers whose clients stay
// over target has its I/O slowed, from the class's start rate halving
// every LatencySettle down to the level's MinRate, and gets it back with
// its workers once the clients are under target; a medium job at its
// minimum keeps its full speed.
func TestLatencyRate(t *testing.T) {
	rate := func(r *latencyRig) float64 {
		a := r.c.Allowance("j", r.c.Status().Jobs[0].Policy)
		return a.BytesPerSec
	}
	r := newLatencyRig(t, LevelLow, DriveClassSSD)
	r.growToMax(2)
	r.run(10 * time.Second)
	over := true
	r.figure = func(time.Time) time.Duration {
		if over {
			return 30 * time.Millisecond // the ssd target at low is 10 ms
		}
		return time.Millisecond
	}
	var rates []float64
	for range 60 { // 30 s over target
		r.step()
		if got := rate(r); got > 0 && (len(rates) == 0 || rates[len(rates)-1] != got) {
			rates = append(rates, got)
		}
	}
	want := []float64{32 << 20, 16 << 20, 8 << 20, 4 << 20, 2 << 20, 1 << 20}
	if fmt.Sprint(rates) != fmt.Sprint(want) || r.workers() != 0.25 {
		t.Fatalf("rates %v at %v workers, want %v at 0.25", rates, r.workers(), want)
	}
	over = false
	r.run(LatencyHold + 2*time.Second)
	if rate(r) != 0 || r.workers() != 2 {
		t.Fatalf("after the clients came back under target: rate %v, %v workers; want none, 2", rate(r), r.workers())
	}

	m := newLatencyRig(t, LevelMedium, DriveClassSSD)
	m.growToMax(6)
	m.figure = func(time.Time) time.Duration { return 60 * time.Millisecond }
	m.run(30 * time.Second)
	if rate(m) != 0 || m.workers() != 1 {
		t.Fatalf("medium over target for 30 s: rate %v, %v workers; want none, its minimum of 1", rate(m), m.workers())
	}
}
