package tests

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/admin"
)

// series records the outcome of every operation of one kind (a write
// through the mount, a status call, …) over a fault, so that a test can
// measure how long the operations stalled and log a per-second timeline.
type series struct {
	name string
	mu   sync.Mutex
	ops  []op
}

type op struct {
	start, end time.Time
	err        error
}

// do runs fn and records it.
func (s *series) do(fn func() error) error {
	start := time.Now()
	err := fn()
	s.mu.Lock()
	s.ops = append(s.ops, op{start: start, end: time.Now(), err: err})
	s.mu.Unlock()
	return err
}

// snapshot returns the recorded operations by end time.
func (s *series) snapshot() []op {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]op(nil), s.ops...)
	sort.Slice(out, func(i, j int) bool { return out[i].end.Before(out[j].end) })
	return out
}

// stall returns the longest stretch of [from, to] in which no operation
// succeeded — from `from` to the first success, between two successes, or
// from the last success to `to` — and where it began.
func (s *series) stall(from, to time.Time) (time.Duration, time.Time) {
	last := from
	var worst time.Duration
	var at time.Time
	gap := func(end time.Time) {
		if d := end.Sub(last); d > worst {
			worst, at = d, last
		}
	}
	for _, o := range s.snapshot() {
		if o.err != nil || o.end.Before(from) || o.end.After(to) {
			continue
		}
		gap(o.end)
		last = o.end
	}
	gap(to)
	return worst, at
}

// firstOK returns how long after `after` the first operation that
// started then or later succeeded (false: none did).
func (s *series) firstOK(after time.Time) (time.Duration, bool) {
	for _, o := range s.snapshot() {
		if o.err == nil && !o.start.Before(after) {
			return o.end.Sub(after), true
		}
	}
	return 0, false
}

// errors returns up to n distinct error messages seen in [from, to].
func (s *series) errors(from, to time.Time, n int) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range s.snapshot() {
		if o.err == nil || o.end.Before(from) || o.end.After(to) || seen[o.err.Error()] {
			continue
		}
		seen[o.err.Error()] = true
		if out = append(out, o.err.Error()); len(out) == n {
			break
		}
	}
	return out
}

// timeline formats, per second since t0, how many operations ended well
// and badly ("12/0"), and the longest one of the second.
func (s *series) timeline(t0, end time.Time) string {
	n := int(end.Sub(t0)/time.Second) + 1
	ok, bad := make([]int, n), make([]int, n)
	long := make([]time.Duration, n)
	for _, o := range s.snapshot() {
		i := int(o.end.Sub(t0) / time.Second)
		if i < 0 || i >= n {
			continue
		}
		if o.err == nil {
			ok[i]++
		} else {
			bad[i]++
		}
		long[i] = max(long[i], o.end.Sub(o.start))
	}
	var b strings.Builder
	for i := range n {
		if i%10 == 0 {
			fmt.Fprintf(&b, "\n  %-7s %3ds:", s.name, i)
		}
		fmt.Fprintf(&b, " %d/%d", ok[i], bad[i])
		if long[i] > time.Second {
			fmt.Fprintf(&b, "(%.0fs)", long[i].Seconds())
		}
	}
	return b.String()
}

// etcdCounterNames are the embedded etcd member's counters a fault test
// logs.
var etcdCounterNames = []string{
	"etcd_server_is_leader", "etcd_server_leader_changes_seen_total", "etcd_server_proposals_failed_total",
	"etcd_server_slow_read_indexes_total", "etcd_server_read_indexes_failed_total", "etcd_server_heartbeat_send_failures_total",
	"etcd_network_peer_sent_failures_total", "etcd_server_snapshot_apply_in_progress_total",
	"etcd_network_snapshot_receive_success", "etcd_network_snapshot_send_success",
	"etcd_mvcc_db_total_size_in_bytes",
	"etcd_disk_wal_fsync_duration_seconds_sum", "etcd_disk_wal_fsync_duration_seconds_count",
	"etcd_disk_backend_commit_duration_seconds_sum", "etcd_disk_backend_commit_duration_seconds_count",
}

// etcdMetrics returns the named metrics (summed over their labels) from
// one node's /metrics, read through its admin API with the cluster's
// credentials (an answer other than 200 is an error: a refused request
// must not read as "every counter is zero").
func etcdMetrics(node *admin.Client, names []string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, node.Base()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	node.Authorize(req)
	resp, err := node.HTTP().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", node.Base(), resp.Status)
	}
	sums := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, w := range names {
			if strings.HasPrefix(line, w+" ") || strings.HasPrefix(line, w+"{") {
				var v float64
				if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
					sums[w] += v
				}
			}
		}
	}
	return sums, sc.Err()
}

// etcdCounters formats a node's etcd counters for the test log.
func etcdCounters(node *admin.Client) string {
	sums, err := etcdMetrics(node, etcdCounterNames)
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, w := range etcdCounterNames {
		if v, ok := sums[w]; ok {
			parts = append(parts, fmt.Sprintf("%s=%g", strings.TrimPrefix(w, "etcd_"), v))
		}
	}
	return strings.Join(parts, " ")
}
