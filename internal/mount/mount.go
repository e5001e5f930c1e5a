package mount

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/gateway/fuse"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/namespace"
	"github.com/weftfs/weft/internal/pki"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/runner"
	"github.com/weftfs/weft/internal/topology"
	"github.com/weftfs/weft/internal/vfs"
)

// Options configure a mount.
type Options struct {
	// Admin is the admin API address(es) of any node(s), comma-separated.
	Admin string
	// Dir is the mount point (an existing directory).
	Dir string
	// AllowOther opens the mount to every user (default in weft).
	AllowOther bool
	// SessionTTL bounds how long open files of a crashed mount stay
	// protected from deletion (default 30 s).
	SessionTTL time.Duration
	// Ready, if set, is called once the file system is mounted.
	Ready func(dir string)
	// NoCache turns the metadata cache off: every lookup and getattr
	// asks etcd (for comparisons and diagnosis). It implies SyncDirOps.
	NoCache bool
	// SyncDirOps makes every create and unlink durable before it is
	// acknowledged. By default they are acknowledged in directories this
	// mount holds the delegation of and committed within milliseconds
	// (fsync of the file or directory waits for that).
	SyncDirOps bool
	// NoLocalIO reads and writes every unit through its node's block
	// service, even of drives on this machine (which a mount otherwise
	// reads from and stages into directly): to measure or diagnose the
	// network path.
	NoLocalIO bool
	// Metrics, if set, is an address (host:port) where the mount serves
	// Prometheus metrics of its metadata cache, write-back, file I/O and
	// workers at /metrics, and its workers' status at /workers (JSON,
	// admin.Workers: weft mount workers ADDR).
	Metrics string
	// Pprof also serves Go profiles at /debug/pprof/ of Metrics.
	Pprof bool
	// Readahead and PrefetchCap are client.Config's (0: defaults).
	Readahead   int
	PrefetchCap int64
	// InlineMax is client.Config's (0: the default, negative: none).
	InlineMax int
	Debug     bool
	Log       *slog.Logger
	// PKI is the directory of the cluster's CAs (ca.crt) and of the
	// mount's client certificate (client-NAME.crt, .key): every
	// connection — to the admin API, to etcd, to the block services — is
	// then mutual TLS as that identity. "" connects in plain text, to a
	// cluster run with --insecure.
	PKI string
	// Identity is the client identity's name in PKI; "" uses the only
	// client certificate there.
	Identity string
}

// Run mounts the cluster at o.Dir and serves it until ctx is done or the
// file system is unmounted from outside; then it unmounts, writes out
// buffered data and closes the session.
//
// The mount's background work runs as workers of one runner (package
// runner), listed by weft mount workers: cache-follow, cache-progress and
// cache-flush (the metadata cache, kvcache), delegations (the write-back,
// meta), opens (open files, vfs), metrics (the --metrics server, one
// blocking step), policy-follow (the installed pool policy by which new
// files are placed, cluster.PolicyFollower) and fuse (waits for the FUSE
// server to end). Each
// component stops its own workers when it closes; the runner stops last,
// before the etcd client closes, and names any worker that did not stop.
func Run(ctx context.Context, o Options) error {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = 30 * time.Second
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	if err := o.loopbackMetrics(); err != nil {
		return err
	}
	clearStale(dir, o.Log)
	tlsCfg, err := o.clientTLS()
	if err != nil {
		return err
	}
	var adminOpts []admin.ClientOption
	var etcdOpts []etcdx.ClientOption
	if tlsCfg != nil {
		adminOpts = append(adminOpts, admin.WithTLS(tlsCfg))
		etcdOpts = append(etcdOpts, etcdx.WithTLS(tlsCfg))
	} else {
		o.Log.Warn("mounting without TLS (no --pki): only a cluster run with --insecure answers")
	}
	info, err := admin.NewClient(o.Admin, adminOpts...).Node(ctx)
	if err != nil {
		return fmt.Errorf("mount: ask the cluster how to reach its control plane: %w", err)
	}
	cli, err := etcdx.NewClient(ctx, info.EtcdEndpoints, etcdOpts...)
	if errors.Is(err, etcdx.ErrDenied) {
		return fmt.Errorf("mount: the control plane does not admit this mount's identity: register it where an administrator's credentials are (weft cert register --client NAME): %w", err)
	}
	if err != nil {
		return fmt.Errorf("mount: %w", pki.Explain(err))
	}
	defer cli.Close()
	run := runner.New(runner.Config{Log: o.Log})
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := run.Stop(sctx); err != nil {
			o.Log.Warn("stopping the mount's workers", "err", err)
		}
	}()
	if err := etcdx.Steer(run, cli, o.Log); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	var inlineOK func() bool // nil: inline commits turned off, nothing to watch
	if o.InlineMax >= 0 {
		space, err := etcdx.WatchSpace(run, cli, o.Log)
		if err != nil {
			return fmt.Errorf("mount: %w", err)
		}
		inlineOK = space.Below
	}
	store, err := cluster.Open(ctx, cli)
	if err != nil {
		return err
	}
	if store.ClusterID() != info.ClusterID {
		return fmt.Errorf("mount: etcd at %v holds cluster %s, but node %s says %s", info.EtcdEndpoints, store.ClusterID(), info.Name, info.ClusterID)
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(o.SessionTTL/time.Second)))
	if err != nil {
		return fmt.Errorf("mount: session lease: %w", err)
	}
	defer sess.Close()
	var m *meta.Meta
	if o.NoCache {
		m, err = namespace.OpenSession(ctx, cli, info.EmbeddedEtcd, true, meta.SessionID(sess.Lease()))
	} else {
		var stopCache func()
		m, stopCache, err = namespace.OpenCached(ctx, cli, info.EmbeddedEtcd, namespace.CacheOptions{
			Session: meta.SessionID(sess.Lease()), WriteBack: !o.SyncDirOps, Log: o.Log, Runner: run})
		if stopCache != nil {
			defer stopCache()
		}
	}
	if err != nil {
		return err
	}
	topo := topology.New(store, time.Second)
	localIO := store.ClusterID() // what client.Config.ClusterID turns local I/O on with
	if o.NoLocalIO {
		localIO = ""
	}
	c, err := client.New(client.Config{Meta: m, Topology: topo, Session: meta.SessionID(sess.Lease()), Log: o.Log, ClusterID: localIO, BlockTLS: tlsCfg,
		Class: qos.Other, ClientID: fmt.Sprintf("mount-%x", sess.Lease()), Readahead: o.Readahead, PrefetchCap: o.PrefetchCap, InlineMax: o.InlineMax,
		InlineAllowed: inlineOK})
	if err != nil {
		return err
	}
	defer c.Close()
	if o.Metrics != "" {
		stop, err := serveMetrics(o.Metrics, o.Pprof, m, c, run, dir)
		if err != nil {
			return err
		}
		defer stop()
	}
	follow := cluster.NewPolicyFollower(cli, o.Log)
	if err := follow.Load(ctx); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	if _, err := run.Go("policy-follow", follow, runner.Options{}); err != nil {
		return err
	}
	placer := &policyPlacer{follow: follow, drives: topo.Drives, log: o.Log}
	fs := vfs.New(vfs.Config{Meta: m, Client: c, Session: meta.SessionID(sess.Lease()), Capacity: capacity(store), Log: o.Log, Runner: run,
		Placer: placer})
	mnt, err := fuse.New(fs, dir, fuse.Options{FsName: "weft:" + store.ClusterID()[:8], AllowOther: o.AllowOther, Debug: o.Debug, Log: o.Log})
	if err != nil {
		return err
	}
	o.Log.Info("mounted", "dir", dir, "cluster", store.ClusterID(), "session", fmt.Sprintf("%x", sess.Lease()))
	if o.Ready != nil {
		o.Ready(dir)
	}
	unmounted := make(chan struct{})
	if _, err := run.Go("fuse", fuseWorker{mnt: mnt, done: unmounted}, runner.Options{}); err != nil {
		_ = mnt.Unmount()
		return err
	}
	select {
	case <-ctx.Done():
		unmount(mnt, dir, unmounted, o.Log)
	case <-unmounted:
		o.Log.Info("unmounted from outside", "dir", dir)
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fs.Close(cctx); err != nil {
		o.Log.Warn("closing open files", "err", err)
	}
	if err := m.Close(cctx); err != nil {
		o.Log.Error("committing the last namespace changes", "err", err)
	}
	if err := m.CloseSession(cctx, meta.SessionID(sess.Lease())); err != nil {
		o.Log.Warn("closing the session", "err", err)
	}
	return nil
}

