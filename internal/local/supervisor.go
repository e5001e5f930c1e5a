package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/server"
)

// Options configure Up.
type Options struct {
	// Dir holds everything: layout, node data, drives, logs.
	Dir string
	// Nodes and DrivesPerNode shape a new cluster (0: 3 and 4, or what
	// Dir already holds).
	Nodes, DrivesPerNode int
	// Binary is the weft executable to run as `weft server` and `weft
	// mount` (default: this process's own executable). Only Exec uses it.
	Binary string
	// Launcher starts the nodes and the mount (default: Exec of Binary,
	// one process each).
	Launcher Launcher
	// LeaseTTL is the nodes' lease TTL (default server.DefaultLeaseTTL).
	LeaseTTL time.Duration
	// ReadyTimeout bounds the wait for every node and drive to come up.
	ReadyTimeout time.Duration
	// Mount is where to mount the cluster ("" for no mount).
	Mount string
	// Pprof serves Go profiles on every node's admin address.
	Pprof bool
	// RepairGrace is the nodes' repair grace period (0: the default).
	RepairGrace time.Duration
	// EtcdQuota is the embedded members' database quota in bytes
	// (weft server --etcd-quota; 0: the default). Like DriveSize, applied
	// on every start.
	EtcdQuota int64
	// DriveSize is the capacity of every drive in bytes (0: each has the
	// whole file system). The drives of a local cluster share one file
	// system, so without it each reports that file system's free space.
	// It is configuration, applied on every start, not recorded in the
	// layout: a later Up without it lifts the cap.
	DriveSize int64
	// OwnAddresses gives each node of a new cluster a loopback address of
	// its own (127.A.B.N for node nN, A.B drawn for the cluster) instead
	// of ports on 127.0.0.1, so that a test can cut one node off with
	// firewall rules on its address. It shapes the layout: an existing
	// cluster keeps the addresses it was created with.
	OwnAddresses bool
	// Cgroups starts each node in a cgroup v2 of its own (see
	// NodeState.Cgroup), so that a firewall rule can match the packets a
	// node sends. Needs root and a cgroup v2 hierarchy (ErrNoCgroup2).
	Cgroups bool
	// Insecure runs a new cluster without TLS (weft local up --insecure):
	// no certificates, plain text everywhere, nobody authenticated; every
	// node logs it loudly. For experiments and benchmarks only. A
	// cluster keeps what it was created with (see Layout.IsInsecure).
	Insecure bool
	// NFS makes every node an NFS gateway on an address of its own (in
	// the layout, NodeLayout.NFSAddr: chosen the first time, then kept);
	// Up prints each node's libnfs URL and writes the addresses to
	// DIR/nfs.addrs. Without it the nodes run no gateway.
	NFS bool
	// NFSAddresses are NFS service addresses (weft server --nfs-address):
	// loopback addresses such as 127.0.0.50, every node a candidate for
	// each, served by the node holding it at one port chosen at each Up
	// (NFSPort, or a free one). Up prints each one's libnfs URL
	// ("nfs: service ADDR URL") and writes "ADDR HOST:PORT" lines to
	// DIR/nfs.service.addrs. They make every node a gateway.
	NFSAddresses []string
	// NFSPort is the service addresses' port; 0 picks a free one.
	NFSPort int
	// NFSIface, with NFSAddresses, gives every node an interface of its
	// own for them: the template with "{node}" replaced by the node's
	// name (e.g. weftpub-{node}, an interface made beforehand, such as a
	// dummy one). The holder puts the address on its interface (ip addr
	// add/del, no ARP) and holds addresses only while that interface's
	// link is up: public link failures on one machine.
	NFSIface string
	// Out receives the user-facing lines ("ready: …", node exits).
	Out io.Writer
	Log *slog.Logger
}

