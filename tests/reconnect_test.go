package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/tests/harness"
)

// restartBound is how long after two restarted nodes serve their blocks
// again a mount's writer may still fail. The goal is 2 s (the block
// client's reconnect back-off is at most 1 s, see block.DialOptions); the
// bound is generous because the writer also needs the nodes' leases and
// drives published and the mount's topology refreshed (1 s), and the
// machine is shared. The measured figure is logged.
const restartBound = 10 * time.Second

// TestMountReachesRestartedNodes kills two of three nodes (two etcd
// members: the control plane loses its quorum) under a mount with a writer,
// keeps them down long enough for a client's connection back-off to grow
// (40 s), starts them again and measures how soon after both serve their
// blocks again the writer's writes succeed.
func TestMountReachesRestartedNodes(t *testing.T) {
	// Not parallel: it bounds stalls and rates in seconds, which a
	// neighbouring cluster test\'s load on two cores can break.
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, Mount: true, LeaseTTL: 3 * time.Second})
	c.KeepLogs()
	dir := filepath.Join(c.Mount, "restart")
	must(t, os.Mkdir(dir, 0o755))
	content := func(i int) []byte {
		if i%4 == 3 {
			return randBytes(uint64(i), 4*unit+4096)
		}
		return randBytes(uint64(i), 4096)
	}
	writes := &series{name: "write"}
	var (
		mu    sync.Mutex
		acked []int
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := writes.do(func() error { return writeSynced(filepath.Join(dir, fmt.Sprintf("f%06d", i)), content(i)) })
			if err == nil {
				mu.Lock()
				acked = append(acked, i)
				mu.Unlock()
			} else {
				time.Sleep(50 * time.Millisecond) // failing fast: do not spin
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()

	t0 := time.Now()
	time.Sleep(3 * time.Second)
	ctx := context.Background()
	for _, n := range []string{"n2", "n3"} {
		must(t, c.Ctl.Kill(ctx, n))
	}
	killed := time.Now()
	time.Sleep(40 * time.Second)
	for _, n := range []string{"n2", "n3"} {
		must(t, c.Ctl.Start(ctx, n))
	}
	started := time.Now()
	// The nodes serve again when a fresh connection gets an answer from
	// their block services.
	var ready time.Time
	for _, n := range []string{"n2", "n3"} {
		addr := ""
		states, err := c.Ctl.Nodes(ctx)
		must(t, err)
		for _, s := range states {
			if s.Name == n {
				addr = s.GRPCAddr
			}
		}
		for {
			if blockServes(c, addr) {
				break
			}
			if time.Since(started) > 2*time.Minute {
				t.Fatalf("%s's block service at %s does not answer 2 minutes after its start", n, addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		ready = time.Now()
	}
	// Wait for the writer to succeed, then a little longer for the log.
	deadline := time.Now().Add(2 * time.Minute)
	var first time.Duration
	for {
		if d, ok := firstEnd(writes, ready); ok {
			first = d
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write succeeded within 2 minutes of the restarted nodes serving; errors %q", writes.errors(ready, time.Now(), 3))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
	close(stop)
	<-done
	end := time.Now()
	t.Logf("per second since the start (ok/failed); killed at %.0fs, started at %.0fs, serving at %.0fs:%s",
		killed.Sub(t0).Seconds(), started.Sub(t0).Seconds(), ready.Sub(t0).Seconds(), writes.timeline(t0, end))
	t.Logf("restarted nodes serving %.1fs after their start; the writer's first success %.2fs after that; errors before it %q",
		ready.Sub(started).Seconds(), first.Seconds(), writes.errors(started, ready.Add(first), 3))
	if first > restartBound {
		t.Errorf("the mount's writer succeeded only %.1fs after the restarted nodes served again, want at most %s", first.Seconds(), restartBound)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, i := range acked {
		if err := readEqual(filepath.Join(dir, fmt.Sprintf("f%06d", i)), content(i)); err != nil {
			t.Errorf("acknowledged write %d: %v", i, err)
		}
	}
	t.Logf("%d acknowledged writes read back", len(acked))
}

// blockServes reports whether a fresh connection to the block service at
// addr gets an answer within a second.
func blockServes(c *harness.Cluster, addr string) bool {
	bc, err := c.DialBlocks(addr)
	if err != nil {
		return false
	}
	defer bc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = bc.Usage(ctx)
	return err == nil
}

// firstEnd returns how long after t the first operation that ended after
// t succeeded.
func firstEnd(s *series, t time.Time) (time.Duration, bool) {
	for _, o := range s.snapshot() {
		if o.err == nil && o.end.After(t) {
			return o.end.Sub(t), true
		}
	}
	return 0, false
}
