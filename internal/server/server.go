package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/impact"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/namespace"
	"github.com/weftfs/weft/internal/pki"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/runner"
	"github.com/weftfs/weft/internal/topology"
	"github.com/weftfs/weft/internal/vip"
)

// Version is the weft version a node reports.
var Version = "0.1.0-dev"

// Server is one running weft node.
type Server struct {
	cfg Config
	log *slog.Logger
	// run runs the node's background workers (workers.go).
	run *runner.Runner

	// tls is the node's identity and the cluster's CAs; nil with
	// --insecure.
	tls    *pki.Source
	member *etcdx.Member
	etcd   *clientv3.Client
	// space follows how full etcd's databases are: the node's clients
	// (jobs, NFS) commit small files' data inline only while they are
	// under half their quota.
	space   *etcdx.SpaceWatcher
	store   *cluster.Store
	session *cluster.Session
	// drivesMu guards drives (the open drives, which the node owns and
	// closes) and serialises drive adds and the added-drives file.
	drivesMu sync.Mutex
	drives   []*drive.Drive
	specs    []DriveSpec // each drive's spec, as drives
	// embedded: the control plane is weft's embedded etcd members.
	embedded bool
	meta     *meta.Meta
	files    *client.Client // file layouts for the admin API, and the jobs' data path
	jobs     *job.Engine
	jobEnv   *jobEnv
	throttle *impact.Controller
	blocks   *block.Service
	qos      *qosNode // the node's QoS (qos.go)

	grpcLis  net.Listener
	grpc     *grpc.Server
	adminLis net.Listener
	admin    *http.Server
	// nfsLis are bound for cfg.NFS.Listen until the gateway serves them;
	// nfs is the gateway (nfs.go), nil without --nfs.
	nfsLis []net.Listener
	nfs    *NFSRole
	// vip holds the NFS service addresses (nfs_vip.go), nil without
	// --nfs-address.
	vip *vip.Manager

	stopOnce sync.Once
	stop     chan struct{} // closed when shutdown begins
	fatal    chan error
}

