package tests

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/tests/harness"
)

// TestQoSLimitsMaintenance: with pool=*,maintenance=40IOPS enabled, an
// integrity scan over many small files is held to 40 block I/Os per
// second over the whole cluster (each 5-second interval of weft qos
// stats at most 5 % over, and the drives' own read counters over 10 s of
// the scan within -10 % and +5 %), while a client writing through the
// mount at the same time is not queued by QoS at all; weft qos stats
// --fine --csv then shows the scan's job and the mount's writes, with
// the writer's pid.
func TestQoSLimitsMaintenance(t *testing.T) {
	// Not parallel: it bounds stalls and rates in seconds, which a
	// neighbouring cluster test\'s load on two cores can break.
	const limit = 40.0
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, Mount: true})
	c.KeepLogs()
	// 200 small files: each is mirrored (3 blocks), so the scan reads
	// about 600 blocks, some 15 s at the limit.
	for i := range 200 {
		writeFile(t, filepath.Join(c.Mount, fmt.Sprintf("s%03d", i)), randBytes(uint64(i+1), 16<<10))
	}
	// The multiscan the coordinator starts for the new cluster's nodes
	// and drives would pause the scan (exclusion set mark): let it end.
	waitMultiscan(t, c)
	if out, code := c.Weft("qos", "set", "pool=*,maintenance=40IOPS,other=unlimited"); code != 0 {
		t.Fatalf("weft qos set: %s", out)
	}
	if out, code := c.Weft("qos", "enable"); code != 0 {
		t.Fatalf("weft qos enable: %s", out)
	}
	waitQoSShares(t, c, limit)
	started := time.Now()
	id := startJob(t, c, "integrityscan", "--policy", "high")
	// Client I/O during the scan: 48 MiB through the mount, 2 s into it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		j, err := c.Admin.Job(t.Context(), id)
		if err == nil && len(j.Phases) > 0 && !j.Phases[0].Started.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scan did not start in 30 s: %+v %v", j, err)
		}
	}
	time.Sleep(2 * time.Second)
	// The drives' own counters over 10 s of the scan: the block reads
	// (the client only writes) of every drive.
	before, t0 := driveReads(t, c), time.Now()
	clientStart := time.Now()
	writeFile(t, filepath.Join(c.Mount, "big"), randBytes(7, 48<<20))
	clientTook := time.Since(clientStart)
	time.Sleep(10*time.Second - time.Since(t0))
	reads := float64(driveReads(t, c)-before) / time.Since(t0).Seconds()
	// No node's job throttle grows the scan's workers while QoS queues
	// its I/O: the throttle holds them for QoS ("near: QoS holds back
	// ..."), or backs off for a load over its thresholds (a busy test
	// machine's CPU).
	for _, n := range []string{"n1", "n2", "n3"} {
		st, err := c.NodeAdmin(n).JobStatus(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, jt := range st.Throttle.Jobs {
			t.Logf("%s throttle of job %s: %.2f workers, %s", n, jt.Job, jt.Target, jt.Pressure)
			if strings.HasPrefix(jt.Pressure, "under") {
				t.Errorf("%s: the job throttle would grow the scan's workers while QoS queues its I/O: %s", n, jt.Pressure)
			}
		}
	}
	j := c.WaitJob(id, 2*time.Minute)
	took := time.Since(started)
	if j.State != job.Succeeded {
		t.Fatalf("integrityscan: %+v", j)
	}
	for _, p := range j.Phases {
		t.Logf("phase %+v", p)
	}
	t.Logf("the drives read %.1f blocks per second over 10 s of the scan", reads)
	if reads > limit*1.05 || reads < limit*0.9 {
		t.Errorf("the drives' counters: %.1f reads per second over 10 s of the scan; want the limit %.0f (-10 %%, +5 %%)", reads, limit)
	}
	if took > 50*time.Second {
		t.Fatalf("the scan took %v: the statistics (60 s) no longer cover it", took)
	}
	st := qosStats(t, c, 60, 5)
	var busy int
	for _, r := range st.Rows {
		t.Logf("%s %-6s %-11s %6.1f IOPS %7.2f MB/s pending %.3f queued %.3f", time.Unix(r.Start, 0).Format("15:04:05"), r.Pool, r.Class, r.IOPS, r.MBps, r.Pending, r.Queued)
		switch r.Class {
		case qos.Maintenance:
			if r.IOPS > limit*1.05 {
				t.Errorf("interval at %s: maintenance %.1f IOPS, over the limit of %.0f by more than 5 %%", time.Unix(r.Start, 0).Format(time.TimeOnly), r.IOPS, limit)
			}
			if r.IOPS >= limit*0.9 {
				busy++
			}
		case qos.Other:
			if r.Queued != 0 {
				t.Errorf("interval at %s: client I/O was queued by QoS (%.3f on average); it is unlimited", time.Unix(r.Start, 0).Format(time.TimeOnly), r.Queued)
			}
		}
	}
	if busy < 1 {
		t.Errorf("no 5-second interval had maintenance I/O at the limit (within 10 %%): the scan was not held by QoS")
	}
	// The client's busiest second went past the maintenance limit.
	var peak float64
	for _, r := range qosStats(t, c, 60, 1).Rows {
		if r.Class == qos.Other {
			peak = max(peak, r.IOPS)
		}
	}
	t.Logf("scan %v (%d of %d intervals at the limit); client wrote 48 MiB in %v, peak %.0f IOPS", took.Round(time.Millisecond), busy, len(st.Rows), clientTook.Round(time.Millisecond), peak)
	if peak <= limit*1.05 {
		t.Errorf("client I/O peaked at %.1f IOPS: not above the maintenance limit, as if it were held too", peak)
	}
	checkFineStats(t, c, id.String())
}

