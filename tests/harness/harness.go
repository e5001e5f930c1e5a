// Package harness starts weft clusters for tests, multi-process or inside
// the test process (Mode), behind one Cluster: the test gets admin
// clients, node control (kill, stop, start: local.Control), the FUSE
// mount's directory and the CLI, the same in either mode, so that one test
// body runs against both (Run).
//
// It is test infrastructure only; production code never imports it.
package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/local"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/namespace"
)

var (
	buildOnce sync.Once
	binary    string
	binDir    string // the temporary directory Binary built into, if it did
	buildErr  error
)

// Main runs a test binary's tests (m.Run) and then removes the weft binary
// Binary built for them, returning m.Run's exit code: a package of cluster
// tests calls it from TestMain, so that each run does not leave a 50 MB
// binary in the temporary directory.
func Main(m *testing.M) int {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	return code
}

// Binary returns the path of a weft binary built from this checkout (once
// per test process, into a temporary directory Main removes), or
// $WEFT_BINARY if set.
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		if b := os.Getenv("WEFT_BINARY"); b != "" {
			binary = b
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "weft-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		binary = filepath.Join(dir, "weft")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/weft")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatalf("harness: %v", buildErr)
	}
	return binary
}

// Options shape a test cluster.
type Options struct {
	// Mode is how it runs ("": Process).
	Mode                 Mode
	Nodes, DrivesPerNode int
	LeaseTTL             time.Duration
	// Dir reuses a cluster directory (to test a restart); default a new
	// temporary directory.
	Dir string
	// Mount mounts the cluster (at Cluster.Mount, under a temporary
	// directory).
	Mount bool
	// RepairGrace is the nodes' repair grace period (0: the default).
	RepairGrace time.Duration
	// DriveSize is every drive's capacity in bytes (0: the whole file
	// system), passed as --drive-size.
	DriveSize int64
	// Partitionable gives every node its own loopback address and cgroup
	// (--own-addresses --cgroups), so that Cluster.Partition can cut one
	// off. Call NeedPartitions first: it needs root and iptables.
	Partitionable bool
	// Insecure runs the cluster without TLS (weft local up --insecure).
	// The default, with TLS, is what every test runs unless it is about
	// the insecure mode.
	Insecure bool
	// NFS makes every node an NFS gateway (weft local up --nfs); their
	// addresses are Cluster.NFSAddrs.
	NFS bool
	// NFSAddresses are NFS service addresses (loopback, e.g. 127.0.0.50)
	// every node is a candidate for (weft local up --nfs-address); where
	// each is served is Cluster.NFSServiceAddrs. NFSIface is
	// --nfs-iface: each node's interface for them ("{node}" its name).
	NFSAddresses []string
	NFSIface     string
}

// Cluster is a running local cluster (`weft local up`), in either mode.
type Cluster struct {
	tb    testing.TB
	Mode  Mode
	Dir   string
	Admin *admin.Client // every node's admin API, first one that answers
	Ctl   *local.Control
	// Mount is the mount point when Options.Mount was set.
	Mount string
	out   *lockedBuf
	done  chan struct{} // closed when the supervisor has ended
	// stop asks the supervisor to stop the cluster as Ctrl-C would;
	// kill ends it at once (Process only; nil in-process).
	stop, kill func()
	// PKI is the cluster's certificates (DIR/pki), "" if Insecure.
	PKI string
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) add(s string) { l.mu.Lock(); l.b.WriteString(s + "\n"); l.mu.Unlock() }
func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start starts a cluster in o.Mode — `weft local up` as a process, or
// local.Up with local.InProcess in the test process — and waits until it
// is ready (every node and drive up, the file system mounted). The cluster
// is stopped by tb.Cleanup, as Ctrl-C would stop it.
func Start(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	if o.Mode == "" {
		o.Mode = Process
	}
	bin := Binary(tb) // the CLI (Weft), in either mode
	if o.Dir == "" {
		o.Dir = filepath.Join(tb.TempDir(), "weft-data")
	}
	c := &Cluster{tb: tb, Mode: o.Mode, Dir: o.Dir, out: &lockedBuf{}, done: make(chan struct{})}
	if !o.Insecure {
		c.PKI = filepath.Join(o.Dir, local.PKIDir)
	}
	if o.Mount {
		c.Mount = filepath.Join(filepath.Dir(o.Dir), "mnt")
	}
	ready := make(chan struct{})
	lines := &lineWriter{each: func(line string) {
		c.out.add(line)
		// The supervisor prints "ready:", its "nfs:" lines, then "try:"
		// last, in one go: a test that reads Output once ready must find
		// them all, not race the pipe for the nfs lines.
		if strings.HasPrefix(line, "try:") {
			close(ready)
		}
	}}
	if o.Partitionable && o.Mode == InProcess {
		tb.Skip("harness: a partitionable cluster needs a process per node (own addresses and cgroups): process mode only")
	}
	switch o.Mode {
	case Process:
		c.startProcess(bin, o, lines)
	case InProcess:
		holdInProcess(tb)
		c.startInProcess(o, lines)
	default:
		tb.Fatalf("harness: unknown mode %q: want %s or %s", o.Mode, Process, InProcess)
	}
	tb.Cleanup(c.Stop)
	select {
	case <-ready:
	case <-c.done:
		tb.Fatalf("harness: weft local up (%s) ended before ready:\n%s\n%s", o.Mode, c.out, c.logs())
	case <-time.After(3 * time.Minute):
		tb.Fatalf("harness: cluster (%s) not ready after 3 minutes:\n%s\n%s", o.Mode, c.out, c.logs())
	}
	addrs, err := os.ReadFile(filepath.Join(o.Dir, local.AdminAddrsFile))
	if err != nil {
		tb.Fatal(err)
	}
	c.Admin = admin.NewClient(strings.Join(strings.Fields(string(addrs)), ","), c.AdminOptions()...)
	if c.Ctl, err = local.Dial(o.Dir); err != nil {
		tb.Fatal(err)
	}
	return c
}

