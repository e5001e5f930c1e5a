package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Launcher starts what a local cluster's supervisor runs: its nodes and
// its mount. The supervisor (Up) is written once over it, and so is the
// control API that kills, stops and starts nodes. Exec runs each as a
// process of the weft binary, as `weft local up` does; InProcess runs them
// inside the calling process (the test harness's in-process mode, see
// tests/harness). A node is a `weft server` with the configuration file
// the supervisor wrote either way, so both run the same nodes.
type Launcher interface {
	// Node starts a node as n says. It returns once the node is
	// launched, not when it is up.
	Node(n NodeSpec) (Proc, error)
	// Mount mounts a cluster as m says and returns once the file system
	// is served at m.Dir, or with an error (the mount then stopped) if it
	// is not within m.Timeout or ctx ends first.
	Mount(ctx context.Context, m MountSpec) (Proc, error)
}

// Proc is a node or a mount a Launcher started. Its methods are safe for
// concurrent use.
type Proc interface {
	// PID is its process id (with InProcess, the calling process's).
	PID() int
	// Stop asks it to stop gracefully (SIGTERM) and returns at once.
	Stop() error
	// Kill stops it as a crash would (SIGKILL) and returns at once.
	Kill() error
	// Done is closed once it has ended.
	Done() <-chan struct{}
	// Exit says how it ended once Done is closed ("exited", or why not).
	Exit() string
}

// NodeSpec is one node to start (`weft server`).
type NodeSpec struct {
	// Name is the node's name.
	Name string
	// Config is the node's server configuration file (the supervisor
	// writes it: server.Config as YAML).
	Config string
	// Log is the file the node's log is appended to.
	Log string
	// Env is added to the node's environment for this run ("KEY=VALUE",
	// e.g. WEFT_FAILPOINTS=…); a launcher whose nodes share a process
	// refuses it.
	Env []string
	// Cgroup, when not nil, is the directory of the cgroup v2 the node is
	// to run in (Options.Cgroups): a process of its own is born in it; a
	// launcher that cannot give a node a cgroup of its own refuses it.
	Cgroup *os.File
}

// MountSpec is one mount of a cluster (`weft mount`).
type MountSpec struct {
	// Admin is the admin API addresses of the cluster's nodes,
	// comma-separated.
	Admin string
	// Dir is the mount point, an existing directory.
	Dir string
	// Log is the file the mount's log is appended to.
	Log string
	// Metrics, if set, is where the mount serves its metrics and workers
	// (weft mount --metrics).
	Metrics string
	// PKI is the directory of the cluster's CAs and of the mount's client
	// certificate (weft mount --pki); "" for a cluster without TLS.
	PKI string
	// Env adds environment variables (WEFT_FAILPOINTS=…) to the mount's
	// process. Only Exec can: InProcess refuses a MountSpec with Env, as
	// its mount shares the calling process's environment.
	Env []string
	// Timeout bounds the wait for the file system to be served; 0 means a
	// minute.
	Timeout time.Duration
}

func (m MountSpec) timeout() time.Duration {
	if m.Timeout == 0 {
		return time.Minute
	}
	return m.Timeout
}

// Exec launches each node and mount as a process of the weft binary
// Binary: `weft server --config FILE`, `weft mount`. Each runs in its own
// process group (a terminal's Ctrl-C reaches only the supervisor, which
// then stops them in order) and gets SIGTERM if the supervisor dies.
type Exec struct {
	Binary string
}

var (
	_ Launcher = Exec{}
	_ Launcher = InProcess{}
)

// Node runs `weft server --config n.Config`.
func (e Exec) Node(n NodeSpec) (Proc, error) {
	return e.start("node "+n.Name, n.Log, n.Env, n.Cgroup, "server", "--config", n.Config)
}

// Mount runs `weft mount` and waits until the file system is mounted.
func (e Exec) Mount(ctx context.Context, m MountSpec) (Proc, error) {
	args := []string{"--admin", m.Admin, "mount", "--log-level", "warn"}
	if m.Metrics != "" {
		args = append(args, "--metrics", m.Metrics)
	}
	if m.PKI != "" {
		// The mount's own identity, even if more client certificates
		// were issued into the directory since.
		args = append(args, "--pki", m.PKI, "--as", MountIdentity.Name)
	} else {
		args = append(args, "--insecure")
	}
	p, err := e.start("mount "+m.Dir, m.Log, m.Env, nil, append(args, m.Dir)...)
	if err != nil {
		return nil, err
	}
	return p, waitMounted(ctx, m, p)
}

// start starts the binary with args, its output appended to logPath, in
// cgroup when it is not nil.
func (e Exec) start(what, logPath string, env []string, cgroup *os.File, args ...string) (*execProc, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("local: %s log: %w", what, err)
	}
	cmd := exec.Command(e.Binary, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	// Own process group: a terminal's Ctrl-C reaches only the supervisor,
	// which then stops the nodes in order. Pdeathsig stops them if the
	// supervisor itself is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if cgroup != nil {
		// Born in its cgroup (clone3 CLONE_INTO_CGROUP), not moved there
		// later: a socket belongs to the cgroup its process was in when
		// it was created.
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cgroup.Fd())
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("local: start %s: %w", what, err)
	}
	p := &execProc{cmd: cmd, done: make(chan struct{})}
	// Reaps the process: it ends when the process exits (Stop and Kill
	// signal it), and Done says when.
	go func() {
		err := cmd.Wait()
		lf.Close()
		p.exit = "exited"
		if err != nil {
			p.exit = err.Error()
		}
		close(p.done)
	}()
	return p, nil
}

// execProc is a process Exec started.
type execProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	exit string // set before done is closed
}

func (p *execProc) PID() int              { return p.cmd.Process.Pid }
func (p *execProc) Stop() error           { return p.signal(syscall.SIGTERM) }
func (p *execProc) Kill() error           { return p.signal(syscall.SIGKILL) }
func (p *execProc) Done() <-chan struct{} { return p.done }

func (p *execProc) Exit() string {
	select {
	case <-p.done:
		return p.exit
	default:
		return ""
	}
}

func (p *execProc) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("local: signal pid %d: %w", p.cmd.Process.Pid, err)
	}
	return nil
}

// fuseMagic is the f_type statfs reports for a FUSE file system.
const fuseMagic = 0x65735546

// waitMounted waits until m.Dir is a FUSE mount; if it is not within
// m.Timeout, ctx ends, or p ends first, it stops p and says why, with the
// end of the mount's log.
func waitMounted(ctx context.Context, m MountSpec, p Proc) error {
	deadline := time.Now().Add(m.timeout())
	for {
		var st syscall.Statfs_t
		if syscall.Statfs(m.Dir, &st) == nil && st.Type == fuseMagic {
			return nil
		}
		var err error
		select {
		case <-p.Done():
			return fmt.Errorf("local: weft mount %s %s; its log ends with:\n%s", m.Dir, p.Exit(), tail(m.Log, 15))
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				err = fmt.Errorf("local: %s not mounted after %s; see %s", m.Dir, m.timeout(), m.Log)
			}
		}
		if err != nil {
			_ = p.Stop()
			select {
			case <-p.Done():
			case <-time.After(30 * time.Second):
				_ = p.Kill()
			}
			return err
		}
	}
}