// NodeState is a supervised node as reported by the control API.
type NodeState struct {
	Name      string `json:"name"`
	PID       int    `json:"pid"`
	Running   bool   `json:"running"`
	Exit      string `json:"exit,omitempty"`
	AdminAddr string `json:"admin_addr"`
	GRPCAddr  string `json:"grpc_addr"`
	// Host is the address the node listens on (its own with
	// Options.OwnAddresses, else 127.0.0.1).
	Host string `json:"host"`
	// Cgroup is the node's cgroup v2 relative to the hierarchy's root
	// (with Options.Cgroups; "" otherwise), as iptables' cgroup match
	// takes it: the node's processes and every socket they open are in it.
	Cgroup string `json:"cgroup,omitempty"`
	// NFSAddr is the node's NFS gateway address when the cluster runs
	// with Options.NFS ("" otherwise).
	NFSAddr string `json:"nfs_addr,omitempty"`
	Log     string `json:"log"`
	// Env is the environment the running (or last) process was started
	// with on top of the supervisor's own (Control.StartEnv).
	Env []string `json:"env,omitempty"`
}

// Files Up writes in Dir besides the layout.
const (
	AdminAddrFile  = "admin.addr"  // the first node's admin address
	AdminAddrsFile = "admin.addrs" // every node's admin address, one a line
	ControlFile    = "local.addr"  // the path of the supervisor's control API's unix socket
	PIDFile        = "local.pid"   // the supervisor's pid
	NFSAddrsFile   = "nfs.addrs"   // with Options.NFS: "NODE HOST:PORT" a line, every node's NFS address
	// NFSServiceAddrsFile: with Options.NFSAddresses, "ADDR HOST:PORT" a
	// line, every service address and where it is served.
	NFSServiceAddrsFile = "nfs.service.addrs"
)

type proc struct {
	n   NodeLayout // zero for the mount
	p   Proc
	env []string // on top of the supervisor's environment
}

type supervisor struct {
	opts   Options
	layout Layout
	dir    string

	cgroups *cgroups // nil without Options.Cgroups
	// adminOpts are the options of the supervisor's admin API client:
	// the cluster's admin identity (none if insecure).
	adminOpts []admin.ClientOption

	mu    sync.Mutex
	procs map[string]*proc
	down  bool
}