// startProcess runs `weft local up` as a process, its output to out.
func (c *Cluster) startProcess(bin string, o Options, out io.Writer) {
	args := []string{"local", "up", "--dir", o.Dir}
	if o.Nodes > 0 {
		args = append(args, "--nodes", fmt.Sprint(o.Nodes))
	}
	if o.DrivesPerNode > 0 {
		args = append(args, "--drives-per-node", fmt.Sprint(o.DrivesPerNode))
	}
	if o.LeaseTTL > 0 {
		args = append(args, "--lease-ttl", o.LeaseTTL.String())
	}
	if o.RepairGrace > 0 {
		args = append(args, "--repair-grace", o.RepairGrace.String())
	}
	if o.DriveSize > 0 {
		args = append(args, "--drive-size", fmt.Sprint(o.DriveSize))
	}
	if o.Partitionable {
		args = append(args, "--own-addresses", "--cgroups")
	}
	if o.Insecure {
		args = append(args, "--insecure")
	}
	if o.NFS {
		args = append(args, "--nfs")
	}
	if len(o.NFSAddresses) > 0 {
		args = append(args, "--nfs-address", strings.Join(o.NFSAddresses, ","))
	}
	if o.NFSIface != "" {
		args = append(args, "--nfs-iface", o.NFSIface)
	}
	args = append(args, "--mount", c.Mount)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		c.tb.Fatalf("harness: start weft local up: %v", err)
	}
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	c.stop = func() { _ = cmd.Process.Signal(syscall.SIGTERM) }
	c.kill = func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// startInProcess runs local.Up in this process with local.InProcess, its
// output (and the supervisor's warnings) to out.
func (c *Cluster) startInProcess(o Options, out io.Writer) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(c.done)
		err := local.Up(ctx, local.Options{
			Dir: o.Dir, Nodes: o.Nodes, DrivesPerNode: o.DrivesPerNode, LeaseTTL: o.LeaseTTL, Mount: c.Mount,
			RepairGrace: o.RepairGrace, DriveSize: o.DriveSize, Launcher: local.InProcess{}, Insecure: o.Insecure, NFS: o.NFS,
			NFSAddresses: o.NFSAddresses, NFSIface: o.NFSIface,
			Out: out, Log: slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			fmt.Fprintf(out, "weft: %v\n", err)
		}
	}()
	c.stop = cancel
}

// lineWriter calls each for every line written to it.
type lineWriter struct {
	mu   sync.Mutex
	part []byte
	each func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		i := strings.IndexByte(string(w.part), '\n')
		if i < 0 {
			return len(p), nil
		}
		w.each(string(w.part[:i]))
		w.part = w.part[i+1:]
	}
}

// SkipInProcess skips the rest of a test body in-process, saying why: for
// a part that needs a process of its own (see Mode).
func (c *Cluster) SkipInProcess(tb testing.TB, reason string) {
	tb.Helper()
	if c.Mode == InProcess {
		tb.Skipf("harness: multi-process only: %s", reason)
	}
}

// Output returns what `weft local up` printed so far.
func (c *Cluster) Output() string { return c.out.String() }

// logs returns the tail of every node's log, for failure messages.
func (c *Cluster) logs() string {
	var b strings.Builder
	paths, _ := filepath.Glob(filepath.Join(c.Dir, "nodes", "*", "server.log"))
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", p, strings.Join(lines, "\n"))
	}
	return b.String()
}

