package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/durable"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/tests/harness"
)

// crashSizes are the sizes the node points' workloads cycle through: a
// mirrored small file, an erasure-coded stripe of one unit and a bit, a
// whole stripe and a mirrored tail.
var crashSizes = []int{70 << 10, 1300 << 10, 4*unit + 70<<10}

// crashRig is TestCrashConsistency's cluster, its long-lived mounts and
// the ledger of what must survive.
type crashRig struct {
	c   *harness.Cluster
	ctx context.Context
	ns  *meta.Meta
	cli *clientv3.Client
	tmp string
	// put writes through the nodes' Put (its staging is made to fail, so
	// its client puts every unit); stage stages the units of the nodes on
	// its machine — all of them — and asks their nodes to adopt them.
	put, stage string
	// acked holds every acknowledged write's content (by path under the
	// mount), or what a crash left of an unacknowledged overwrite.
	acked map[string][]byte
	// dirs holds the names a write-back crash left in a directory.
	dirs map[string][]string
}

func newCrashRig(t *testing.T) *crashRig {
	c := harness.Start(t, harness.Options{Nodes: 4, DrivesPerNode: 2, Mount: true, LeaseTTL: 3 * time.Second})
	r := &crashRig{c: c, ctx: context.Background(), tmp: t.TempDir(), acked: map[string][]byte{}, dirs: map[string][]string{}}
	r.cli = c.Etcd()
	t.Cleanup(func() {
		if t.Failed() {
			r.dumpNodes(t)
		}
	})
	r.ns = c.Namespace()
	r.put = filepath.Join(r.tmp, "put")
	c.MountAtEnv(r.put, "WEFT_FAILPOINTS=drive/stage-before-sync=error")
	r.stage = filepath.Join(r.tmp, "stage")
	c.MountAt(r.stage)
	must(t, os.Mkdir(filepath.Join(c.Mount, "crash"), 0o755))
	if out, code := c.Weft("job", "policies", "create", "hold", "--default", "paused"); code != 0 {
		t.Fatalf("weft job policies create: %s", out)
	}
	return r
}

// dumpNodes logs every node process's state and the tail of its log,
// for a failure's diagnosis.
func (r *crashRig) dumpNodes(t *testing.T) {
	states, err := r.c.Ctl.Nodes(r.ctx)
	if err != nil {
		t.Logf("nodes: %v", err)
		return
	}
	for _, s := range states {
		log, _ := os.ReadFile(s.Log)
		t.Logf("--- %s: running %v, exit %q, env %v; %s ends:\n%s", s.Name, s.Running, s.Exit, s.Env, s.Log, tailLines(log, 25))
	}
}

// mkdir makes the directory of a point's files through the main mount,
// durably, and returns its path under the mount.
func (r *crashRig) mkdir(t *testing.T, point string) string {
	t.Helper()
	rel := path.Join("crash", strings.ReplaceAll(point, "/", "-"))
	must(t, os.Mkdir(filepath.Join(r.c.Mount, rel), 0o755))
	must(t, syncDir(filepath.Join(r.c.Mount, "crash")))
	return rel
}

// seed writes a few files of every size for a point whose workload is a
// job, so that the job has work even when the point runs alone.
func (r *crashRig) seed(t *testing.T, point string) {
	t.Helper()
	dir := r.mkdir(t, point)
	var rels []string
	for i, n := range crashSizes {
		rel := path.Join(dir, fmt.Sprintf("f%02d", i))
		data := randBytes(seedOf(point, i), n)
		if err := writeDurably(filepath.Join(r.stage, rel), data); err != nil {
			t.Fatal(err)
		}
		r.acked[rel] = data
		rels = append(rels, rel)
	}
	r.verify(t, rels)
}

