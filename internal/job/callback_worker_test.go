package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/runner"
)

func TestExpandArg(t *testing.T) {
	vars := map[string]string{"id": "7", "kind": "low-space", "pool": "fast", "usage": "96.5", "job": ""}
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"%pool", "fast"},
		{"--pool=%pool", "--pool=fast"},
		{"%pool/%usage%%", "fast/96.5%"},
		{"%kind:%id", "low-space:7"},
		{"%drive", ""}, // a parameter the event lacks
		{"%job", ""},
		{"50%", "50%"},
		{"% %-x %%pool", "% %-x %pool"},
		{"%POOL", "%POOL"}, // names are lower case
	} {
		if got := ExpandArg(tc.in, vars); got != tc.want {
			t.Errorf("ExpandArg(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The command's environment: the event's variables, parameters upper
// cased, and none of the same names inherited.
func TestCallbackEnv(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 30, 0, 0, time.UTC)
	ev := Event{ID: 9, Time: at, Kind: EventLowSpace, Subject: "pool fast", Detail: "pool fast: 3.5% free", Params: map[string]string{"pool": "fast", "usage": "96.5"}}
	got := CallbackEnv([]string{"PATH=/bin", "WEFT_PARAM_STALE=x", "WEFT_EVENT_ID=1", "WEFT_ADMIN=n1:9000"}, ev)
	want := []string{"PATH=/bin", "WEFT_ADMIN=n1:9000", "WEFT_EVENT_ID=9", "WEFT_EVENT_KIND=low-space", "WEFT_EVENT_SUBJECT=pool fast",
		"WEFT_EVENT_DETAIL=pool fast: 3.5% free", "WEFT_EVENT_JOB=", "WEFT_EVENT_TIME=2026-05-01T12:30:00Z", "WEFT_PARAM_POOL=fast", "WEFT_PARAM_USAGE=96.5"}
	if !slices.Equal(got, want) {
		t.Fatalf("CallbackEnv =\n%q\nwant\n%q", got, want)
	}
}

// The output kept is the tail, from a whole character.
func TestTailWriter(t *testing.T) {
	w := &tailWriter{max: 8}
	for _, s := range []string{"0123", "456789", "é", "abcdefghij"} {
		w.Write([]byte(s))
	}
	if got := w.String(); got != "cdefghij" {
		t.Fatalf("tail = %q", got)
	}
	w = &tailWriter{max: 4}
	w.Write([]byte("xxé€")) // the tail starts inside é
	if got := w.String(); got != "€" {
		t.Fatalf("tail = %q, want the whole characters only", got)
	}
}

// callbackRig is an engine that is never started, and a callbacks worker
// that acts as coordinator under a term the test controls.
type callbackRig struct {
	t   *testing.T
	cli *clientv3.Client
	e   *Engine
	w   *CallbackWorker
	dir string
}

func newCallbackRig(t *testing.T) *callbackRig {
	cli := etcdtest.New(t)
	r := &callbackRig{t: t, cli: cli, e: newStoreEngine(t, cli, 0), dir: t.TempDir()}
	r.w = r.worker("n1")
	return r
}

// worker returns a callbacks worker for node whose term is an election
// key the test writes (deleting it ends the term).
func (r *callbackRig) worker(node string) *CallbackWorker {
	r.t.Helper()
	key := electionPrefix + "/" + node
	resp, err := r.cli.Put(context.Background(), key, node)
	if err != nil {
		r.t.Fatal(err)
	}
	term := &coordTerm{key: key, rev: resp.Header.Revision}
	e := r.e
	if node != "n1" {
		var err error
		if e, err = New(Config{Client: r.cli, Node: node, Env: &fakeEnv{node: node, d: newDomain(), log: testLogger()}, Log: testLogger()}); err != nil {
			r.t.Fatal(err)
		}
	}
	w := e.CallbackWorker()
	w.term = func() *coordTerm { return term }
	return w
}

// endTerm deletes w's election key: its node is no longer coordinator,
// though (like a node that has not noticed yet) it still believes so.
func (r *callbackRig) endTerm(w *CallbackWorker) {
	r.t.Helper()
	if _, err := r.cli.Delete(context.Background(), w.term().key); err != nil {
		r.t.Fatal(err)
	}
}

// script writes an executable shell script named name that runs body.
func (r *callbackRig) script(name, body string) string {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// drain steps w until it is idle.
func (r *callbackRig) drain(w *CallbackWorker) {
	r.t.Helper()
	for range 100 {
		st, err := w.Step(context.Background())
		if err != nil {
			r.t.Fatalf("step: %v", err)
		}
		if st == runner.Idle {
			return
		}
	}
	r.t.Fatal("the callbacks worker is still busy after 100 steps")
}

func (r *callbackRig) record(ev Event) Event {
	r.t.Helper()
	ev, err := r.e.RecordEvent(context.Background(), ev)
	if err != nil {
		r.t.Fatal(err)
	}
	return ev
}

func (r *callbackRig) add(c Callback) {
	r.t.Helper()
	if _, err := r.e.AddCallback(context.Background(), c); err != nil {
		r.t.Fatal(err)
	}
}

func (r *callbackRig) event(id uint64) Event {
	r.t.Helper()
	ev, err := r.e.Event(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return ev
}

// runs reads the lines a script appended to the file log.
func (r *callbackRig) runs(log string) []string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, log))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// A callback runs for the events it matches, recorded after it was
// added, with the event in its environment and arguments; its exit
// status and output are stored with the event; callbacks of an event run
// in name order; a missing or non-executable command and a timeout are
// results, not failures of the worker.
func TestCallbackWorkerRuns(t *testing.T) {
	r := newCallbackRig(t)
	before := r.record(Event{Kind: EventLowSpace, Subject: "pool old", Outcome: "x"})
	r.drain(r.w) // the first cursor: after the newest event
	echo := r.script("echo.sh", `echo "args: $*"
env | grep '^WEFT_EVENT_\|^WEFT_PARAM_' | sort
echo "$WEFT_EVENT_ID" >> `+filepath.Join(r.dir, "echo.log")+`
exit 3`)
	r.add(Callback{Name: "b-echo", Events: []string{EventLowSpace, EventDriveDown}, Command: echo, Args: []string{"%kind", "pool=%pool", "%usage%%", "%job"}})
	r.add(Callback{Name: "a-missing", Events: []string{EventLowSpace}, Command: filepath.Join(r.dir, "nothing-here")})
	r.add(Callback{Name: "c-plain", Events: []string{CallbackAll}, Command: r.script("plain.txt", "exit 0")})
	if err := os.Chmod(filepath.Join(r.dir, "plain.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	low := r.record(Event{Kind: EventLowSpace, Subject: "pool fast", Detail: "pool fast: 3.5% free", Job: 12, Outcome: "low-space mode on",
		Params: map[string]string{"pool": "fast", "usage": "96.5"}})
	added := r.record(Event{Kind: EventDriveAdded, Subject: "d4", Outcome: "x"})
	r.drain(r.w)

	if got := r.runs("echo.log"); !slices.Equal(got, []string{fmt.Sprint(low.ID)}) {
		t.Fatalf("echo ran for events %v, want only %d (not %d, recorded before it was added)", got, low.ID, before.ID)
	}
	ev := r.event(low.ID)
	names := func(runs []CallbackRun) []string {
		var out []string
		for _, c := range runs {
			out = append(out, c.Name+"="+c.Result())
		}
		return out
	}
	if got := names(ev.Callbacks); !slices.Equal(got, []string{"a-missing=not found", "b-echo=exit 3", "c-plain=not executable"}) {
		t.Fatalf("runs of event %d: %v", low.ID, got)
	}
	run := ev.Callbacks[1]
	for _, want := range []string{"args: low-space pool=fast 96.5% 12\n", "WEFT_EVENT_DETAIL=pool fast: 3.5% free\n", "WEFT_EVENT_JOB=12\n",
		fmt.Sprintf("WEFT_EVENT_ID=%d\n", low.ID), "WEFT_EVENT_KIND=low-space\n", "WEFT_EVENT_SUBJECT=pool fast\n",
		"WEFT_EVENT_TIME=" + low.Time.Format(time.RFC3339) + "\n", "WEFT_PARAM_JOB=12\n", "WEFT_PARAM_POOL=fast\n", "WEFT_PARAM_USAGE=96.5\n"} {
		if !strings.Contains(run.Output, want) {
			t.Errorf("echo's output lacks %q:\n%s", want, run.Output)
		}
	}
	if run.Exit != 3 || run.Error != "" || run.Node != "n1" || run.Started.IsZero() || run.Seconds <= 0 {
		t.Errorf("echo's run: %+v", run)
	}
	if miss := ev.Callbacks[0]; miss.Exit != -1 || !strings.Contains(miss.Error, "nothing-here does not exist on node n1") {
		t.Errorf("missing command's run: %+v", miss)
	}
	if got := names(r.event(added.ID).Callbacks); !slices.Equal(got, []string{"c-plain=not executable"}) {
		t.Fatalf("runs of event %d (drive-added): %v, want only the callback for all kinds", added.ID, got)
	}
	if got := r.event(before.ID).Callbacks; len(got) != 0 {
		t.Fatalf("event %d, recorded before the callbacks, has runs: %+v", before.ID, got)
	}

	// A timeout kills the command's whole process group, and the
	// worker goes on with the next event.
	r.add(Callback{Name: "d-slow", Events: []string{EventNodeAdded}, Command: r.script("slow.sh", "sleep 60 & sleep 60; echo never"), Timeout: time.Second})
	slow := r.record(Event{Kind: EventNodeAdded, Subject: "node n9", Outcome: "x"})
	after := r.record(Event{Kind: EventDriveDown, Subject: "d2", Outcome: "x"})
	r.drain(r.w)
	if got := names(r.event(slow.ID).Callbacks); !slices.Equal(got, []string{"c-plain=not executable", "d-slow=timeout"}) {
		t.Fatalf("runs of the slow event: %v", got)
	}
	if got := r.runs("echo.log"); !slices.Equal(got, []string{fmt.Sprint(low.ID), fmt.Sprint(after.ID)}) {
		t.Fatalf("echo ran for events %v, want %d and %d", got, low.ID, after.ID)
	}
	cur := r.cursor()
	if cur.Last != after.ID || cur.Node != "n1" {
		t.Fatalf("cursor %+v, want event %d by n1", cur, after.ID)
	}
	// Nothing new: nothing runs again.
	r.drain(r.w)
	if got := r.runs("echo.log"); len(got) != 2 {
		t.Fatalf("echo ran again: %v", got)
	}
}

func (r *callbackRig) cursor() callbackCursorRecord {
	r.t.Helper()
	resp, err := r.cli.Get(context.Background(), keyCallbackCursor)
	if err != nil || len(resp.Kvs) != 1 {
		r.t.Fatalf("cursor: %v, %v", resp, err)
	}
	var c callbackCursorRecord
	if err := decode(keyCallbackCursor, resp.Kvs[0].Value, &c); err != nil {
		r.t.Fatal(err)
	}
	return c
}

// A failover: the new coordinator neither runs again what the old one
// stored nor skips what it had not; a run whose result was not stored
// when the term ended runs again (at least once); a deposed coordinator
// runs nothing more.
func TestCallbackWorkerFailover(t *testing.T) {
	r := newCallbackRig(t)
	r.drain(r.w)
	log := filepath.Join(r.dir, "runs.log")
	r.add(Callback{Name: "log", Events: []string{EventDriveDown}, Command: r.script("log.sh", `echo "$WEFT_EVENT_ID" >> `+log)})
	e1 := r.record(Event{Kind: EventDriveDown, Subject: "d1", Outcome: "x"})
	r.drain(r.w)
	e2 := r.record(Event{Kind: EventDriveDown, Subject: "d2", Outcome: "x"})

	// n1 runs e2's callback, then dies before storing its run.
	if err := failpoint.Enable("job/after-callback", "1*error"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Disable("job/after-callback") })
	if _, err := r.w.Step(context.Background()); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("step with the failpoint: %v", err)
	}
	r.endTerm(r.w)
	e3 := r.record(Event{Kind: EventDriveDown, Subject: "d3", Outcome: "x"})

	// The deposed n1 runs nothing, though it believes it coordinates.
	r.drain(r.w)
	if got := r.runs("runs.log"); !slices.Equal(got, []string{fmt.Sprint(e1.ID), fmt.Sprint(e2.ID)}) {
		t.Fatalf("runs after n1's term ended: %v", got)
	}
	// n2 takes over: e1 is done, e2 runs again, e3 runs once.
	w2 := r.worker("n2")
	r.drain(w2)
	if got := r.runs("runs.log"); !slices.Equal(got, []string{fmt.Sprint(e1.ID), fmt.Sprint(e2.ID), fmt.Sprint(e2.ID), fmt.Sprint(e3.ID)}) {
		t.Fatalf("runs after n2 took over: %v", got)
	}
	for _, id := range []uint64{e1.ID, e2.ID, e3.ID} {
		if runs := r.event(id).Callbacks; len(runs) != 1 || runs[0].Exit != 0 {
			t.Fatalf("event %d runs: %+v, want one stored run", id, runs)
		}
	}
	if got := r.event(e2.ID).Callbacks[0].Node; got != "n2" {
		t.Fatalf("event %d's stored run is from %s, want n2 (n1's was lost)", e2.ID, got)
	}
	if cur := r.cursor(); cur.Last != e3.ID || cur.Node != "n2" {
		t.Fatalf("cursor %+v", cur)
	}
}

// A node that is not coordinator is idle and touches nothing.
func TestCallbackWorkerNotCoordinator(t *testing.T) {
	r := newCallbackRig(t)
	w := r.e.CallbackWorker() // the engine is never started: never coordinator
	if st, err := w.Step(context.Background()); err != nil || st != runner.Idle {
		t.Fatalf("step = %v, %v", st, err)
	}
	resp, err := r.cli.Get(context.Background(), keyCallbackCursor)
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("cursor written by a node that is not coordinator: %v, %v", resp.Kvs, err)
	}
}
