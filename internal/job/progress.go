package job

import (
	"math"
	"time"
)

// Progress is how far a job is through its current phase.
//
// It is measured in units of the phase's ranges: Done = Σ(Cursor-From) and
// Total = Σ(To-From) over the phase's tasks (a steal splits a task without
// changing either sum). On a domain whose items are spread evenly over the
// range (a LIN scan of a tree whose LINs were allocated densely, a drive
// scan over hashed block ids) the fraction is the fraction of items done,
// and it is only as good as that assumption elsewhere: a type over a
// sparse domain should Split on quantiles of its items so that equal
// widths hold equal work. Progress is read from checkpoints, so it lags
// the truth by up to one CheckpointInterval.
type Progress struct {
	// Phase is the index of the phase measured.
	Phase int `json:"phase"`
	// Done and Total are range units; Percent is 100×Done/Total (0 while
	// the phase has no tasks yet).
	Done    uint64  `json:"done"`
	Total   uint64  `json:"total"`
	Percent float64 `json:"percent"`
	// Rate is range units per second over the last minute, as the
	// coordinator last measured it; 0 when unknown.
	Rate float64 `json:"rate"`
	// ETA is the time left in this phase at Rate; 0 when unknown. Later
	// phases are not included (their size is unknown until they split).
	ETA time.Duration `json:"eta"`
}

// measure sums done and total units over a phase's tasks.
func measure(tasks []taskRecord) (done, total uint64) {
	for _, t := range tasks {
		if t.To <= t.From {
			continue
		}
		total += t.To - t.From
		switch {
		case t.Done || t.Cursor >= t.To:
			done += t.To - t.From
		case t.Cursor > t.From:
			done += t.Cursor - t.From
		}
	}
	return done, total
}

// progressOf combines a measure with a rate into a Progress.
func progressOf(phase int, done, total uint64, rate float64) Progress {
	p := Progress{Phase: phase, Done: done, Total: total, Rate: rate}
	if total > 0 {
		p.Percent = 100 * float64(done) / float64(total)
	}
	if rate > 0 && total >= done {
		secs := float64(total-done) / rate
		if secs < float64(math.MaxInt64/int64(time.Second)) {
			p.ETA = time.Duration(secs * float64(time.Second)).Round(time.Second)
		}
	}
	return p
}

// rateWindow estimates a rate from samples of a growing counter kept over
// a sliding window. Not safe for concurrent use.
type rateWindow struct {
	window  time.Duration
	phase   int
	samples []rateSample
}

type rateSample struct {
	at   time.Time
	done uint64
}

// add records the counter's value at a time; a new phase restarts the
// window.
func (w *rateWindow) add(phase int, at time.Time, done uint64) {
	if phase != w.phase || (len(w.samples) > 0 && done < w.samples[len(w.samples)-1].done) {
		w.samples = w.samples[:0]
		w.phase = phase
	}
	w.samples = append(w.samples, rateSample{at, done})
	cut := 0
	for cut < len(w.samples)-2 && at.Sub(w.samples[cut].at) > w.window {
		cut++
	}
	w.samples = w.samples[cut:]
}

// rate is units per second between the oldest and newest sample; 0 with
// fewer than two samples or no time between them.
func (w *rateWindow) rate() float64 {
	if len(w.samples) < 2 {
		return 0
	}
	first, last := w.samples[0], w.samples[len(w.samples)-1]
	dt := last.at.Sub(first.at).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(last.done-first.done) / dt
}
