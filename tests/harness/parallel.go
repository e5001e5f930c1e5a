package harness

import (
	"strings"
	"sync"
	"testing"
)

// inProcess lets one top-level test at a time run in-process clusters.
// The cluster tests run in parallel (t.Parallel, two at a time on a
// two-core machine: most of a cluster test is waiting — for a lease to
// expire, a job to end, a node to restart), and a cluster of processes
// shares nothing with another; but clusters inside the test process share
// what the process owns (see local.InProcess: failpoints, the Prometheus
// default registry, stderr), so a test's in-process clusters wait here
// for another test's to end. A test may start several (a restart on the
// same directory): the hold belongs to the top-level test, counted, and
// is released when its last in-process cluster has stopped.
var inProcess struct {
	mu    sync.Mutex
	free  *sync.Cond // signalled when owner becomes ""
	owner string     // the top-level test holding it, "" if none
	n     int        // its clusters not yet stopped
}

// holdInProcess waits until tb's top-level test may run an in-process
// cluster, and releases the hold at tb's cleanup (registered first, so
// that it runs after the cluster's Stop).
func holdInProcess(tb testing.TB) {
	top, _, _ := strings.Cut(tb.Name(), "/")
	inProcess.mu.Lock()
	if inProcess.free == nil {
		inProcess.free = sync.NewCond(&inProcess.mu)
	}
	for inProcess.owner != "" && inProcess.owner != top {
		inProcess.free.Wait()
	}
	inProcess.owner = top
	inProcess.n++
	inProcess.mu.Unlock()
	tb.Cleanup(func() {
		inProcess.mu.Lock()
		defer inProcess.mu.Unlock()
		if inProcess.n--; inProcess.n == 0 {
			inProcess.owner = ""
			inProcess.free.Broadcast()
		}
	})
}