// Up starts (or restarts) the local cluster in opts.Dir, prints one line
// starting with "ready:" when every node and drive is up, and supervises the
// nodes until ctx is done; then it stops them (SIGTERM, then SIGKILL after
// 30 s) and returns. A node that exits is reported and left down; it can be
// started again through the control API (weft local node start).
func Up(ctx context.Context, opts Options) error {
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	if opts.Launcher == nil {
		if opts.Binary == "" {
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("local: find the weft binary: %w", err)
			}
			opts.Binary = exe
		}
		opts.Launcher = Exec{Binary: opts.Binary}
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	layout, created, err := loadOrCreateLayout(dir, opts.Nodes, opts.DrivesPerNode, opts.OwnAddresses, opts.Insecure)
	if err != nil {
		return err
	}
	if opts.NFS {
		if layout, err = withNFS(dir, layout); err != nil {
			return err
		}
	}
	if len(opts.NFSAddresses) > 0 {
		if opts.NFSPort, err = servicePort(opts.NFSAddresses, opts.NFSPort); err != nil {
			return err
		}
	}
	s := &supervisor{opts: opts, layout: layout, dir: dir, procs: map[string]*proc{}}
	if !layout.IsInsecure() {
		if err := ensurePKI(dir, layout, time.Now()); err != nil {
			return err
		}
		cfg, err := adminTLS(dir)
		if err != nil {
			return err
		}
		s.adminOpts = append(s.adminOpts, admin.WithTLS(cfg))
	}
	if opts.Cgroups {
		if s.cgroups, err = newCgroups(layout.Token); err != nil {
			return err
		}
		defer s.cgroups.remove()
	}
	if created {
		fmt.Fprintf(opts.Out, "creating a %d-node cluster with %d drives per node in %s\n", layout.Nodes, layout.DrivesPerNode, dir)
	} else {
		fmt.Fprintf(opts.Out, "restarting the %d-node cluster in %s\n", layout.Nodes, dir)
	}
	for _, n := range layout.Members {
		if err := s.writeConfig(n); err != nil {
			return err
		}
	}
	ctl, err := s.serveControl()
	if err != nil {
		return err
	}
	defer ctl.Close()
	_ = writeFileAtomic(filepath.Join(dir, PIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"))
	defer os.Remove(filepath.Join(dir, PIDFile))
	defer os.Remove(filepath.Join(dir, ControlFile))

	for _, n := range layout.Members {
		if err := s.start(n.Name, nil); err != nil {
			s.stopAll()
			return err
		}
	}
	if err := s.waitReady(ctx); err != nil {
		s.stopAll()
		return err
	}
	first := layout.Members[0].AdminAddr
	var all []string
	for _, n := range layout.Members {
		all = append(all, n.AdminAddr)
	}
	_ = writeFileAtomic(filepath.Join(dir, AdminAddrFile), []byte(first+"\n"))
	_ = writeFileAtomic(filepath.Join(dir, AdminAddrsFile), []byte(strings.Join(all, "\n")+"\n"))
	if opts.NFS {
		var lines []string
		for _, n := range layout.Members {
			lines = append(lines, n.Name+" "+n.NFSAddr)
		}
		_ = writeFileAtomic(filepath.Join(dir, NFSAddrsFile), []byte(strings.Join(lines, "\n")+"\n"))
	} else {
		_ = os.Remove(filepath.Join(dir, NFSAddrsFile))
	}
	if len(opts.NFSAddresses) > 0 {
		var lines []string
		for _, a := range opts.NFSAddresses {
			lines = append(lines, a+" "+net.JoinHostPort(a, strconv.Itoa(opts.NFSPort)))
		}
		_ = writeFileAtomic(filepath.Join(dir, NFSServiceAddrsFile), []byte(strings.Join(lines, "\n")+"\n"))
	} else {
		_ = os.Remove(filepath.Join(dir, NFSServiceAddrsFile))
	}
	mounted := ""
	if opts.Mount != "" {
		if mounted, err = s.mount(ctx, opts.Mount, strings.Join(all, ",")); err != nil {
			s.stopAll()
			return err
		}
		mounted = " mount=" + mounted
	}
	scheme, insecure := "https", ""
	if layout.IsInsecure() {
		scheme, insecure = "http", " INSECURE (no TLS, nobody authenticated)"
	}
	fmt.Fprintf(opts.Out, "ready: admin=%s://%s nodes=%d drives=%d dir=%s%s%s\n",
		scheme, first, layout.Nodes, layout.Nodes*layout.DrivesPerNode, dir, mounted, insecure)
	creds := ""
	if !layout.IsInsecure() {
		creds = " --pki " + filepath.Join(dir, PKIDir)
	}
	if opts.NFS {
		for _, n := range layout.Members {
			fmt.Fprintf(opts.Out, "nfs: %s %s\n", n.Name, NFSURL(n.NFSAddr))
		}
	}
	for _, a := range opts.NFSAddresses {
		fmt.Fprintf(opts.Out, "nfs: service %s %s\n", a, NFSURL(net.JoinHostPort(a, strconv.Itoa(opts.NFSPort))))
	}
	fmt.Fprintf(opts.Out, "try: weft --admin %s%s status   (Ctrl-C stops the cluster)\n", first, creds)

	<-ctx.Done()
	fmt.Fprintln(opts.Out, "stopping the cluster…")
	s.stopAll()
	fmt.Fprintln(opts.Out, "stopped")
	return nil
}

// lockDir takes an exclusive lock on DIR/local.lock so that two supervisors
// never run the same cluster directory.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "local.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		pid, _ := os.ReadFile(filepath.Join(dir, PIDFile))
		return nil, fmt.Errorf("local: %s is in use by another `weft local up` (pid %s); stop it (weft local down --dir %s) or use another --dir",
			dir, strings.TrimSpace(string(pid)), dir)
	}
	return f, nil
}

func (s *supervisor) nodeDir(name string) string { return filepath.Join(s.dir, "nodes", name) }

func (s *supervisor) configPath(name string) string {
	return filepath.Join(s.nodeDir(name), "config.yaml")
}

