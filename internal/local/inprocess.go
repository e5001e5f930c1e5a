package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/weftfs/weft/internal/mount"
	"github.com/weftfs/weft/internal/server"
)

// InProcess launches each node and mount inside the calling process: a
// node with server.Start on the configuration file the supervisor wrote,
// a mount with mount.Run. The cluster's nodes, their etcd members and the
// mount then share one process, which is what tests want to debug and
// profile it as one program, and what costs them the least; but it is
// not a deployment: each Exec process owns what this shares, so:
//
//   - Kill is server.Server.Crash, as close to SIGKILL as a process can do
//     to a part of itself (serving stops at once, the lease is left to
//     expire, the etcd member stops abruptly, nothing more is written);
//     a mount cannot be killed, only stopped (its FUSE server is in this
//     process, and so may be the program using the file system);
//   - state that is global to a process is shared: the Prometheus default
//     registry (each node's /metrics also shows the process's Go and etcd
//     metrics), failpoints (WEFT_FAILPOINTS is read once by the process,
//     so a fault cannot be injected into one node or mount by its
//     environment: Mount refuses MountSpec.Env), the working directory and
//     environment; every node reports this process's pid;
//   - each node's log (its slog logger, at info level as `weft server`'s
//     default) and the mount's (at warn) go to their own files, but what
//     a library prints to stderr (etcd's own errors, Go's panics) goes to
//     the process's;
//   - a program in this process that uses the mount is served by this
//     process: a page fault on a shared mapping of a FUSE file can then
//     deadlock the Go runtime (a stop-the-world waits for the faulting
//     thread, which waits for the FUSE server), so such programs mmap
//     only from another process.
type InProcess struct{}

// Node starts the node in this process.
func (InProcess) Node(n NodeSpec) (Proc, error) {
	if len(n.Env) > 0 {
		return nil, fmt.Errorf("local: node %s: nodes in the calling process share its environment (and failpoints); run the cluster with the Exec launcher to start a node with %v", n.Name, n.Env)
	}
	if n.Cgroup != nil {
		return nil, fmt.Errorf("local: node %s: nodes in the calling process share its cgroup; run the cluster with the Exec launcher for --cgroups", n.Name)
	}
	cfg, err := server.LoadConfig(n.Config)
	if err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("local: node %s log: %w", n.Name, err)
	}
	log := slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	p := &inProc{cancel: cancel, done: make(chan struct{})}
	// The node's "process": not a background loop of a node but the node
	// itself, whose own work is in its runner and job engine. It ends
	// when the node does: Stop cancels ctx, Kill crashes it; Done says
	// when it has.
	go func() {
		defer close(p.done)
		defer lf.Close()
		// As `weft server` does: the context a stop cancels is the one
		// the node starts under.
		s, err := server.Start(ctx, cfg, log)
		if err == nil {
			p.mu.Lock()
			p.node = s
			killed := p.killed
			p.mu.Unlock()
			if killed {
				s.Crash()
			}
			err = s.Wait(ctx)
		}
		p.end(err)
		if err != nil && !errors.Is(err, server.ErrCrashed) {
			log.Error("node ended", "err", err)
		}
	}()
	return p, nil
}

// Mount mounts the cluster in this process and waits until it is served.
func (InProcess) Mount(ctx context.Context, m MountSpec) (Proc, error) {
	if len(m.Env) > 0 {
		return nil, fmt.Errorf("local: a mount inside this process cannot have an environment of its own (%v): it shares the process's; run the mount as a process (Exec)", m.Env)
	}
	lf, err := os.OpenFile(m.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("local: mount %s log: %w", m.Dir, err)
	}
	log := slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	mctx, cancel := context.WithCancel(context.Background())
	p := &inProc{cancel: cancel, done: make(chan struct{}), mount: true}
	// The mount's "process", as for a node: it ends when mount.Run
	// returns (Stop cancels mctx); Done says when.
	go func() {
		defer close(p.done)
		defer lf.Close()
		err := mount.Run(mctx, mount.Options{Admin: m.Admin, Dir: m.Dir, AllowOther: true, Metrics: m.Metrics, Log: log, PKI: m.PKI, Identity: identityIn(m.PKI)})
		if err != nil {
			log.Error("mount ended", "err", err)
		}
		p.end(err)
	}()
	return p, waitMounted(ctx, m, p)
}

// inProc is a node or a mount running in this process.
type inProc struct {
	cancel context.CancelFunc // a graceful stop
	done   chan struct{}
	mount  bool

	mu     sync.Mutex
	node   *server.Server // once started
	killed bool
	exit   string
}

func (p *inProc) PID() int              { return os.Getpid() }
func (p *inProc) Done() <-chan struct{} { return p.done }

func (p *inProc) Stop() error {
	p.cancel()
	return nil
}

// Kill crashes a node (server.Server.Crash, in the background: Done says
// when it is over); a node still starting crashes once started.
func (p *inProc) Kill() error {
	if p.mount {
		return errors.New("local: a mount inside this process cannot be killed, only stopped: its FUSE server is part of the process")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		return nil
	}
	p.killed = true
	if p.node != nil {
		go p.node.Crash()
	}
	return nil
}

func (p *inProc) Exit() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// end records how it ended.
func (p *inProc) end(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case errors.Is(err, server.ErrCrashed):
		p.exit = "crashed (in-process kill)"
	case err != nil:
		p.exit = err.Error()
	default:
		p.exit = "exited"
	}
}

// identityIn is the client identity a local mount presents: the
// supervisor's own mount identity when there is a PKI directory.
func identityIn(pkiDir string) string {
	if pkiDir == "" {
		return ""
	}
	return MountIdentity.Name
}