// Start brings a node up: the embedded etcd member if configured, the
// control-plane registration, the drives, the block service and the admin
// API. On error everything already started is stopped again.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (s *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s = &Server{cfg: cfg, log: log.With("node", cfg.Name), stop: make(chan struct{}), fatal: make(chan error, 4)}
	s.run = runner.New(runner.Config{Log: s.log})
	defer func() {
		if err != nil {
			s.shutdown(context.Background())
		}
	}()
	if err = s.loadTLS(); err != nil {
		return s, err
	}
	// Listen first, so that a port in use fails fast and before etcd state
	// is touched.
	if s.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return s, fmt.Errorf("server: block service address %s (--grpc-addr): %w", cfg.GRPCAddr, err)
	}
	if s.adminLis, err = net.Listen("tcp", cfg.AdminAddr); err != nil {
		return s, fmt.Errorf("server: admin address %s (--admin-addr): %w", cfg.AdminAddr, err)
	}
	for _, a := range cfg.NFS.Listen {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return s, fmt.Errorf("server: NFS address %s (--nfs): %w", a, err)
		}
		s.nfsLis = append(s.nfsLis, l)
	}
	if cfg.Etcd.Embed {
		s.member, err = etcdx.Start(ctx, etcdx.MemberConfig{
			Name:           cfg.Name,
			Dir:            filepath.Join(cfg.DataDir, "etcd"),
			ClientURL:      cfg.Etcd.ClientURL,
			PeerURL:        cfg.Etcd.PeerURL,
			InitialCluster: cfg.Etcd.InitialCluster,
			ClusterToken:   cfg.Etcd.Token,
			QuotaBytes:     int64(cfg.Etcd.Quota),
			TLS:            s.memberTLS(),
		}, s.log)
		if err != nil {
			return s, err
		}
	}
	if err = s.connectEtcd(ctx); err != nil {
		return s, err
	}
	if s.store, err = cluster.Open(ctx, s.etcd); err != nil {
		return s, err
	}
	host, _ := os.Hostname()
	rec := cluster.NodeRecord{Name: cfg.Name, GRPCAddr: s.grpcLis.Addr().String(), AdminAddr: s.adminLis.Addr().String()}
	if cfg.Etcd.Embed {
		rec.EtcdClient = cfg.Etcd.ClientURL
	}
	live := cluster.NodeLive{PID: os.Getpid(), Host: host, BootID: bootID(), Version: Version, Started: time.Now().UTC(),
		MachineBoot: cluster.MachineBoot()}
	live.ProcStart, _ = cluster.ProcessStart(os.Getpid())
	// The drives are opened (and their directories locked) before the node
	// registers: holding them all proves that no earlier incarnation of
	// this node still serves them, so a node restarted after a crash takes
	// its registration over at once (cluster.Registration.Holds).
	if err = s.openDrives(ctx); err != nil {
		return s, err
	}
	if s.session, err = s.store.Register(ctx, cluster.Registration{Record: rec, Live: live, TTL: cfg.LeaseTTL, Log: s.log, Runner: s.run,
		Holds: s.held()}); err != nil {
		return s, err
	}
	// The control plane runs in weft's embedded members if this node or any
	// other node hosts one; clients then use the members' larger limits.
	s.embedded = cfg.Etcd.Embed
	if nodes, err := s.store.ListNodes(ctx); err == nil {
		for _, n := range nodes {
			s.embedded = s.embedded || n.EtcdClient != ""
		}
	}
	if s.meta, err = namespace.Open(ctx, s.etcd, s.embedded, false); err != nil {
		return s, err
	}
	if s.space, err = etcdx.WatchSpace(s.run, s.etcd, s.log); err != nil {
		return s, err
	}
	// The namespace is open before the drives register: a new drive
	// records whether it stores data yet (registerDrive).
	if err = s.registerDrives(ctx); err != nil {
		return s, err
	}
	if s.blocks, err = block.NewService(s.log, s.drives...); err != nil {
		return s, err
	}
	if s.tls != nil {
		s.blocks.RequireIdentity()
		s.grpc = grpc.NewServer(block.SecureServerOptions(s.tls)...)
	} else {
		s.grpc = grpc.NewServer(block.ServerOptions()...)
	}
	s.qos = s.newQoS()
	s.blocks.SetGate(s.qos.gate)
	s.blocks.Register(s.grpc)

	reg := prometheus.NewRegistry()
	reg.MustRegister(block.NewCollector(s.blocks), runner.NewCollector(s.run), qos.NewCollector(s.qos.gate), etcdx.NewSpaceCollector(s.space))
	gatherers := prometheus.Gatherers{prometheus.DefaultGatherer, reg}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(gatherers, promhttp.HandlerOpts{}))
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	// The jobs' data path: QoS class maintenance, client node-NAME.
	if s.files, err = client.New(client.Config{Meta: s.meta, Topology: topology.New(s.store, time.Second), Log: s.log, ClusterID: s.store.ClusterID(),
		BlockTLS: s.clientTLS(), Class: qos.Maintenance, ClientID: s.jobsClientID(), JobOf: jobOf,
		LocalIO: func() bool { return !s.qos.follow.Current().Limits(qos.Maintenance) }, OwnDrive: s.ownDrive, InlineAllowed: s.space.Below}); err != nil {
		return s, err
	}
	if err = s.startJobs(ctx); err != nil {
		return s, err
	}
	if err = s.startQoS(ctx); err != nil {
		return s, err
	}
	reg.MustRegister(newJobCollector(s.jobs, s.throttle))
	var nfsNode admin.NFSNode
	if cfg.NFS.Enabled() {
		lis := s.nfsLis
		s.nfsLis = nil // the gateway's now, closed by it even if it fails to start
		if err = s.startNFS(ctx, lis); err != nil {
			return s, err
		}
		nfsNode = s.nfs
		reg.MustRegister(newNFSCollector(s.nfs))
		if len(cfg.NFS.Addresses) > 0 {
			if err = s.startNFSAddresses(ctx, s.nfs); err != nil {
				return s, err
			}
			reg.MustRegister(s.vip)
		}
	}
	mux.Handle("/", admin.NewHandler(admin.Deps{
		Store: s.store, Layouts: s.files, Namespace: s.meta, Jobs: s.jobs, Throttle: s.throttle, Policies: impact.NewPolicyStore(s.etcd), Log: s.log, Drives: s, Workers: s.run, QoS: s, NFS: nfsNode, NFSAddresses: s.nfsAddresses,
		Node: admin.NodeInfo{
			Name: cfg.Name, PID: os.Getpid(), ClusterID: s.store.ClusterID(), EtcdEndpoints: cfg.endpoints(), EmbeddedEtcd: s.embedded,
		},
		Peer: s.adminPeer(), Insecure: cfg.Insecure,
	}))
	guard := admin.Guard{Tokens: s.store, Insecure: cfg.Insecure, Log: s.log}
	s.admin = &http.Server{Handler: guard.Wrap(mux), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.With("role", "admin-api").Handler(), slog.LevelWarn)} // failed TLS handshakes, say

	if err = s.startWorkers(); err != nil {
		return s, err
	}
	s.log.Info("node up", "cluster", s.store.ClusterID(), "grpc", rec.GRPCAddr, "admin", rec.AdminAddr, "drives", len(s.drives),
		"nfs", cfg.NFS.Listen, "nfs_addresses", cfg.NFS.Addresses)
	return s, nil
}

