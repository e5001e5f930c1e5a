package impact

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// A /proc/stat of a 2-CPU Linux 6.x machine.
const procStatSample = `cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0
cpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0
cpu1 1335758 32577 533347 13496424 5325 0 1934 0 22800 0
intr 199748858 37 9 0 0 0 0 3 0 1 0 0 0 76 0 0 0
ctxt 5453862
btime 1716040960
processes 32431
procs_running 2
procs_blocked 0
softirq 11843215 0 2854349 1 412498 44085 0 61237 4315498 0 4155547
`

func TestSampleParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       CPUTimes
		err        bool
	}{
		{
			// user+nice+system+irq+softirq+steal busy; idle+iowait not;
			// guest and guest_nice are inside user and nice already.
			name: "linux 6", text: procStatSample,
			want: CPUTimes{Busy: 10132153 + 290696 + 3084719 + 25195, Total: 10132153 + 290696 + 3084719 + 46828483 + 16683 + 25195},
		},
		{name: "four fields (old kernel)", text: "cpu 100 0 50 850\n", want: CPUTimes{Busy: 150, Total: 1000}},
		{name: "cpu line not first", text: "btime 1\ncpu 1 2 3 4 5 6 7 8 9 10\n", want: CPUTimes{Busy: 1 + 2 + 3 + 6 + 7 + 8, Total: 36}},
		{name: "per-cpu lines only", text: "cpu0 1 2 3 4\n", err: true},
		{name: "empty", text: "", err: true},
		{name: "too few counters", text: "cpu 1 2 3\n", err: true},
		{name: "not a number", text: "cpu 1 2 x 4\n", err: true},
		{name: "negative", text: "cpu 1 2 -3 4\n", err: true},
	} {
		got, err := ParseProcStat(strings.NewReader(tc.text))
		switch {
		case tc.err && !errors.Is(err, ErrCorrupt):
			t.Errorf("%s: got %+v, %v; want ErrCorrupt", tc.name, got, err)
		case !tc.err && (err != nil || got != tc.want):
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// TestSampleProcStatFile reads the running machine's /proc/stat, where
// there is one: a smoke test of the file path, not of values.
func TestSampleProcStatFile(t *testing.T) {
	got, err := ProcStat{}.CPUTimes()
	if err != nil {
		t.Skipf("no /proc/stat here: %v", err)
	}
	if got.Total == 0 || got.Busy > got.Total {
		t.Fatalf("CPUTimes = %+v", got)
	}
	if _, err := (ProcStat{Path: t.TempDir() + "/missing"}).CPUTimes(); err == nil {
		t.Fatal("reading a missing file succeeded")
	}
}

// fakeCPU returns the readings it is given, one per call.
type fakeCPU struct {
	readings []CPUTimes
	err      error
}

func (f *fakeCPU) CPUTimes() (CPUTimes, error) {
	if f.err != nil {
		return CPUTimes{}, f.err
	}
	r := f.readings[0]
	f.readings = f.readings[1:]
	return r, nil
}

type fakeDrives []DriveLoad

func (f fakeDrives) DriveLoads() []DriveLoad { return f }

func TestSampler(t *testing.T) {
	cpu := &fakeCPU{readings: []CPUTimes{
		{Busy: 100, Total: 1000},
		{Busy: 400, Total: 2000},  // 300 busy of 1000: 30%
		{Busy: 400, Total: 2000},  // no tick elapsed: keep 30%
		{Busy: 1400, Total: 3000}, // all busy: 100%
		{Busy: 10, Total: 100},    // counters reset: keep 100%
		{Busy: 60, Total: 200},    // 50 of 100: 50%
	}}
	drives := fakeDrives{{Drive: "d1", Class: "hdd", IOPS: 120, QueueDepth: 3.5}}
	s := NewSampler(cpu, drives)
	if _, err := s.Sample(); !errors.Is(err, ErrSampleWarmup) {
		t.Fatalf("first Sample: %v, want ErrSampleWarmup", err)
	}
	for i, want := range []float64{0.3, 0.3, 1, 1, 0.5} {
		l, err := s.Sample()
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(l.CPU-want) > 1e-9 || len(l.Drives) != 1 || l.Drives[0] != drives[0] {
			t.Errorf("sample %d = %+v, want cpu %v and the drives", i+2, l, want)
		}
	}
	cpu.err = errors.New("boom")
	if _, err := s.Sample(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Sample with a failing source: %v", err)
	}

	// Without a CPU source only the drives count, from the first sample.
	l, err := NewSampler(nil, drives).Sample()
	if err != nil || l.CPU != 0 || len(l.Drives) != 1 {
		t.Fatalf("drives-only Sample = %+v, %v", l, err)
	}
}
