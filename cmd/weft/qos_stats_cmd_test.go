package main

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/qos"
)

// TestFineCSV: weft qos stats --fine --csv prints the header row, then a
// row per key with its unknowns empty and an Other row as size "other".
func TestFineCSV(t *testing.T) {
	at := time.Date(2026, 11, 24, 13, 0, 5, 0, time.UTC).Unix()
	rows := []qos.FineRow{
		{Node: "n1", Start: at, Seconds: 5, FineSample: qos.FineSample{Pool: "default", Class: qos.Other, Dir: qos.Write, Size: qos.SizeUnit,
			Client: "mount-3f", PID: 4242, FineCounts: qos.FineCounts{Counts: qos.Counts{Ops: 10, Bytes: 10 << 20}}},
			MBps: 2.097152, AvgMs: 1.5, MinMs: 0.25, MaxMs: 4, DriveAvgMs: 1.25, DriveMinMs: 0.25, DriveMaxMs: 3, Queued: 0.001, Pending: 0.0025},
		{Node: "n2", Start: at, Seconds: 5, FineSample: qos.FineSample{Pool: "default", Class: qos.Maintenance, Dir: qos.Read, Other: true,
			FineCounts: qos.FineCounts{Counts: qos.Counts{Ops: 3}}}},
	}
	var out bytes.Buffer
	if err := printFineCSV(&out, rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		fineCSVHeader,
		{"n1", "2026-11-24T13:00:05Z", "5", "default", "other", "w", "unit", "", "mount-3f", "4242", "10", "10485760",
			"2.097152", "1.500", "0.250", "4.000", "1.250", "0.250", "3.000", "0.001000", "0.002500"},
		{"n2", "2026-11-24T13:00:05Z", "5", "default", "maintenance", "r", "other", "", "", "", "3", "0",
			"0.000000", "0.000", "0.000", "0.000", "0.000", "0.000", "0.000", "0.000000", "0.000000"},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(recs), len(want), out.String())
	}
	for i := range want {
		if strings.Join(recs[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("record %d:\n got %s\nwant %s", i, strings.Join(recs[i], ","), strings.Join(want[i], ","))
		}
	}
}

// TestStatsCSV: weft qos stats --csv (without --fine) prints a header
// row and a row per interval, pool and class.
func TestStatsCSV(t *testing.T) {
	at := time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC).Unix()
	var out bytes.Buffer
	if err := printStatsCSV(&out, []qos.Row{{Start: at, Seconds: 5, Pool: "default", Class: qos.Maintenance,
		Counts: qos.Counts{Ops: 200, Bytes: 3 << 20}, IOPS: 40, MBps: 0.6291456, Pending: 0.05, Queued: 9.25}}); err != nil {
		t.Fatal(err)
	}
	want := "start,seconds,pool,class,ops,bytes,iops,mb_per_sec,pending,queued\n" +
		"2026-11-24T13:00:00Z,5,default,maintenance,200,3145728,40.000,0.629146,0.050000,9.250000\n"
	if out.String() != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", out.String(), want)
	}
}
