package job

import (
	"math"
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	tasks := []taskRecord{
		{From: 0, To: 100, Cursor: 100, Done: true},
		{From: 100, To: 150, Cursor: 125}, // stolen-from: To lowered
		{From: 150, To: 200, Cursor: 150}, // the thief's half, not started
		{From: 200, To: 300, Cursor: 260}, //
		{From: 300, To: 400, Cursor: 999}, // cursor past a lowered end
		{From: 400, To: 400, Cursor: 400}, // empty
	}
	done, total := measure(tasks)
	if done != 100+25+0+60+100 || total != 400 {
		t.Fatalf("measure = %d/%d", done, total)
	}
	p := progressOf(3, done, total, 5)
	if math.Abs(p.Percent-71.25) > 1e-9 || p.ETA != 23*time.Second || p.Phase != 3 {
		t.Fatalf("progress = %+v", p)
	}
	if p := progressOf(0, 0, 0, 0); p.Percent != 0 || p.ETA != 0 {
		t.Fatalf("empty progress = %+v", p)
	}
}

func TestRateWindow(t *testing.T) {
	w := &rateWindow{window: time.Minute, phase: -1}
	t0 := time.Unix(1e9, 0)
	if w.rate() != 0 {
		t.Fatal("rate without samples")
	}
	for i := range 200 { // 10 units/s, sampled every second
		w.add(0, t0.Add(time.Duration(i)*time.Second), uint64(10*i))
	}
	if r := w.rate(); math.Abs(r-10) > 1e-9 {
		t.Fatalf("rate = %v, want 10", r)
	}
	if n := len(w.samples); n > 62 {
		t.Fatalf("window keeps %d samples", n)
	}
	// A faster minute shows within the window, not diluted by the past.
	for i := 200; i < 300; i++ {
		w.add(0, t0.Add(time.Duration(i)*time.Second), uint64(2000+40*(i-200)))
	}
	if r := w.rate(); math.Abs(r-40) > 1e-9 {
		t.Fatalf("rate = %v, want 40", r)
	}
	w.add(1, t0.Add(301*time.Second), 5) // a new phase restarts
	if w.rate() != 0 {
		t.Fatalf("rate after a phase change = %v", w.rate())
	}
}