// heldJob starts an integrityscan that runs but makes no progress (its
// impact policy pauses its workers) until releaseJob.
func (r *crashRig) heldJob(t *testing.T) job.JobID {
	t.Helper()
	id := startJob(t, r.c, "integrityscan", "--dry-run", "--policy", "hold")
	deadline := time.Now().Add(time.Minute)
	for {
		j, err := r.c.Admin.Job(r.ctx, id)
		if err == nil && j.State == job.Running {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("held job %d not running: %+v %v", id, j, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// releaseJob lets a held job work and waits for its clean end.
func (r *crashRig) releaseJob(t *testing.T, id job.JobID) {
	t.Helper()
	if out, code := r.c.Weft("job", "modify", fmt.Sprint(id), "--policy", "high"); code != 0 {
		t.Fatalf("weft job modify: %s", out)
	}
	if j := r.waitJob(t, id, 3*time.Minute); j.State != job.Succeeded || j.Phases[0].Errors != 0 {
		t.Fatalf("job %d through the handover: %+v", id, j)
	}
}

// queue returns the coordinator election's candidates in the order they
// are elected: the head is the coordinator.
func (r *crashRig) queue(t *testing.T) []string {
	t.Helper()
	resp, err := r.cli.Get(r.ctx, job.Prefix+"coordinator/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Value))
	}
	if len(out) == 0 {
		t.Fatal("no candidate in the coordinator election")
	}
	return out
}

// waitCoordinator waits until a node other than those named leads the
// election and returns it.
func (r *crashRig) waitCoordinator(t *testing.T, not ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := r.c.Admin.JobStatus(r.ctx)
		if err == nil && st.Coordinator != "" && !slices.Contains(not, st.Coordinator) {
			return st.Coordinator
		}
		if time.Now().After(deadline) {
			t.Fatalf("no coordinator but %v after 30s (last %q, %v)", not, st.Coordinator, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// arm restarts node with point armed to crash it at its first hit.
func (r *crashRig) arm(t *testing.T, node, point string) {
	t.Helper()
	r.restart(t, node, "WEFT_FAILPOINTS="+point+"=crash")
}

// restart stops node gracefully and starts it with env, waits until the
// cluster is healthy and the node campaigns for coordinator again.
func (r *crashRig) restart(t *testing.T, node string, env ...string) {
	t.Helper()
	start := time.Now()
	must(t, r.c.Ctl.Stop(r.ctx, node))
	stopped := time.Since(start)
	must(t, r.c.Ctl.StartEnv(r.ctx, node, env...))
	r.waitHealthy(t, node)
	t.Logf("restarted %s %v: stopped in %s, healthy %s later", node, env, stopped.Round(100*time.Millisecond), (time.Since(start) - stopped).Round(100*time.Millisecond))
}

// recover starts a crashed node once its lease has expired (a node name
// is refused while the old process's live key exists) and waits until
// the cluster is healthy.
func (r *crashRig) recover(t *testing.T, node string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		nodes, err := r.c.Admin.Nodes(r.ctx)
		if err == nil && slices.ContainsFunc(nodes, func(n cluster.Node) bool { return n.Name == node && n.State == cluster.Down }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not down a minute after its crash (%v)", node, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	must(t, r.c.Ctl.Start(r.ctx, node))
	r.waitHealthy(t, node)
}

// waitHealthy waits until every node, drive and etcd member is up and
// node is a candidate of the coordinator election.
func (r *crashRig) waitHealthy(t *testing.T, node string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, err := r.c.Admin.Status(r.ctx)
		if err == nil && st.Health == cluster.Healthy && st.DrivesUp == 8 && slices.Contains(r.queue(t), node) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not healthy with %s back after 2 minutes: %+v %v", node, st.Status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// running reports whether node's process runs.
func (r *crashRig) running(t *testing.T, node string) bool {
	t.Helper()
	states, err := r.c.Ctl.Nodes(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if s.Name == node {
			return s.Running
		}
	}
	t.Fatalf("no node %s", node)
	return false
}

// waitCrash waits until node's process is gone, killed by point: SIGKILL,
// and the point's line last in its log.
func (r *crashRig) waitCrash(t *testing.T, node, point string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		states, err := r.c.Ctl.Nodes(r.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range states {
			if s.Name != node || s.Running {
				continue
			}
			log, _ := os.ReadFile(s.Log)
			if !strings.Contains(s.Exit, "killed") || !bytes.Contains(log, []byte("failpoint "+point+": crash")) {
				t.Fatalf("%s exited (%s) but not by %s; its log ends:\n%s", node, s.Exit, point, tailLines(log, 15))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still runs a minute after %s was armed", node, point)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitMountCrash waits until mount m is gone, killed by point, and
// detaches its dead mount point.
func (r *crashRig) waitMountCrash(t *testing.T, m *harness.MountProc, point string) {
	t.Helper()
	select {
	case <-m.Done():
	case <-time.After(time.Minute):
		t.Fatalf("the mount still runs a minute after its writes failed:\n%s", m.Output())
	}
	m.Detach()
	if !m.Killed() || !strings.Contains(m.Output(), "failpoint "+point+": crash") {
		t.Fatalf("the mount did not crash at %s:\n%s", point, m.Output())
	}
}

func tailLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// nodeLeft is what a crash left on a node's drives.
type nodeLeft struct {
	temps  int                // temp files in the block directories
	queued []meta.DeleteEntry // the drives' delete queues
	stored []string           // files of queued blocks that exist
}

func (r *crashRig) leftovers(t *testing.T, node string) nodeLeft {
	t.Helper()
	var l nodeLeft
	drives, err := r.c.Admin.Drives(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range drives {
		if d.Node != node {
			continue
		}
		l.temps += countTemps(t, d.Path)
		es, err := r.ns.ListDeletes(r.ctx, meta.DriveID(d.ID), meta.BlockID{}, 10000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			id := drive.BlockID(e.Block).String()
			p := filepath.Join(d.Path, "blocks", id[:2], id)
			if _, err := os.Stat(p); err == nil {
				l.stored = append(l.stored, p)
			}
		}
		l.queued = append(l.queued, es...)
	}
	return l
}

// allTemps counts the temp files on each node's drives.
func (r *crashRig) allTemps(t *testing.T) map[string]int {
	t.Helper()
	drives, err := r.c.Admin.Drives(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range drives {
		out[d.Node] += countTemps(t, d.Path)
	}
	return out
}

// countTemps counts the temp files in a drive directory's block
// directories.
func countTemps(t *testing.T, dir string) int {
	t.Helper()
	subs, err := filepath.Glob(filepath.Join(dir, "blocks", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sub := range subs {
		ents, err := os.ReadDir(sub)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if durable.IsTemp(e.Name()) {
				n++
			}
		}
	}
	return n
}

// blocksPerDrive counts the block files of each drive, by scope name
// ("d3").
func (r *crashRig) blocksPerDrive(t *testing.T) map[string]int64 {
	t.Helper()
	drives, err := r.c.Admin.Drives(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, d := range drives {
		out[fmt.Sprintf("d%d", uint32(d.ID))] += 0
		paths, err := filepath.Glob(filepath.Join(d.Path, "blocks", "*", "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if _, err := drive.ParseBlockID(filepath.Base(p)); err == nil {
				out[fmt.Sprintf("d%d", uint32(d.ID))]++
			}
		}
	}
	return out
}

// waitDrained waits until every drive's delete queue is empty (the nodes'
// drainers free a queued block within about a second).
func (r *crashRig) waitDrained(t *testing.T) {
	t.Helper()
	drives, err := r.c.Admin.Drives(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for _, d := range drives {
		for {
			es, err := r.ns.ListDeletes(r.ctx, meta.DriveID(d.ID), meta.BlockID{}, 10)
			if err == nil && len(es) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("drive %v's delete queue not drained after a minute: %d entries (%v)", d.ID, len(es), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// verify reads rels back through the main mount and checks they are
// byte-exact and every stripe fully placed.
func (r *crashRig) verify(t *testing.T, rels []string) {
	t.Helper()
	for _, rel := range rels {
		p := filepath.Join(r.c.Mount, rel)
		checkFile(t, p, r.acked[rel])
		if l := layout(t, r.c, p); l.UnderProtected != 0 {
			t.Fatalf("%s: %d stripes under-protected", rel, l.UnderProtected)
		}
	}
}

// scanClean runs integrityscan and fails unless it found nothing to
// repair.
func (r *crashRig) scanClean(t *testing.T) {
	t.Helper()
	j := r.waitJob(t, startJob(t, r.c, "integrityscan", "--policy", "high"), 3*time.Minute)
	if j.State != job.Succeeded || j.Phases[0].Errors != 0 {
		t.Fatalf("integrityscan: %+v", j.Phases)
	}
}

// collect runs collect with no grace (no write is in flight) and logs
// what it swept.
func (r *crashRig) collect(t *testing.T) {
	t.Helper()
	j := r.waitJob(t, startJob(t, r.c, "collect", "--param", "grace=1ns"), 3*time.Minute)
	if j.State != job.Succeeded {
		t.Fatalf("collect: %+v", j)
	}
	b, _ := json.Marshal(j.Phases)
	t.Logf("collect: %s", b)
}

// waitJob waits for job id's end.
func (r *crashRig) waitJob(t *testing.T, id job.JobID, timeout time.Duration) job.JobView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j, err := r.c.Admin.Job(r.ctx, id)
		if err == nil && j.State.Terminal() {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d not ended after %s: %+v (%v)", id, timeout, j, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// seedOf is a data seed unique to a point and a file.
func seedOf(point string, i int) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", point, i)
	return h.Sum64()
}

// writeDurably creates path with data, fsyncs and closes it: nil is an
// acknowledged write.
func writeDurably(path string, data []byte) error { return writeAcked(path, data, true) }

// writeAcked creates path with data and closes it, after an fsync if
// sync: nil is an acknowledged write. Without sync it is durable when the
// close returns only for a mount that does not write back (--sync-dirops)
// or that stays up: a mount's crash may lose a file it created in a
// directory it held, whole (writeBackCrash checks that).
func writeAcked(path string, data []byte, sync bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// overwriteDurably writes data over path from offset 0 without
// truncating it, fsyncs and closes it.
func overwriteDurably(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir fsyncs a directory: its entries' changes are durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// listNames lists a directory's names, sorted.
func listNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