// writeConfig writes a node's server config file (regenerated on every run).
func (s *supervisor) writeConfig(n NodeLayout) error {
	cfg := server.Config{
		Name:        n.Name,
		DataDir:     s.nodeDir(n.Name),
		GRPCAddr:    n.GRPCAddr,
		AdminAddr:   n.AdminAddr,
		LeaseTTL:    s.opts.LeaseTTL,
		Pprof:       s.opts.Pprof,
		RepairGrace: s.opts.RepairGrace,
		Etcd:        server.EtcdConfig{Endpoints: s.layout.etcdEndpoints()},
	}
	if s.opts.NFS && n.NFSAddr != "" {
		cfg.NFS.Listen = []string{n.NFSAddr}
	}
	if len(s.opts.NFSAddresses) > 0 {
		cfg.NFS.Addresses = slices.Clone(s.opts.NFSAddresses)
		cfg.NFS.Port = s.opts.NFSPort
		if s.opts.NFSIface != "" {
			iface := strings.ReplaceAll(s.opts.NFSIface, "{node}", n.Name)
			cfg.NFS.Iface, cfg.NFS.LinkIface = iface, iface
			cfg.NFS.HookAdd, cfg.NFS.HookDel = "ip addr add {addr}/{prefix} dev {iface}", "ip addr del {addr}/{prefix} dev {iface}"
		}
	}
	if s.layout.IsInsecure() {
		cfg.Insecure = true
	} else {
		cfg.PKIDir = filepath.Join(s.dir, PKIDir)
	}
	if n.Embed {
		cfg.Etcd.Embed = true
		cfg.Etcd.ClientURL = n.EtcdClient
		cfg.Etcd.PeerURL = n.EtcdPeer
		cfg.Etcd.InitialCluster = s.layout.initialCluster()
		cfg.Etcd.Token = s.layout.Token
		cfg.Etcd.Quota = server.Size(s.opts.EtcdQuota)
	}
	for _, d := range n.Drives {
		cfg.Drives = append(cfg.Drives, server.DriveSpec{
			Path: filepath.Join(s.dir, d), Class: "ssd", Pool: server.DefaultPool, Capacity: server.Size(s.opts.DriveSize),
		})
	}
	if err := os.MkdirAll(s.nodeDir(n.Name), 0o755); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return writeFileAtomic(s.configPath(n.Name), b)
}

func (s *supervisor) member(name string) (NodeLayout, bool) {
	for _, n := range s.layout.Members {
		if n.Name == name {
			return n, true
		}
	}
	return NodeLayout{}, false
}

// start launches a node unless it is running, with env ("KEY=VALUE"
// entries) added to the supervisor's environment for this run only
// (WEFT_FAILPOINTS=…, say): a later start without env runs without it.
func (s *supervisor) start(name string, env []string) error {
	n, ok := s.member(name)
	if !ok {
		return fmt.Errorf("local: no node %q in this cluster", name)
	}
	if err := checkEnv(env); err != nil {
		return fmt.Errorf("local: start node %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.launchableLocked(name); err != nil {
		return err
	}
	logPath := filepath.Join(s.nodeDir(name), "server.log")
	spec := NodeSpec{Name: name, Config: s.configPath(name), Log: logPath, Env: env}
	if s.cgroups != nil {
		cg, err := s.cgroups.open(name)
		if err != nil {
			return err
		}
		defer cg.Close()
		spec.Cgroup = cg
	}
	p, err := s.opts.Launcher.Node(spec)
	if err != nil {
		return fmt.Errorf("local: start node %s: %w", name, err)
	}
	s.trackLocked(name, n, p, logPath)
	s.procs[name].env = env
	return nil
}

// checkEnv refuses environment entries that are not KEY=VALUE.
func checkEnv(env []string) error {
	for _, e := range env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return fmt.Errorf("environment entry %q: want KEY=VALUE, e.g. WEFT_FAILPOINTS=drive/put-before-sync=crash", e)
		}
	}
	return nil
}

// launchableLocked refuses to launch name while it runs or the cluster
// stops.
func (s *supervisor) launchableLocked(name string) error {
	if s.down {
		return errors.New("local: the cluster is stopping")
	}
	if p := s.procs[name]; p != nil && p.p.Exit() == "" {
		return fmt.Errorf("local: node %s is already running (pid %d)", name, p.p.PID())
	}
	return nil
}

