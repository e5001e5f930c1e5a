package job

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// newStoreEngine returns an engine that is never started: its public
// calls only read and write etcd.
func newStoreEngine(t *testing.T, cli *clientv3.Client, keep int) *Engine {
	t.Helper()
	e, err := New(Config{Client: cli, Node: "n1", Env: &fakeEnv{node: "n1", d: newDomain(), log: testLogger()}, Log: testLogger(), KeepEvents: keep})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Event ids are dense and increasing even when several writers record at
// once; Events returns the newest, oldest first; the log keeps exactly the
// newest KeepEvents, trimmed in the transaction that records.
func TestEventLog(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.New(t)
	e := newStoreEngine(t, cli, 10)

	first, err := e.RecordEvent(ctx, Event{Kind: EventDriveAdded, Subject: "d13", Detail: "drive d13 on n4 (pool default)", Job: 12, Outcome: "started multiscan job 12"})
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != 1 || first.Time.IsZero() {
		t.Fatalf("first event: %+v", first)
	}
	// Concurrent writers: every id is taken exactly once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[uint64]bool{first.ID: true}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6 {
				ev, err := e.RecordEvent(ctx, Event{Kind: EventNodeAdded, Subject: fmt.Sprintf("node w%d-%d", w, i), Outcome: "x"})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[ev.ID] {
					t.Errorf("event id %d given twice", ev.ID)
				}
				seen[ev.ID] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 25 {
		t.Fatalf("%d distinct ids, want 25", len(seen))
	}
	for id := uint64(1); id <= 25; id++ {
		if !seen[id] {
			t.Fatalf("id %d never given: ids are not dense", id)
		}
	}

	all, err := e.Events(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 10 || all[0].ID != 16 || all[9].ID != 25 {
		t.Fatalf("Events(10) = %d events, ids %d..%d; want 16..25", len(all), all[0].ID, all[len(all)-1].ID)
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID != all[i-1].ID+1 || all[i].Time.Before(all[i-1].Time) {
			t.Fatalf("events out of order: %+v then %+v", all[i-1], all[i])
		}
	}
	// Retention: exactly the newest 10 keys are left in etcd.
	resp, err := cli.Get(ctx, prefixEvents, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 10 {
		t.Fatalf("%d event records kept (%v), want 10", resp.Count, err)
	}
	last3, err := e.Events(ctx, 3)
	if err != nil || len(last3) != 3 || last3[0].ID != 23 || last3[2].ID != 25 {
		t.Fatalf("Events(3) = %+v, %v", last3, err)
	}

	// Refusals name the input.
	for _, bad := range []Event{{Kind: "disk-on-fire", Subject: "d1"}, {Kind: EventLowSpace}} {
		if _, err := e.RecordEvent(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("RecordEvent(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	for _, n := range []int{0, -1, 11} {
		if _, err := e.Events(ctx, n); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprint(n)) {
			t.Errorf("Events(%d) = %v, want ErrInvalid naming it", n, err)
		}
	}
}

// The first event recorded reads back field for field, and a record of a
// newer format is refused rather than misread.
func TestEventRecordRoundTrip(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.New(t)
	e := newStoreEngine(t, cli, 0)
	in := Event{Kind: EventPoolUnbalanced, Subject: "pool default", Detail: "d3 71.0% used, d9 12.5% used: 58.5 points apart (threshold 5)",
		Job: 7, Outcome: "rebalance job 7 already running"}
	out, err := e.RecordEvent(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Events(ctx, DefaultKeepEvents)
	if err != nil || len(got) != 1 {
		t.Fatalf("Events = %+v, %v", got, err)
	}
	if !got[0].Time.Equal(out.Time) {
		t.Fatalf("time %v, want %v", got[0].Time, out.Time)
	}
	got[0].Time = out.Time
	if !reflect.DeepEqual(got[0], out) {
		t.Fatalf("read %+v, want %+v", got[0], out)
	}
	if _, err := cli.Put(ctx, eventKey(2), `{"v":99,"id":2,"kind":"low-space"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Events(ctx, 5); !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("Events over a newer record: %v, want ErrNewerFormat", err)
	}
}

// Settings written before the thresholds existed read back with their
// defaults; explicit zeros (off) stay zero; out-of-range values are
// refused with the setting's name.
func TestSettingsThresholds(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.New(t)
	e := newStoreEngine(t, cli, 0)
	if _, err := cli.Put(ctx, keySettings, `{"v":1,"max_running":2,"restripe_exclusive":false,"keep_jobs":50}`); err != nil {
		t.Fatal(err)
	}
	st, err := e.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Settings{MaxRunning: 2, KeepJobs: 50, LowSpaceThreshold: 5, RebalanceThreshold: 5}); st != want {
		t.Fatalf("old record reads %+v, want %+v", st, want)
	}
	st.LowSpaceThreshold, st.RebalanceThreshold = 0, 0
	if err := e.SetSettings(ctx, st); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Settings(ctx); err != nil || got != st {
		t.Fatalf("Settings = %+v, %v; want %+v", got, err, st)
	}
	for _, c := range []struct {
		s    Settings
		name string
	}{
		{Settings{MaxRunning: 3, KeepJobs: 100, LowSpaceThreshold: 51}, "low_space_threshold 51"},
		{Settings{MaxRunning: 3, KeepJobs: 100, LowSpaceThreshold: -1}, "low_space_threshold -1"},
		{Settings{MaxRunning: 3, KeepJobs: 100, RebalanceThreshold: 60}, "rebalance_threshold 60"},
	} {
		if err := e.SetSettings(ctx, c.s); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("SetSettings(%+v) = %v, want ErrInvalid naming %q", c.s, err, c.name)
		}
	}
}

// Turning low-space mode on again with a new reason keeps the time it
// started; Mode reports it.
func TestLowSpaceModeKeepsSince(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.New(t)
	e := newStoreEngine(t, cli, 0)
	if m, err := e.Mode(ctx); err != nil || m.Mode != ModeNormal || m.String() != "normal" {
		t.Fatalf("Mode = %+v, %v", m, err)
	}
	if err := e.SetLowSpace(ctx, true, "pool default: 3.1% free, below the 5% threshold"); err != nil {
		t.Fatal(err)
	}
	m1, err := e.Mode(ctx)
	if err != nil || m1.Mode != ModeLowSpace || m1.Since.IsZero() {
		t.Fatalf("Mode = %+v, %v", m1, err)
	}
	if err := e.SetLowSpace(ctx, true, "pool default: 2.0% free, below the 5% threshold"); err != nil {
		t.Fatal(err)
	}
	m2, err := e.Mode(ctx)
	if err != nil || !m2.Since.Equal(m1.Since) || !strings.Contains(m2.String(), "low-space since") || !strings.HasSuffix(m2.String(), "2.0% free, below the 5% threshold") {
		t.Fatalf("Mode after a new reason = %+v (%s), %v; want since %v", m2, m2, err, m1.Since)
	}
	if err := e.SetLowSpace(ctx, false, ""); err != nil {
		t.Fatal(err)
	}
	if m, err := e.Mode(ctx); err != nil || m.Mode != ModeNormal {
		t.Fatalf("Mode after off = %+v, %v", m, err)
	}
}

// Params are checked and copied, "job" is added from Job, Callbacks
// given to RecordEvent are dropped; Event reads one event back, and an id
// not in the log is ErrNotFound.
func TestEventParams(t *testing.T) {
	ctx := context.Background()
	e := newStoreEngine(t, etcdtest.New(t), 0)
	params := map[string]string{"pool": "fast", "usage": "96.5"}
	ev, err := e.RecordEvent(ctx, Event{Kind: EventLowSpace, Subject: "pool fast", Job: 4, Outcome: "x", Params: params,
		Callbacks: []CallbackRun{{Name: "forged"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"pool": "fast", "usage": "96.5", "job": "4"}; !reflect.DeepEqual(ev.Params, want) || len(ev.Callbacks) != 0 || len(params) != 2 {
		t.Fatalf("recorded params %v, callbacks %v (caller's map now %v)", ev.Params, ev.Callbacks, params)
	}
	got, err := e.Event(ctx, ev.ID)
	if err != nil || !reflect.DeepEqual(got.Params, ev.Params) || got.Subject != "pool fast" {
		t.Fatalf("Event(%d) = %+v, %v", ev.ID, got, err)
	}
	if _, err := e.Event(ctx, 99); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "event 99") {
		t.Fatalf("Event(99) = %v, want ErrNotFound naming it", err)
	}
	for _, k := range []string{"Pool", "1pool", "po-ol", "", strings.Repeat("p", 33)} {
		if _, err := e.RecordEvent(ctx, Event{Kind: EventLowSpace, Subject: "pool fast", Params: map[string]string{k: "x"}}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("%q", k)) {
			t.Errorf("parameter %q: %v, want ErrInvalid naming it", k, err)
		}
	}
	// An older record (no params) reads as none.
	if _, err := e.cfg.Client.Put(ctx, eventKey(50), `{"v":1,"id":50,"kind":"drive-down","subject":"d1","outcome":"x","time":"2026-01-01T00:00:00Z"}`); err != nil {
		t.Fatal(err)
	}
	if old, err := e.Event(ctx, 50); err != nil || old.Params != nil || old.Callbacks != nil || old.Subject != "d1" {
		t.Fatalf("older record: %+v, %v", old, err)
	}
}