// Stop stops the cluster as Ctrl-C would and waits for it. Idempotent.
func (c *Cluster) Stop() {
	select {
	case <-c.done:
		return
	default:
	}
	c.stop()
	select {
	case <-c.done:
	case <-time.After(90 * time.Second):
		if c.kill == nil { // in-process: nothing to kill
			c.tb.Errorf("harness: in-process cluster did not stop within 90s:\n%s\n%s", c.out, c.logs())
			return
		}
		c.kill()
		<-c.done
		c.tb.Errorf("harness: cluster did not stop within 90s of SIGTERM:\n%s", c.out)
	}
	if c.Mount != "" {
		var st syscall.Statfs_t
		if err := syscall.Statfs(c.Mount, &st); err == nil && st.Type == fuseMagic {
			c.tb.Errorf("harness: %s is still mounted after the cluster stopped", c.Mount)
			_ = syscall.Unmount(c.Mount, syscall.MNT_DETACH)
		}
	}
}

// fuseMagic is the statfs type of a FUSE file system.
const fuseMagic = 0x65735546

// NodeAdmin returns a client for one node's admin API only.
func (c *Cluster) NodeAdmin(name string) *admin.Client {
	c.tb.Helper()
	return admin.NewClient(c.nodeState(name).AdminAddr, c.AdminOptions()...)
}

// WaitNode polls until the node has the given availability, and returns how
// long that took. It fails the test after timeout.
func (c *Cluster) WaitNode(via *admin.Client, name string, want cluster.Availability, timeout time.Duration) time.Duration {
	c.tb.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < timeout {
		nodes, err := via.Nodes(context.Background())
		if err == nil {
			for _, n := range nodes {
				if n.Name == name {
					if n.State == want {
						return time.Since(start)
					}
					last = string(n.State)
				}
			}
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.tb.Fatalf("harness: node %s not %s after %s (last: %s)\n%s", name, want, timeout, last, c.logs())
	return 0
}

// WaitStatus polls the cluster status until ok returns true.
func (c *Cluster) WaitStatus(timeout time.Duration, ok func(cluster.Status) bool) cluster.Status {
	c.tb.Helper()
	deadline := time.Now().Add(timeout)
	var st cluster.Status
	var err error
	for time.Now().Before(deadline) {
		var full admin.Status
		if full, err = c.Admin.Status(context.Background()); err == nil && ok(full.Status) {
			return full.Status
		}
		st = full.Status
		time.Sleep(100 * time.Millisecond)
	}
	c.tb.Fatalf("harness: status condition not met after %s: %+v (err %v)", timeout, st, err)
	return st
}

// Weft runs the weft CLI against this cluster and returns its combined
// output and exit code.
func (c *Cluster) Weft(args ...string) (string, int) {
	c.tb.Helper()
	return c.WeftEnv(nil, args...)
}

// WeftEnv is Weft with env ("KEY=VALUE") added to the command's
// environment, after (and so over) the cluster's own.
func (c *Cluster) WeftEnv(env []string, args ...string) (string, int) {
	c.tb.Helper()
	cmd := exec.Command(Binary(c.tb), args...)
	cmd.Env = append(os.Environ(), "WEFT_ADMIN="+strings.Join(adminAddrs(c.Dir), ","), "WEFT_TOKEN=")
	if c.PKI != "" {
		cmd.Env = append(cmd.Env, "WEFT_PKI="+c.PKI)
	} else {
		cmd.Env = append(cmd.Env, "WEFT_PKI=")
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.tb.Fatal(err)
	}
	return string(out), code
}

func adminAddrs(dir string) []string {
	b, _ := os.ReadFile(filepath.Join(dir, local.AdminAddrsFile))
	return strings.Fields(string(b))
}

// MountAt mounts this cluster again at dir (created if missing), waits
// until it is mounted and unmounts it at cleanup: a second client
// machine, as far as the file system can tell. In Process mode it is a
// `weft mount` process, in-process a mount.Run in the test process.
func (c *Cluster) MountAt(dir string) { c.MountWith(dir, MountOptions{}) }

// MountAtEnv is MountAt with extra environment variables for the mount
// process (WEFT_FAILPOINTS=..., say), and returns what MountWith does.
// Process mode only: a mount in the test process shares its environment,
// so in-process it fails the test, which should be declared ProcessOnly.
func (c *Cluster) MountAtEnv(dir string, env ...string) (stop func()) {
	return c.MountWith(dir, MountOptions{Env: env})
}

// MountOptions are the options of one more mount (MountWith).
type MountOptions struct {
	// Metrics is weft mount --metrics ADDR: the mount serves its metrics
	// and workers there.
	Metrics string
	// Env adds environment variables to the mount's process (Process
	// mode only; see MountAtEnv).
	Env []string
}

// MountWith is MountAt with options. It returns stop, which unmounts the
// mount and waits for its process to end (at most 60 s, then it is
// killed and detached), as the test's cleanup does if stop was not
// called: a test stops a mount before counting what it left behind (a
// mount finishes its open files' write-outs as it ends).
func (c *Cluster) MountWith(dir string, o MountOptions) (stop func()) {
	c.tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.tb.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		c.tb.Fatal(err)
	}
	var l local.Launcher = local.Exec{Binary: Binary(c.tb)}
	if c.Mode == InProcess {
		if len(o.Env) > 0 {
			c.tb.Fatalf("harness: a mount with its own environment (%v) needs a process of its own; declare the test harness.ProcessOnly", o.Env)
		}
		l = local.InProcess{}
	}
	spec := local.MountSpec{Admin: strings.Join(adminAddrs(c.Dir), ","), Dir: abs, Metrics: o.Metrics, Env: o.Env,
		Log: filepath.Join(c.Dir, "mount-"+filepath.Base(abs)+".log"), PKI: c.PKI}
	p, err := l.Mount(context.Background(), spec)
	if err != nil {
		c.tb.Fatalf("harness: mount at %s (%s): %v", abs, c.Mode, err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = p.Stop()
			select {
			case <-p.Done():
			case <-time.After(60 * time.Second):
				if p.Kill() != nil { // in-process: detach, and say so
					c.tb.Errorf("harness: the mount at %s did not stop within 60s; detaching it", abs)
				}
				_ = syscall.Unmount(abs, syscall.MNT_DETACH)
			}
		})
	}
	c.tb.Cleanup(stop)
	return stop
}

