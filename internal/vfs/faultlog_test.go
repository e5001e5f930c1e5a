package vfs

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestFaultLog: the first fault is logged at once with its operation and
// cause; those within FaultLogEvery of it are not, and the next line
// counts them.
func TestFaultLog(t *testing.T) {
	var buf bytes.Buffer
	clock := time.Unix(1_700_000_000, 0)
	l := &FaultLog{Log: slog.New(slog.NewTextHandler(&buf, nil)), now: func() time.Time { return clock }}
	cause := errors.New("etcd commit: rpc error: code = Unavailable")
	l.Note("Write", cause)
	l.Note("Write", cause)
	clock = clock.Add(FaultLogEvery / 2)
	l.Note("Read", cause)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "op=Write") || !strings.Contains(lines[0], "Unavailable") || !strings.Contains(lines[0], "not_logged_since_last=0") {
		t.Fatalf("logged within a second of the first fault:\n%s", buf.String())
	}
	clock = clock.Add(FaultLogEvery)
	l.Note("Read", cause)
	lines = strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "op=Read") || !strings.Contains(lines[1], "not_logged_since_last=2") {
		t.Fatalf("logged a second later (two faults not logged in between):\n%s", buf.String())
	}
}