func bootID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// publishUsage publishes one drive's usage, or its error (drive down).
func (s *Server) publishUsage(ctx context.Context, d *drive.Drive) error {
	dl := cluster.DriveLive{CapacityBytes: d.Capacity()}
	if u, err := d.Usage(); err != nil {
		dl.Error = err.Error()
	} else {
		dl.TotalBytes, dl.FreeBytes, dl.UsedBytes, dl.Blocks = u.TotalBytes, u.FreeBytes, u.UsedBytes, u.Blocks
	}
	return s.session.PublishDrive(ctx, d.ID(), dl)
}

// Store returns the node's control-plane store.
func (s *Server) Store() *cluster.Store { return s.store }

// AdminAddr returns the admin API's bound address.
func (s *Server) AdminAddr() string { return s.adminLis.Addr().String() }

// GRPCAddr returns the block service's bound address.
func (s *Server) GRPCAddr() string { return s.grpcLis.Addr().String() }

// Wait blocks until ctx is done (a requested stop) or a role fails, then
// stops the node gracefully. It returns the failure, if any, or
// ErrCrashed once a Crash has ended.
func (s *Server) Wait(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
	case err = <-s.fatal:
		s.log.Error("node failing", "err", err)
	case <-s.stop: // Crash: shutdown below waits for it to end
		err = ErrCrashed
	}
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s.shutdown(sctx)
	return err
}

// shutdown stops every started role, in reverse order: stop accepting
// requests, drain them, stop the job engine and the node's workers (within
// ctx), leave the cluster (revoke the lease so the node shows down at
// once), close drives, stop etcd.
func (s *Server) shutdown(ctx context.Context) {
	s.stopOnce.Do(func() {
		close(s.stop)
		if s.admin != nil {
			_ = s.admin.Shutdown(ctx)
		} else if s.adminLis != nil {
			s.adminLis.Close()
		}
		s.stopNFS(ctx)
		if s.grpc != nil {
			done := make(chan struct{})
			go func() { s.grpc.GracefulStop(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
				s.grpc.Stop()
			}
		} else if s.grpcLis != nil {
			s.grpcLis.Close()
		}
		if s.jobs != nil {
			// Its final checkpoints and resignation each wait at most a
			// lease TTL; without a quorum none succeeds, and the rest of
			// the shutdown (revoking the lease, closing etcd) must still
			// fit in the time a supervisor gives a stopping node.
			jctx, cancel := context.WithTimeout(ctx, 2*s.cfg.LeaseTTL)
			err := s.jobs.Stop(jctx)
			cancel()
			if err != nil {
				s.log.Warn("stopping the job engine", "err", err)
			}
		}
		if err := s.run.Stop(ctx); err != nil {
			s.log.Warn("stopping the node's workers", "err", err)
		}
		if s.session != nil {
			if err := s.session.Close(); err != nil {
				s.log.Warn("leaving the cluster", "err", err)
			}
		}
		s.closeLocal()
		if s.etcd != nil {
			s.etcd.Close()
		}
		s.member.Close()
		s.log.Info("node stopped")
	})
}

// closeLocal releases what the node holds on this machine, once nothing
// serves or works on it any more: the open-file handles, the jobs'
// environment and the drives (their locks). A stop and a crash both end
// with it.
func (s *Server) closeLocal() {
	if s.files != nil {
		_ = s.files.Close()
	}
	if s.jobEnv != nil {
		s.jobEnv.close()
	}
	s.drivesMu.Lock()
	for _, d := range s.drives {
		if err := d.Close(); err != nil {
			s.log.Warn("close drive", "drive", d.Path(), "err", err)
		}
	}
	s.drivesMu.Unlock()
}

// ownDrive returns the drive id if this node serves it, else nil: the
// jobs' short-circuit I/O to the node's own drives goes through them, so
// that the drives' counters (metrics, the impact throttle's load) count it.
func (s *Server) ownDrive(id meta.DriveID) *drive.Drive {
	d, err := s.blocks.Drive(drive.ID(id))
	if err != nil {
		return nil
	}
	return d
}