// trackLocked supervises a launched node or mount: its end is reported
// unless the cluster is stopping.
func (s *supervisor) trackLocked(name string, n NodeLayout, p Proc, logPath string) {
	s.procs[name] = &proc{n: n, p: p}
	go func() {
		<-p.Done()
		s.mu.Lock()
		stopping := s.down
		s.mu.Unlock()
		switch {
		case stopping:
		case n.Name == "":
			fmt.Fprintf(s.opts.Out, "%s (pid %d) %s; see %s\n", name, p.PID(), p.Exit(), logPath)
		default:
			fmt.Fprintf(s.opts.Out, "node %s (pid %d) %s; restart it with: weft local node start %s --dir %s\n", name, p.PID(), p.Exit(), name, s.dir)
		}
	}()
	s.opts.Log.Info("started", "name", name, "pid", p.PID())
}

// running returns a running node (or the mount).
func (s *supervisor) running(name string) (Proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[name]
	if p == nil || p.p.Exit() != "" {
		return nil, fmt.Errorf("local: node %s is not running", name)
	}
	return p.p, nil
}

// stopAll stops the mount (which writes out buffered data and unmounts),
// then the nodes: first those without an etcd member, then the members, so
// that the control plane keeps its quorum while nodes leave.
func (s *supervisor) stopAll() {
	s.mu.Lock()
	s.down = true
	var mounts, plain, members []*proc
	for _, p := range s.procs {
		if p.p.Exit() != "" {
			continue
		}
		if p.n.Name == "" {
			mounts = append(mounts, p)
		} else if p.n.Embed {
			members = append(members, p)
		} else {
			plain = append(plain, p)
		}
	}
	s.mu.Unlock()
	for _, group := range [][]*proc{mounts, plain, members} {
		for _, p := range group {
			_ = p.p.Stop()
		}
		for _, p := range group {
			select {
			case <-p.p.Done():
			case <-time.After(30 * time.Second):
				_ = p.p.Kill()
				<-p.p.Done()
			}
		}
	}
}

