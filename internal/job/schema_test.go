package job

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A checkpoint (task record) survives encode/decode unchanged and carries
// the version.
func TestTaskRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	in := taskRecord{Job: 42, Phase: 2, Scope: "d7", From: 1000, To: 5000, Cursor: 2345,
		Items: 1345, Bytes: 1 << 40, Errors: 3, Note: "3 mismatches", Node: "n2", Updated: at}
	s := encode(&in)
	if !strings.Contains(s, `"v":1`) {
		t.Fatalf("encoded record has no version: %s", s)
	}
	var out taskRecord
	if err := decode("k", []byte(s), &out); err != nil {
		t.Fatal(err)
	}
	in.V = baseRecordVersion
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

func TestJobRecordRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	in := jobRecord{ID: 7, Type: "repair", State: SystemPaused, Priority: 2, Policy: "medium",
		Params: map[string]string{"path": "/a", "dry-run": "true"}, Created: at, Started: at.Add(time.Second),
		Changed: at.Add(time.Minute), Reason: "preempted by job 9 (priority 1)", Phase: 1, PhaseSplit: true,
		Phases: []PhaseReport{
			{Name: "scan", State: PhaseSucceeded, Started: at, Ended: at.Add(time.Hour), Tasks: 96, Items: 1e6, Bytes: 5e9},
			{Name: "repair", State: PhaseRunning, Started: at.Add(time.Hour)},
		}}
	var out jobRecord
	if err := decode("k", []byte(encode(&in)), &out); err != nil {
		t.Fatal(err)
	}
	in.V = baseRecordVersion
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

// A record written by a newer weft is refused, naming the key and both
// versions; one that does not parse or has no version is corrupt.
func TestDecodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     error
		msg      string
	}{
		{"newer", `{"v":5,"job":1,"from":0,"to":9}`, ErrNewerFormat, "record version 5, this weft reads up to 4"},
		{"no version", `{"job":1}`, ErrCorrupt, "no record version"},
		{"zero version", `{"v":0}`, ErrCorrupt, "no record version"},
		{"garbage", `{"v":1,`, ErrCorrupt, "/weft/jobs/task/x"},
		{"wrong type", `{"v":1,"to":"nine"}`, ErrCorrupt, "/weft/jobs/task/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r taskRecord
			err := decode("/weft/jobs/task/x", []byte(tc.in), &r)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("decode(%s) = %v, want %v containing %q", tc.in, err, tc.want, tc.msg)
			}
		})
	}
	var j jobRecord
	if err := decode("k", []byte(`{"v":1,"state":"sleeping"}`), &j); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown state: %v, want ErrCorrupt", err)
	}
}

// Task keys order by job, phase, scope, then range start, and a steal's
// new key never collides with an existing task's.
func TestTaskKeys(t *testing.T) {
	keys := []string{
		taskSuffix(1, 0, "", 0),
		taskSuffix(1, 0, "", 0x10),
		taskSuffix(1, 0, "d1", 0),
		taskSuffix(1, 1, "", 0),
		taskSuffix(2, 0, "", 0),
		taskSuffix(10, 0, "", 0),
	}
	for i := 1; i < len(keys); i++ {
		if keys[i-1] >= keys[i] {
			t.Fatalf("keys out of order: %s >= %s", keys[i-1], keys[i])
		}
	}
	if !strings.HasPrefix(taskSuffix(3, 2, "d/../x", 5), phaseSuffix(3, 2)) || strings.Count(taskSuffix(3, 2, "d/../x", 5), "/") != 3 {
		t.Fatalf("scope not escaped: %s", taskSuffix(3, 2, "d/../x", 5))
	}
	if !strings.HasPrefix(phaseSuffix(3, 2), jobSuffix(3)) {
		t.Fatal("phase suffix does not extend job suffix")
	}
}

// A steal splits half of what remains, never inside the holder's
// reservation, and never leaves either half narrower than the minimum.
func TestStealPoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		rec  taskRecord
		mid  uint64
		ok   bool
	}{
		{"half of what remains", taskRecord{From: 0, To: 1000, Cursor: 200}, 600, true},
		{"a reservation below the half", taskRecord{From: 0, To: 1000, Cursor: 200, Reserved: 400}, 600, true},
		{"a reservation past the half", taskRecord{From: 0, To: 1000, Cursor: 200, Reserved: 800}, 800, true},
		{"a reservation leaving too little", taskRecord{From: 0, To: 1000, Cursor: 200, Reserved: 960}, 0, false},
		{"a reservation to the end", taskRecord{From: 0, To: 1000, Cursor: 200, Reserved: 1000}, 0, false},
		{"too little left", taskRecord{From: 0, To: 1000, Cursor: 900}, 0, false},
		{"done", taskRecord{From: 0, To: 1000, Cursor: 0, Done: true}, 0, false},
	} {
		mid, ok := stealPoint(tc.rec, 64)
		if mid != tc.mid || ok != tc.ok {
			t.Errorf("%s: stealPoint = %d, %v; want %d, %v", tc.name, mid, ok, tc.mid, tc.ok)
		}
	}
	// A reserved record is written as version 3, which older nodes refuse
	// rather than steal inside the reservation.
	r := taskRecord{To: 9, Reserved: 5}
	if encode(&r); r.V != 3 {
		t.Fatalf("a reserved task record is written as version %d, want 3", r.V)
	}
	r = taskRecord{To: 9, Affinity: "n1"}
	if encode(&r); r.V != 2 {
		t.Fatalf("a pinned task record is written as version %d, want 2", r.V)
	}
	// A serial one as version 4, which version-3 nodes refuse rather than
	// steal from it; it decodes as serial.
	r = taskRecord{To: 9, Reserved: 5, Serial: true}
	var back taskRecord
	if err := decode("k", []byte(encode(&r)), &back); err != nil || r.V != 4 || !back.Serial {
		t.Fatalf("a serial task record: written as version %d, read back as %+v, %v; want version 4, serial", r.V, back, err)
	}
}
