package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftfs/weft/tests/harness"
)

// TestBenchIO runs weft bench io on a local cluster's mount: the strided
// pattern (4 tasks, records of 47,008 bytes interleaved in one shared
// file, each task reading its neighbour's) writes and reads back every
// record (the command checks each byte), the mount's readahead prefetches
// records for the strided readers (its metrics; the unread share is
// logged), the sequential and random patterns run on N files, and bad
// options exit 2 naming the option.
func TestBenchIO(t *testing.T) {
	t.Parallel()
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4})
	addr := freeAddr(t)
	mnt := filepath.Join(t.TempDir(), "mnt")
	c.StartMount(mnt, []string{"--metrics", addr, "--max-readahead", "8MiB"})

	const tasks, segments, rec = 4, 60, 47008
	out, code := c.Weft("bench", "io", "--json", "--pattern", "strided", "--tasks", fmt.Sprint(tasks), "--segments", fmt.Sprint(segments), mnt)
	if code != 0 {
		t.Fatalf("weft bench io --pattern strided: exit %d\n%s", code, out)
	}
	var r struct {
		Pattern  string  `json:"pattern"`
		Files    int     `json:"files"`
		Record   int     `json:"record_bytes"`
		Bytes    int64   `json:"bytes"`
		ReadMBps float64 `json:"read_mb_per_s"`
		WriteOps float64 `json:"write_ops_per_s"`
	}
	must(t, json.Unmarshal([]byte(out), &r))
	if r.Pattern != "strided" || r.Files != 1 || r.Record != rec || r.Bytes != tasks*segments*rec || r.ReadMBps <= 0 || r.WriteOps <= 0 {
		t.Fatalf("strided result: %+v\n%s", r, out)
	}
	m := mountMetrics(t, addr)
	read := m[`weft_mount_bytes_total{op="read"}`]
	records := m["weft_mount_prefetched_records_total"]
	unread := m["weft_mount_prefetch_unread_bytes_total"]
	t.Logf("strided: %+v; mount read %g bytes, %g records prefetched, %g bytes prefetched, %g unread",
		r, read, records, m["weft_mount_prefetch_bytes_total"], unread)
	// The kernel serves part of the reads from pages a neighbour's read
	// brought in, and cuts others at them; under load some prefetches
	// come too late to count. At least a quarter of the records must
	// have been prefetched (none are without stride detection).
	if records < tasks*segments/4 {
		t.Errorf("%g records prefetched for %d strided record reads, want at least a quarter of them", records, tasks*segments)
	}
	// How much of the prefetch goes unread through one mount depends on
	// the kernel: the tasks share its page cache, so a record another
	// task's read brought in is never asked of the mount and its prefetch
	// counts unread (a CI run: 13.1 MB unread for 12.0 MB read, other runs
	// 0.2-0.5 MB). It is logged here; the bound on unread prefetch is
	// asserted without the kernel, by internal/client's TestStridedPrefetch
	// (exactly the records ahead of the reader at close).
	t.Logf("prefetched and never read: %g bytes for %g read", unread, read)

	for _, args := range [][]string{
		{"--pattern", "sequential", "--tasks", "2", "--record", "262144", "--segments", "16"},
		{"--pattern", "random", "--tasks", "2", "--segments", "200"},
	} {
		out, code := c.Weft(append(append([]string{"bench", "io"}, args...), mnt)...)
		if code != 0 || !strings.Contains(out, "RECORDS/S") || !strings.Contains(out, "read") {
			t.Errorf("weft bench io %v: exit %d\n%s", args, code, out)
		}
	}
	for _, bad := range []struct{ args []string }{
		{[]string{"--pattern", "zigzag"}},
		{[]string{"--tasks", "0"}},
		{[]string{"--record", "3"}},
		{[]string{"--segments", "0"}},
	} {
		out, code := c.Weft(append(append([]string{"bench", "io"}, bad.args...), mnt)...)
		if code != 2 || !strings.Contains(out, bad.args[0]) {
			t.Errorf("weft bench io %v: exit %d, want 2 and a message naming %s\n%s", bad.args, code, bad.args[0], out)
		}
	}
	if out, code := c.Weft("bench", "io", filepath.Join(mnt, "no-such-dir")); code != 2 {
		t.Errorf("weft bench io on a missing directory: exit %d, want 2\n%s", code, out)
	}
}

// freeAddr returns a loopback address with a port free a moment ago (for
// a mount's --metrics).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// mountMetrics reads a mount's /metrics into name{labels} → value.
func mountMetrics(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, err)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		var v float64
		if _, err := fmt.Sscanf(line[i+1:], "%g", &v); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}