// waitReady polls the first reachable node's status until every node and
// drive is up; it fails early if a node exits.
func (s *supervisor) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(s.opts.ReadyTimeout)
	want := s.layout.Nodes * s.layout.DrivesPerNode
	var last string
	for {
		s.mu.Lock()
		for name, p := range s.procs {
			if exit := p.p.Exit(); exit != "" {
				s.mu.Unlock()
				return fmt.Errorf("local: node %s %s while starting; its log (%s) ends with:\n%s",
					name, exit, filepath.Join(s.nodeDir(name), "server.log"), tail(filepath.Join(s.nodeDir(name), "server.log"), 15))
			}
		}
		s.mu.Unlock()
		for _, n := range s.layout.Members {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := admin.NewClient(n.AdminAddr, s.adminOpts...).Status(cctx)
			cancel()
			if err != nil {
				last = err.Error()
				continue
			}
			if st.NodesUp == s.layout.Nodes && st.DrivesUp >= want { // >=: drives added at run time count too
				return nil
			}
			last = fmt.Sprintf("%d/%d nodes and %d/%d drives up", st.NodesUp, s.layout.Nodes, st.DrivesUp, want)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("local: cluster not ready after %s: %s (node logs are in %s/nodes/*/server.log)", s.opts.ReadyTimeout, last, s.dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (s *supervisor) states() []NodeState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []NodeState
	for _, n := range s.layout.Members {
		host, _, _ := net.SplitHostPort(n.GRPCAddr)
		st := NodeState{Name: n.Name, AdminAddr: n.AdminAddr, GRPCAddr: n.GRPCAddr, Host: host, Log: filepath.Join(s.nodeDir(n.Name), "server.log")}
		if s.opts.NFS {
			st.NFSAddr = n.NFSAddr
		}
		if s.cgroups != nil {
			st.Cgroup = s.cgroups.Path(n.Name)
		}
		if p := s.procs[n.Name]; p != nil {
			st.PID = p.p.PID()
			st.Exit = p.p.Exit()
			st.Running = st.Exit == ""
			st.Env = p.env
		}
		out = append(out, st)
	}
	return out
}

// serveControl serves the supervisor's control API on a unix socket of
// mode 0600 (controlSocket: only this user — and root — may connect; it
// kills and starts nodes) and writes its path to DIR/local.addr:
//
//	GET  /nodes               []NodeState
//	POST /nodes/{name}/start  start a stopped node; an optional JSON body
//	                          StartRequest adds environment for this run
//	POST /nodes/{name}/stop   SIGTERM (graceful)
//	POST /nodes/{name}/kill   SIGKILL (a crash; in-process, server.Server.Crash)
//
// stop and kill answer once the node has ended.
func (s *supervisor) serveControl() (io.Closer, error) {
	l, path, err := listenControl(s.dir)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any, err error) {
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(admin.ErrorBody{Error: err.Error(), Code: "conflict"})
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /nodes", func(w http.ResponseWriter, r *http.Request) { reply(w, s.states(), nil) })
	mux.HandleFunc("POST /nodes/{name}/start", func(w http.ResponseWriter, r *http.Request) {
		var req StartRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			reply(w, nil, fmt.Errorf("local: start node %s: bad request body: %w", r.PathValue("name"), err))
			return
		}
		reply(w, map[string]string{"started": r.PathValue("name")}, s.start(r.PathValue("name"), req.Env))
	})
	for verb, act := range map[string]func(Proc) error{"stop": Proc.Stop, "kill": Proc.Kill} {
		mux.HandleFunc("POST /nodes/{name}/"+verb, func(w http.ResponseWriter, r *http.Request) {
			p, err := s.running(r.PathValue("name"))
			if err == nil {
				err = act(p)
			}
			if err == nil {
				select {
				case <-p.Done():
				case <-time.After(40 * time.Second):
					err = fmt.Errorf("local: node %s did not end within 40s of %s", r.PathValue("name"), verb)
				}
			}
			reply(w, map[string]string{verb: r.PathValue("name")}, err)
		})
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	if err := writeFileAtomic(filepath.Join(s.dir, ControlFile), []byte(path+"\n")); err != nil {
		srv.Close()
		return nil, err
	}
	// The socket, then its directory (a weft-local-HASH in the temporary
	// directory would otherwise stay behind each cluster).
	return closers{srv, removeOnClose(path), removeOnClose(filepath.Dir(path))}, nil
}

// mount starts the supervised mount at dir and waits until the file
// system is mounted there.
func (s *supervisor) mount(ctx context.Context, dir, admins string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil && !errors.Is(err, syscall.ENOTCONN) && !os.IsExist(err) {
		return "", fmt.Errorf("local: mount point %s: %w", abs, err)
	}
	s.mu.Lock()
	err = s.launchableLocked("mount")
	s.mu.Unlock()
	if err != nil {
		return "", err
	}
	logPath := filepath.Join(s.dir, "mount.log")
	spec := MountSpec{Admin: admins, Dir: abs, Log: logPath}
	if !s.layout.IsInsecure() {
		spec.PKI = filepath.Join(s.dir, PKIDir)
	}
	p, err := s.opts.Launcher.Mount(ctx, spec)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.trackLocked("mount", NodeLayout{}, p, logPath)
	s.mu.Unlock()
	return abs, nil
}

// servicePort checks the service addresses of a local cluster (loopback
// addresses: every one is on this machine without a hook) and returns
// port, or a port free on all of them when port is 0.
func servicePort(addrs []string, port int) (int, error) {
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || !ip.IsLoopback() {
			return 0, fmt.Errorf("local: NFS service address %q: a local cluster takes loopback addresses such as 127.0.0.50", a)
		}
	}
	if port != 0 {
		return port, nil
	}
	for range 20 {
		l, err := net.Listen("tcp", net.JoinHostPort(addrs[0], "0"))
		if err != nil {
			return 0, fmt.Errorf("local: NFS service address %s: %w", addrs[0], err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		free := true
		for _, a := range addrs[1:] {
			l, err := net.Listen("tcp", net.JoinHostPort(a, strconv.Itoa(p)))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return p, nil
		}
	}
	return 0, fmt.Errorf("local: no port free on every NFS service address %v: give one (--nfs-port)", addrs)
}
