package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/tests/harness"
)

// The partition test's phases. The partition lasts as long as in the
// report that found the stall (40–60 s): long enough for the cut-off
// node's lease to expire and for its etcd member to fall far behind.
const (
	partitionWarmup = 5 * time.Second
	partitionHold   = 45 * time.Second
	partitionAfter  = 20 * time.Second
	// partitionWriters write at once, each one file after the other:
	// enough metadata commits that the returning member needs a snapshot.
	partitionWriters = 4
	// partitionBallastMiB is written into etcd before the test, so that
	// the snapshot is of a database of some size (1.5 GiB gave 44 EIOs
	// and a 2.4 s status stall after the heal before the fix).
	partitionBallastMiB = 768
	// healBound is how long status, reads and writes may stall after
	// the heal (the goal, measured at about 1 s here; see
	// docs/architecture.md, "Partitions").
	healBound = 5 * time.Second
)

// TestPartitionHeal cuts one node of a 3-node cluster (an etcd follower)
// off the network for 45 s while four writers keep writing small fsync'd
// files through a mount and a reader reads them back through a second
// mount, then heals the partition: status, reads and writes must each
// stall at most 5 s after the heal, and every acknowledged write must read
// back. The per-second timelines and the members' etcd counters are
// logged. It takes about 4 minutes.
func TestPartitionHeal(t *testing.T) {
	// Not parallel: it bounds stalls and rates in seconds, which a
	// neighbouring cluster test\'s load on two cores can break.
	harness.NeedPartitions(t)
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, Mount: true, Partitionable: true})
	c.KeepLogs()
	mnt2 := filepath.Join(t.TempDir(), "mnt2")
	c.MountAt(mnt2)
	dir := filepath.Join(c.Mount, "part")
	must(t, os.Mkdir(dir, 0o755))
	// A control plane of some size: the member that returns is sent a
	// snapshot of the whole database and applies it, the window in which
	// requests sent to it stalled or were refused.
	cli := c.Etcd() // outside weft's keys: as a node
	v := string(randBytes(1, 1<<20))
	for i := range partitionBallastMiB {
		if _, err := cli.Put(context.Background(), fmt.Sprintf("/test-ballast/%05d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	cli.Close()

	writes := &series{name: "write"}
	reads := &series{name: "read"}
	status := &series{name: "status"}
	var (
		mu    sync.Mutex
		acked []string // names, in the order acknowledged
	)
	content := func(name string) []byte {
		var w, i int
		fmt.Sscanf(name, "w%d-%06d", &w, &i)
		if i%8 == 7 { // now and then a file of a whole erasure-coded stripe and a bit
			return randBytes(uint64(w<<32|i), 4*unit+4096)
		}
		return randBytes(uint64(w<<32|i), 4096)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(partitionWriters + 2)
	for w := range partitionWriters {
		go func() { // a writer: one small fsync'd file after the other
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("w%d-%06d", w, i)
				if writes.do(func() error { return writeSynced(filepath.Join(dir, name), content(name)) }) == nil {
					mu.Lock()
					acked = append(acked, name)
					mu.Unlock()
				}
			}
		}()
	}
	go func() { // the reader: each acknowledged file once, through the other mount
		defer wg.Done()
		next := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			name := ""
			if next < len(acked) {
				name = acked[next]
			}
			mu.Unlock()
			if name == "" {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if reads.do(func() error { return readEqual(filepath.Join(mnt2, "part", name), content(name)) }) == nil {
				next++
			}
		}
	}()
	go func() { // weft status, four times a second, each call on its own
		defer wg.Done()
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		var calls sync.WaitGroup
		defer calls.Wait()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			calls.Add(1)
			go func() {
				defer calls.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				status.do(func() error { _, err := c.Admin.Status(ctx); return err })
			}()
		}
	}()

	t0 := time.Now()
	time.Sleep(partitionWarmup)
	// The node cut off is an etcd follower, as in the report: a leader
	// cut off is replaced, a follower must catch up when it returns.
	victim := etcdFollower(t, c)
	heal := c.Partition(victim)
	cut := time.Now()
	t.Logf("%s cut off at %.1fs", victim, cut.Sub(t0).Seconds())
	time.Sleep(partitionHold)
	cutAdmin := c.NodeAdmin(victim)
	heal()
	healed := time.Now()
	t.Logf("partition healed at %.1fs", healed.Sub(t0).Seconds())
	time.Sleep(partitionAfter - time.Since(healed))
	close(stop)
	wg.Wait()
	end := time.Now()

	t.Logf("per second since the start (ok/failed, and the longest operation if over 1 s); cut at %.0fs, healed at %.0fs:%s%s%s",
		cut.Sub(t0).Seconds(), healed.Sub(t0).Seconds(), writes.timeline(t0, end), reads.timeline(t0, end), status.timeline(t0, end))
	for _, name := range []string{"n1", "n2", "n3"} {
		t.Logf("etcd of %s: %s", name, etcdCounters(c.NodeAdmin(name)))
	}
	if st, err := cutAdmin.Status(context.Background()); err != nil {
		t.Logf("status through %s after the test: %v", victim, err)
	} else {
		t.Logf("status through %s after the test: %s, %d/%d nodes up", victim, st.Health, st.NodesUp, st.Nodes)
	}

	for _, s := range []*series{writes, reads, status} {
		during, at := s.stall(cut, healed)
		t.Logf("%s: longest stall during the partition %.1fs (from %.1fs); errors %q",
			s.name, during.Seconds(), at.Sub(t0).Seconds(), s.errors(cut, healed, 3))
		first, ok := s.firstOK(healed)
		after, at := s.stall(healed, end)
		t.Logf("%s: after the heal, first success %.2fs after it (%v), longest stall %.2fs (from %.1fs); errors %q",
			s.name, first.Seconds(), ok, after.Seconds(), at.Sub(t0).Seconds(), s.errors(healed, end, 3))
		if after > healBound {
			t.Errorf("%s stalled %.1fs after the partition healed (at %.1fs), want at most %s",
				s.name, after.Seconds(), at.Sub(t0).Seconds(), healBound)
		}
	}

	// Every acknowledged write reads back, through both mounts.
	mu.Lock()
	defer mu.Unlock()
	if len(acked) < 50 {
		t.Errorf("only %d writes acknowledged in %s", len(acked), end.Sub(t0).Round(time.Second))
	}
	for _, name := range acked {
		for _, m := range []string{c.Mount, mnt2} {
			if err := readEqual(filepath.Join(m, "part", name), content(name)); err != nil {
				t.Errorf("acknowledged write %s: %v", name, err)
			}
		}
	}
	t.Logf("%d acknowledged writes read back through both mounts", len(acked))
}

// etcdFollower returns an etcd member node that does not lead, n3 if it
// is one.
func etcdFollower(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	for _, name := range []string{"n3", "n2", "n1"} {
		m, err := etcdMetrics(c.NodeAdmin(name), []string{"etcd_server_is_leader"})
		if err != nil {
			t.Fatalf("etcd metrics of %s: %v", name, err)
		}
		if v, ok := m["etcd_server_is_leader"]; !ok {
			t.Fatalf("%s's metrics have no etcd_server_is_leader", name)
		} else if v == 0 {
			return name
		}
	}
	t.Fatal("every etcd member claims to lead")
	return ""
}

// writeSynced creates path with data and fsyncs it before closing.
func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readEqual reads path and compares it with want.
func readEqual(path string, want []byte) error {
	got, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s: read %d bytes that differ from the %d written", path, len(got), len(want))
	}
	return nil
}