// WaitJob polls until job id ends and returns it; it fails the test if the
// job does not end within timeout.
func (c *Cluster) WaitJob(id job.JobID, timeout time.Duration) job.JobView {
	c.tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j, err := c.Admin.Job(context.Background(), id)
		if err == nil && j.State.Terminal() {
			return j
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("harness: job %d not ended after %s: %+v (err %v)\n%s", id, timeout, j, err, c.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Namespace opens the cluster's namespace directly (an etcd client of its
// own, closed at cleanup), for tests that build large trees faster than a
// mount can.
func (c *Cluster) Namespace() *meta.Meta {
	c.tb.Helper()
	ctx := context.Background()
	info, err := c.Admin.Node(ctx)
	if err != nil {
		c.tb.Fatal(err)
	}
	cli := c.etcdAs(local.MountIdentity)              // what a mount may do
	if _, err := cluster.Open(ctx, cli); err != nil { // checks the cluster's schema
		c.tb.Fatal(err)
	}
	m, err := namespace.Open(ctx, cli, info.EmbeddedEtcd, false)
	if err != nil {
		c.tb.Fatal(err)
	}
	return m
}

// KeepLogs copies the supervisor's, the mount's and every node's log to
// $WEFT_TEST_LOGS/<test name>/ when the test ends, if that variable is set
// (the cluster's own directory is removed with the test).
func (c *Cluster) KeepLogs() {
	dst := os.Getenv("WEFT_TEST_LOGS")
	if dst == "" {
		return
	}
	dst = filepath.Join(dst, strings.ReplaceAll(c.tb.Name(), "/", "_"))
	c.tb.Cleanup(func() {
		paths, _ := filepath.Glob(filepath.Join(c.Dir, "nodes", "*", "server.log"))
		paths = append(paths, filepath.Join(c.Dir, "mount.log"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			name := filepath.Base(p)
			if name == "server.log" {
				name = filepath.Base(filepath.Dir(p)) + ".log"
			}
			if err := os.MkdirAll(dst, 0o755); err == nil {
				_ = os.WriteFile(filepath.Join(dst, name), b, 0o644)
			}
		}
		_ = os.WriteFile(filepath.Join(dst, "local-up.log"), []byte(c.out.String()), 0o644)
	})
}

// NFSAddrs returns every node's NFS gateway address (host:port) by node
// name, from DIR/nfs.addrs, for a cluster started with Options.NFS.
func (c *Cluster) NFSAddrs() map[string]string {
	c.tb.Helper()
	return c.readPairs(local.NFSAddrsFile, "the NFS addresses (a cluster started with Options.NFS?)")
}

// NFSServiceAddrs returns where each NFS service address is served
// (host:port) by address, from DIR/nfs.service.addrs, for a cluster
// started with Options.NFSAddresses.
func (c *Cluster) NFSServiceAddrs() map[string]string {
	c.tb.Helper()
	return c.readPairs(local.NFSServiceAddrsFile, "the NFS service addresses (a cluster started with Options.NFSAddresses?)")
}

// readPairs reads DIR/file's "KEY VALUE" lines (what names the file in
// the failure).
func (c *Cluster) readPairs(file, what string) map[string]string {
	c.tb.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, file))
	if err != nil {
		c.tb.Fatalf("harness: %s: %v", what, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			out[k] = v
		}
	}
	return out
}
