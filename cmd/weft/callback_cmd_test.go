package main

import (
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/job"
)

// An event's callback runs, in brief (events list) and in full (events
// show); a command line quoted as a shell would read it.
func TestCallbackOutput(t *testing.T) {
	at := time.Date(2026, 11, 24, 9, 52, 37, 0, time.UTC)
	ev := job.Event{ID: 7, Time: at, Kind: job.EventLowSpace, Subject: "pool default", Outcome: "low-space mode on",
		Params: map[string]string{"pool": "default", "usage": "62.7"},
		Callbacks: []job.CallbackRun{
			{Name: "audit", Node: "n2", Started: at, Exit: -1, Error: "not found: /usr/local/bin/audit does not exist on node n2"},
			{Name: "page", Node: "n2", Started: at, Seconds: 0.25, Exit: 3, Output: "paging\nfailed\n"},
			{Name: "quiet", Node: "n2", Started: at, Exit: 0},
		}}
	if got := callbackResults(ev); got != "audit:not found, page:exit 3, quiet:exit 0" {
		t.Errorf("callbackResults = %q", got)
	}
	if got := callbackResults(job.Event{}); got != "-" {
		t.Errorf("callbackResults of none = %q", got)
	}
	var b strings.Builder
	if err := printEvent(&b, ev); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"event     7 (low-space)\n", "params    pool=default usage=62.7\n",
		": not found after 0.00s\n  not found: /usr/local/bin/audit does not exist on node n2\n\ncallback page",
		": exit 3 after 0.25s\n  | paging\n  | failed\n", ": exit 0 after 0.00s\n  (no output)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printEvent lacks %q:\n%s", want, b.String())
		}
	}
	cb := job.Callback{Command: "/usr/local/bin/page", Args: []string{"%subject: %detail", "--pool=%pool", ""}}
	if got := commandLine(cb); got != `/usr/local/bin/page "%subject: %detail" --pool=%pool ""` {
		t.Errorf("commandLine = %s", got)
	}
}
