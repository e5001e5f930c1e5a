package impact

import (
	"errors"
	"math"
	"testing"

	"github.com/weftfs/weft/internal/job"
)

func TestThrottleAllowanceOf(t *testing.T) {
	for _, tc := range []struct {
		w    float64
		want job.Allowance
	}{
		{0, job.Allowance{Workers: 0, Duty: 1}},
		{-1, job.Allowance{Workers: 0, Duty: 1}},
		{0.25, job.Allowance{Workers: 1, Duty: 0.25}},
		{0.5, job.Allowance{Workers: 1, Duty: 0.5}},
		{1, job.Allowance{Workers: 1, Duty: 1}},
		{1.0000000001, job.Allowance{Workers: 1, Duty: 1}},
		{2.5, job.Allowance{Workers: 3, Duty: 2.5 / 3}},
		{16, job.Allowance{Workers: 16, Duty: 1}},
	} {
		if got := allowanceOf(tc.w); got.Workers != tc.want.Workers || math.Abs(got.Duty-tc.want.Duty) > 1e-9 {
			t.Errorf("allowanceOf(%v) = %+v, want %+v", tc.w, got, tc.want)
		}
	}
}

func TestThrottleLawNext(t *testing.T) {
	law := DefaultThrottleLaw()
	low, _ := LookupLevel(LevelLow)
	high, _ := LookupLevel(LevelHigh)
	zeroMin := low
	zeroMin.MinWorkers = 0
	for _, tc := range []struct {
		name string
		w    float64
		p    pressure
		lv   Level
		want float64
	}{
		{"grow whole", 2, pressureUnder, high, 3},
		{"grow stops at max", 16, pressureUnder, high, 16},
		{"grow fraction", 0.25, pressureUnder, low, 0.5},
		{"fraction reaches one", 0.75, pressureUnder, low, 1},
		{"grow from paused", 0, pressureUnder, zeroMin, 0.25},
		{"hold when near", 5, pressureNear, high, 5},
		{"halve", 16, pressureOver, high, 8},
		{"halve odd rounds down", 5, pressureOver, high, 2},
		{"halve stops at min", 3, pressureOver, high, 2},
		{"halve into fractions", 1, pressureOver, low, 0.5},
		{"halve on the quarter grid", 0.75, pressureOver, low, 0.25},
		{"halve stops at quarter", 0.25, pressureOver, low, 0.25},
		{"halve to zero when min is 0", 0.25, pressureOver, zeroMin, 0},
		{"clamp above max", 10, pressureNear, low, 2},
		{"clamp below min", 0, pressureNear, high, 2},
	} {
		if got := law.next(tc.w, tc.p, tc.lv); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: next(%v, %v, %s) = %v, want %v", tc.name, tc.w, tc.p, tc.lv.Name, got, tc.want)
		}
	}
}

func TestThrottleLawAssess(t *testing.T) {
	law := DefaultThrottleLaw()
	medium, _ := LookupLevel(LevelMedium) // cpu 70%; hdd 100 iops / qd 4; ssd 10000 / 16; nvme 50000 / 32
	hdd := func(iops, qd float64) DriveLoad {
		return DriveLoad{Drive: "d1", Class: "hdd", IOPS: iops, QueueDepth: qd}
	}
	for _, tc := range []struct {
		name string
		load Load
		want pressure
		desc string
	}{
		{"idle", Load{}, pressureUnder, "cpu 0% (limit 70%)"},
		{"cpu under", Load{CPU: 0.5}, pressureUnder, "cpu 50% (limit 70%)"},
		{"cpu near", Load{CPU: 0.6}, pressureNear, "cpu 60% (limit 70%)"},
		{"cpu at limit is near", Load{CPU: 0.7}, pressureNear, "cpu 70% (limit 70%)"},
		{"cpu over", Load{CPU: 0.71}, pressureOver, "cpu 71% (limit 70%)"},
		{"hdd queue over", Load{CPU: 0.1, Drives: []DriveLoad{hdd(50, 5)}}, pressureOver, "drive d1 (hdd) queue depth 5.0 (limit 4)"},
		{"hdd iops over", Load{CPU: 0.1, Drives: []DriveLoad{hdd(150, 1)}}, pressureOver, "drive d1 (hdd) 150 iops (limit 100)"},
		{"busiest of several", Load{CPU: 0.65, Drives: []DriveLoad{hdd(10, 1), {Drive: "d2", Class: "nvme", IOPS: 48000, QueueDepth: 8}}}, pressureNear, "drive d2 (nvme) 48000 iops (limit 50000)"},
		// The same queue depth is over for an HDD, under for flash.
		{"ssd queue 5", Load{Drives: []DriveLoad{{Drive: "d3", Class: "ssd", QueueDepth: 5}}}, pressureUnder, "drive d3 (ssd) queue depth 5.0 (limit 16)"},
		{"nvme queue 5", Load{Drives: []DriveLoad{{Drive: "d4", Class: "nvme", QueueDepth: 5}}}, pressureUnder, "drive d4 (nvme) queue depth 5.0 (limit 32)"},
		// An unknown class gets the HDD thresholds.
		{"unknown class", Load{Drives: []DriveLoad{{Drive: "d5", Class: "tape", QueueDepth: 5}}}, pressureOver, "drive d5 (tape) queue depth 5.0 (limit 4)"},
		// I/O held back by QoS holds the workers where they are; a load
		// over its threshold still halves them.
		{"qos queues", Load{CPU: 0.1, QoSQueued: 12}, pressureNear, "QoS holds back 12 maintenance I/Os (the maintenance limit, not the load: more workers would only wait)"},
		{"qos queue under one", Load{CPU: 0.1, QoSQueued: 0.5}, pressureUnder, "cpu 10% (limit 70%)"},
		{"qos queues, cpu over", Load{CPU: 0.9, QoSQueued: 12}, pressureOver, "cpu 90% (limit 70%)"},
	} {
		p, desc := law.assess(tc.load, medium.Thresholds)
		if p != tc.want || desc != tc.desc {
			t.Errorf("%s: assess = %v %q, want %v %q", tc.name, p, desc, tc.want, tc.desc)
		}
	}
	// Signals whose threshold is 0 are not checked.
	if p, desc := law.assess(Load{CPU: 1}, Thresholds{}); p != pressureUnder || desc != "no load measured" {
		t.Errorf("no thresholds: assess = %v %q", p, desc)
	}
}

func TestThrottleLawValidate(t *testing.T) {
	if err := DefaultThrottleLaw().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []ThrottleLaw{
		{Backoff: 1, GrowBelow: 0.8, Step: 1, FractionStep: 0.25},
		{Backoff: 0.5, GrowBelow: 0, Step: 1, FractionStep: 0.25},
		{Backoff: 0.5, GrowBelow: 0.8, Step: 0, FractionStep: 0.25},
		{Backoff: 0.5, GrowBelow: 0.8, Step: 1, FractionStep: 2},
		{Backoff: math.NaN(), GrowBelow: 0.8, Step: 1, FractionStep: 0.25},
	} {
		if err := l.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid", l, err)
		}
	}
}
