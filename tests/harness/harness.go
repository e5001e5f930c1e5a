// Package harness starts real multi-process weft clusters for tests: it
// builds the weft binary, runs `weft local up` in a temporary directory and
// gives the test admin clients and node control (kill, stop, start).
//
// It is test infrastructure only; production code never imports it.
package harness

import (
	"bufio"
	"context"
	"fmt"
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
	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/local"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/namespace"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Binary returns the path of a weft binary built from this checkout (once
// per test process), or $WEFT_BINARY if set.
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
}

// Cluster is a running `weft local up`.
type Cluster struct {
	tb    testing.TB
	Dir   string
	Admin *admin.Client // every node's admin API, first one that answers
	Ctl   *local.Control
	// Mount is the mount point when Options.Mount was set.
	Mount string
	cmd   *exec.Cmd
	out   *lockedBuf
	done  chan struct{}
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

// Start runs `weft local up` and waits for its "ready:" line. The cluster
// is stopped by tb.Cleanup (SIGTERM, as Ctrl-C would).
func Start(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	bin := Binary(tb)
	if o.Dir == "" {
		o.Dir = filepath.Join(tb.TempDir(), "weft-data")
	}
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
	c := &Cluster{tb: tb, Dir: o.Dir, out: &lockedBuf{}, done: make(chan struct{})}
	if o.Mount {
		c.Mount = filepath.Join(filepath.Dir(o.Dir), "mnt")
	}
	args = append(args, "--mount", c.Mount)
	c.cmd = exec.Command(bin, args...)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	c.cmd.Stderr = c.cmd.Stdout
	if err := c.cmd.Start(); err != nil {
		tb.Fatalf("harness: start weft local up: %v", err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			c.out.add(line)
			if strings.HasPrefix(line, "ready:") {
				ready <- line
			}
		}
		_ = c.cmd.Wait()
		close(c.done)
	}()
	tb.Cleanup(c.Stop)
	select {
	case <-ready:
	case <-c.done:
		tb.Fatalf("harness: weft local up exited before ready:\n%s\n%s", c.out, c.logs())
	case <-time.After(3 * time.Minute):
		tb.Fatalf("harness: cluster not ready after 3 minutes:\n%s\n%s", c.out, c.logs())
	}
	addrs, err := os.ReadFile(filepath.Join(o.Dir, local.AdminAddrsFile))
	if err != nil {
		tb.Fatal(err)
	}
	c.Admin = admin.NewClient(strings.Join(strings.Fields(string(addrs)), ","))
	if c.Ctl, err = local.Dial(o.Dir); err != nil {
		tb.Fatal(err)
	}
	return c
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
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(90 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
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
	states, err := c.Ctl.Nodes(context.Background())
	if err != nil {
		c.tb.Fatal(err)
	}
	for _, s := range states {
		if s.Name == name {
			return admin.NewClient(s.AdminAddr)
		}
	}
	c.tb.Fatalf("harness: no node %s", name)
	return nil
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
	cmd := exec.Command(Binary(c.tb), args...)
	cmd.Env = append(os.Environ(), "WEFT_ADMIN="+strings.Join(adminAddrs(c.Dir), ","))
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

// MountAt starts another `weft mount` of this cluster at dir (created if
// missing), waits until it is mounted and unmounts it at cleanup: a second
// client machine, as far as the file system can tell.
func (c *Cluster) MountAt(dir string) { c.MountAtEnv(dir) }

// MountAtEnv is MountAt with extra environment variables for the mount
// process (WEFT_FAILPOINTS=..., say).
func (c *Cluster) MountAtEnv(dir string, env ...string) { c.MountWith(dir, nil, env...) }

// MountWith is MountAt with extra flags of `weft mount` and environment
// variables for the mount process.
func (c *Cluster) MountWith(dir string, flags []string, env ...string) {
	c.tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.tb.Fatal(err)
	}
	args := append([]string{"--admin", strings.Join(adminAddrs(c.Dir), ","), "mount", "--log-level", "warn"}, flags...)
	cmd := exec.Command(Binary(c.tb), append(args, dir)...)
	cmd.Env = append(os.Environ(), env...)
	out := &lockedBuf{}
	pr, pw, err := os.Pipe()
	if err != nil {
		c.tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		c.tb.Fatal(err)
	}
	pw.Close()
	mounted := make(chan struct{})
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.add(sc.Text())
			if strings.HasPrefix(sc.Text(), "mounted:") {
				close(mounted)
			}
		}
		_ = cmd.Wait()
		close(done)
	}()
	c.tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	select {
	case <-mounted:
	case <-done:
		c.tb.Fatalf("harness: weft mount %s exited:\n%s", dir, out)
	case <-time.After(time.Minute):
		c.tb.Fatalf("harness: weft mount %s not mounted after a minute:\n%s", dir, out)
	}
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
	cli, err := etcdx.NewClient(ctx, info.EtcdEndpoints)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.tb.Cleanup(func() { cli.Close() })
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