// checkFineStats runs weft qos stats --fine --csv over the last minute:
// it has rows of maintenance reads of job jobID from a node's jobs, and
// rows of the mount's writes (client mount-...) with the pid of the
// writing process.
func checkFineStats(t *testing.T, c *harness.Cluster, jobID string) {
	t.Helper()
	out, code := c.Weft("qos", "stats", "--fine", "--csv", "--seconds", "60", "--interval", "60")
	if code != 0 {
		t.Fatalf("weft qos stats --fine --csv: exit %d:\n%s", code, out)
	}
	var lines []string // stdout: stderr's lines start with "weft: "
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "weft: ") {
			lines = append(lines, l)
		}
	}
	recs, err := csv.NewReader(strings.NewReader(strings.Join(lines, "\n"))).ReadAll()
	if err != nil || len(recs) < 2 || recs[0][0] != "node" {
		t.Fatalf("weft qos stats --fine --csv: %v\n%s", err, out)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	var jobRows, mountRows, withPID int
	for _, r := range recs[1:] {
		switch {
		case r[col["class"]] == "maintenance" && r[col["job"]] == jobID && strings.HasPrefix(r[col["client"]], "node-"):
			jobRows++
		case r[col["class"]] == "other" && r[col["rw"]] == "w" && strings.HasPrefix(r[col["client"]], "mount-"):
			mountRows++
			if r[col["pid"]] != "" {
				withPID++
			}
		}
	}
	t.Logf("weft qos stats --fine --csv: %d rows, %d of job %s, %d of the mount's writes (%d with a pid)", len(recs)-1, jobRows, jobID, mountRows, withPID)
	if jobRows == 0 || mountRows == 0 || withPID == 0 {
		t.Errorf("weft qos stats --fine --csv: want rows of job %s from a node's jobs and of the mount's writes with a pid:\n%s", jobID, out)
	}
}

// waitMultiscan waits until the multiscan a new cluster starts by itself
// has ended (or none came in 20 s) and no other job runs.
func waitMultiscan(t *testing.T, c *harness.Cluster) {
	t.Helper()
	start := time.Now()
	for {
		jobs, err := c.Admin.Jobs(t.Context())
		busy, seen := err != nil, false
		for _, j := range jobs {
			busy = busy || !j.State.Terminal()
			seen = seen || j.Type == "multiscan"
		}
		if !busy && (seen || time.Since(start) > 20*time.Second) {
			return
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("jobs still running after a minute: %v %+v", err, jobs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// driveReads returns the read operations the drives of every node have
// counted since their start.
func driveReads(t *testing.T, c *harness.Cluster) uint64 {
	t.Helper()
	drives, err := c.Admin.Drives(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var n uint64
	for _, d := range drives {
		if seen[d.Node] {
			continue
		}
		seen[d.Node] = true
		cs, err := c.DriveBlocks(d).Counters(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, dc := range cs {
			n += dc.Read.Ops
		}
	}
	return n
}

// waitQoSShares waits until every node follows the configuration: each
// of the three holds a maintenance share of the default pool, and the
// shares add up to the cluster-wide limit (the follower's watch, then
// the next re-share).
func waitQoSShares(t *testing.T, c *harness.Cluster, limit float64) {
	t.Helper()
	poll(t, 10*time.Second, "every node holds its share of the maintenance limit", func() bool {
		var show admin.QoSShow
		weftJSON(t, c, &show, "qos", "show")
		sum, holders := 0.0, 0
		for _, n := range show.Nodes {
			for _, sh := range n.Shares {
				if sh.Pool == "default" && sh.Class == qos.Maintenance && sh.IOPS > 0 {
					sum += sh.IOPS
					holders++
				}
			}
		}
		return holders == 3 && sum >= limit*0.99 && sum <= limit*1.01
	})
}

// qosStats runs weft qos stats --json.
func qosStats(t *testing.T, c *harness.Cluster, seconds, interval int) admin.QoSStats {
	t.Helper()
	out, code := c.Weft("qos", "stats", "--json", "--seconds", fmt.Sprint(seconds), "--interval", fmt.Sprint(interval))
	var st admin.QoSStats
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("weft qos stats: %s", out)
	}
	if len(st.Errors) > 0 || len(st.Nodes) != 3 {
		t.Fatalf("weft qos stats: nodes %v, errors %v", st.Nodes, st.Errors)
	}
	return st
}