// clientTLS returns the TLS configuration of the mount's connections, as
// the client identity in o.PKI, or nil without o.PKI.
func (o Options) clientTLS() (*tls.Config, error) {
	if o.PKI == "" {
		return nil, nil
	}
	id, err := pki.FindIdentity(o.PKI, pki.KindClient, o.Identity)
	if err != nil {
		return nil, fmt.Errorf("mount: %w", err)
	}
	src, err := pki.NewSource(o.PKI, id)
	if err != nil {
		return nil, fmt.Errorf("mount: %w", err)
	}
	return src.ClientTLS(""), nil
}

// loopbackMetrics checks the --metrics address before anything starts.
func (o Options) loopbackMetrics() error {
	if o.Metrics == "" {
		return nil
	}
	return loopback(o.Metrics)
}

// fuseWorker is the mount's "fuse" worker: one blocking step waits until
// the FUSE server ends (the file system is unmounted), then closes done.
// It cannot be cancelled: Run unmounts before it stops the runner.
type fuseWorker struct {
	mnt  *fuse.Mount
	done chan struct{}
}

var (
	_ runner.Worker = fuseWorker{}
	_ runner.Worker = serveWorker{}
)

func (w fuseWorker) Step(context.Context) (runner.State, error) {
	w.mnt.Wait()
	close(w.done)
	return runner.Done, nil
}

// unmount unmounts, retrying while the mount is busy, and detaches it
// lazily (MNT_DETACH) if it stays busy.
func unmount(mnt *fuse.Mount, dir string, done <-chan struct{}, log *slog.Logger) {
	for i := 0; i < 20; i++ {
		if err := mnt.Unmount(); err == nil {
			return
		} else if i == 0 {
			log.Info("unmount: busy, retrying", "dir", dir, "err", err)
		}
		select {
		case <-done:
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
	log.Warn("unmount: still busy; detaching lazily", "dir", dir)
	_ = syscall.Unmount(dir, syscall.MNT_DETACH)
	<-done
}

// clearStale detaches a dead FUSE mount left by a crashed process (its
// mount point answers ENOTCONN), so that the directory can be mounted again.
func clearStale(dir string, log *slog.Logger) {
	if _, err := os.Stat(dir); errors.Is(err, syscall.ENOTCONN) {
		log.Warn("detaching a stale mount", "dir", dir)
		_ = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
}

// capacity sums the up drives' space, for statfs.
func capacity(store *cluster.Store) vfs.Capacity {
	return func(ctx context.Context) (int64, int64, error) {
		drives, err := store.ListDrives(ctx)
		if err != nil {
			return 0, 0, err
		}
		var total, free int64
		for _, d := range drives {
			if d.State == cluster.Up && d.Status != cluster.StatusRemoved {
				total += d.Live.TotalBytes
				free += d.Live.FreeBytes
			}
		}
		return total, free, nil
	}
}
