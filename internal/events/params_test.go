package events

import (
	"maps"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/job"
)

// The watcher's events carry the parameters a callback receives.
func TestWatcherEventParams(t *testing.T) {
	f := newWatchFixture(t, time.Minute, "multiscan", "rebalance", "repair")
	if _, err := f.cfg.Store.CreatePool(f.ctx, "default", "mirror:2", true); err != nil { // thresholds 90,70
		t.Fatal(err)
	}
	f.node("n1")
	f.drive("n1", 1, 100, 900, 5, "")
	f.drive("n1", 2, 100, 900, 5, "")
	w := New(f.cfg)
	f.check(w, 0)
	f.node("n2")
	f.drive("n2", 3, 100, 900, 5, "")
	f.check(w, 5*time.Second)
	f.drive("n1", 2, 100, 900, 5, "read-only file system")
	f.check(w, 5*time.Second)
	f.settings(20, 5)
	f.drive("n1", 1, 980, 20, 5, "")
	f.drive("n2", 3, 700, 300, 5, "")
	f.check(w, balanceInterval)

	f.drive("n1", 1, 990, 10, 5, "")
	f.drive("n2", 3, 900, 100, 5, "")
	f.check(w, 5*time.Second)

	evs, err := f.cfg.Jobs.Events(f.ctx, job.DefaultKeepEvents)
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]job.Event{}
	for _, ev := range evs {
		if _, ok := first[ev.Kind]; !ok {
			first[ev.Kind] = ev
		}
	}
	for kind, want := range map[string]map[string]string{
		job.EventNodeAdded:      {"node": "n2", "job": "1"},
		job.EventDriveAdded:     {"drive": "d3", "node": "n2", "pool": "default", "job": "1"},
		job.EventDriveDown:      {"drive": "d2", "node": "n1", "pool": "default"},
		job.EventLowSpace:       {"pool": "default", "usage": "84.0", "free": "16.0", "threshold": "20"},
		job.EventPoolUnbalanced: {"pool": "default", "spread": "28.0", "fullest": "d1", "emptiest": "d3", "job": "1"},
		job.EventPoolThreshold:  {"pool": "default", "usage": "94.5", "high": "90"},
	} {
		ev, ok := first[kind]
		if !ok {
			t.Errorf("no %s event among %d", kind, len(evs))
			continue
		}
		if !maps.Equal(ev.Params, want) {
			t.Errorf("%s event %q: params %v, want %v", kind, ev.Subject, ev.Params, want)
		}
	}
}
