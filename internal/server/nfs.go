package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/gateway/nfs"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/mount"
	"github.com/weftfs/weft/internal/namespace"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/runner"
	"github.com/weftfs/weft/internal/topology"
	"github.com/weftfs/weft/internal/vfs"
)

// The node's NFS gateway (weft server --nfs ADDR,...), NFSRole.
//
// It serves a vfs.FS of its own, built as a mount builds its own
// (internal/mount): a metadata cache over the node's etcd client, with
// every create and unlink durable before it is answered (NFSv3 replies
// promise that), a session lease of its own (its open files are protected
// from deletion until it ends, NFSSessionTTL after a crash), the
// cluster's capacity for FSSTAT, the pool policy's placement of new files,
// and POSIX permission checks in vfs (vfs.Config.CheckPermissions), as
// NFS has no kernel to make them. Its workers, on the node's runner:
//
//	nfs ADDR           serves one address (nfs.Server.Serve), one blocking
//	                   step, until NFSRole.Stop or the node stops
//	nfs-exports        follows the exports configuration
//	                   (cluster.NFSExportsFollower) and applies each version
//	nfs-rates          samples the gateway's operation counts once a
//	                   second, for the ops/s of weft nfs status
//	nfs-idle           every nfsIdleEvery, closes the files no request
//	                   used for nfs.Config.IdleClose (30 s), flushing
//	                   their buffered writes (nfs.Server.CloseIdle): a
//	                   gateway no client talks to any more releases them
//	nfs-policy-follow  follows the pool policy (cluster.PolicyFollower)
//
// Its duplicate-request cache is shared through etcd (nfs_drc.go), so
// that a request resent to another gateway after a service address moved
// gets its first reply there.
//
// and those of its metadata cache and open files (kvcache, vfs "opens").
//
// Write verifier: each address is served with a verifier drawn from the
// process's start (its time and 8 random bytes) and the address's epoch
// (NFSRole.Verifier): a restarted gateway, or an address that moved to
// this node, answers with a new one, so that clients send again what
// they wrote UNSTABLE and had not committed.

// NFSSessionTTL bounds how long the open files of a crashed gateway stay
// protected from deletion.
const NFSSessionTTL = 30 * time.Second

// nfsRateEvery is how often nfs-rates samples the operation counts.
const nfsRateEvery = time.Second

// nfsIdleEvery is how often nfs-idle closes the gateway's idle files: an
// idle file is closed at most this long after nfs.Config.IdleClose.
const nfsIdleEvery = 5 * time.Second

// ErrNFS is wrapped by the errors of NFSRole.Serve and Stop.
var ErrNFS = errors.New("server: nfs")

// nfsGateway is what NFSRole uses of the protocol server (*nfs.Server).
type nfsGateway interface {
	Serve(ctx context.Context, l net.Listener, verifier uint64) error
	SetExports(e []nfs.Export) error
	Stats() nfs.Stats
	CloseIdle(ctx context.Context)
	Close(ctx context.Context) error
}

var _ nfsGateway = (*nfs.Server)(nil)

// NFSRole is a node's NFS gateway: the protocol server over the node's
// vfs.FS, the addresses it serves, the exports it applies and its
// statistics. It is safe for concurrent use.
//
// The HA of service addresses starts and stops serving an address with
// Serve and Stop; --nfs addresses are served from the start, with
// epoch 0.
//
// Locking: mu guards served; rates has its own lock.
type NFSRole struct {
	log    *slog.Logger
	run    *runner.Runner
	gw     nfsGateway
	exp    *cluster.NFSExportsFollower
	rates  *nfsRates
	salt   [16]byte // the process's start: its time and 8 random bytes
	closed func(ctx context.Context)
	// crashed, if set, releases what a crash leaves (Server.Crash).
	crashed func()

	// applied is the exports version the gateway applies.
	applied atomic.Uint64

	mu     sync.Mutex
	served map[string]*nfsServed // by the address asked for
}

// nfsServed is one address being served.
type nfsServed struct {
	bound    string
	epoch    uint64
	verifier uint64
	l        net.Listener
	h        *runner.Handle
}

// newNFSRole returns a role over gw, drawing the process's part of the
// write verifiers; close, if set, releases what gw serves from.
func newNFSRole(gw nfsGateway, run *runner.Runner, log *slog.Logger, close func(context.Context)) *NFSRole {
	r := &NFSRole{log: log, run: run, gw: gw, rates: newNFSRates(int(admin.NFSRateWindow / nfsRateEvery)), closed: close,
		served: map[string]*nfsServed{}}
	binary.BigEndian.PutUint64(r.salt[:8], uint64(time.Now().UnixNano()))
	_, _ = rand.Read(r.salt[8:])
	return r
}

// Verifier returns the write verifier of an address this process serves
// since epoch: the etcd revision at which the address moved to this node
// (0 for an address of --nfs, served since the start). It differs from
// one process start to the next and from one epoch to the next.
func (r *NFSRole) Verifier(epoch uint64) uint64 {
	var b [24]byte
	copy(b[:16], r.salt[:])
	binary.BigEndian.PutUint64(b[16:], epoch)
	sum := sha256.Sum256(b[:])
	return binary.BigEndian.Uint64(sum[:8])
}

// Serve listens on addr (host:port) and serves NFS there, with the write
// verifier of epoch, as the worker "nfs ADDR" of the node's runner. It
// returns once the address is bound: errors are ErrNFS when addr is
// served already, or the listen's (address in use, not on this machine).
func (r *NFSRole) Serve(addr string, epoch uint64) error {
	r.mu.Lock()
	_, dup := r.served[addr]
	r.mu.Unlock()
	if dup {
		return fmt.Errorf("%w: %s is served already (Stop it first)", ErrNFS, addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: listen on %s: %w", ErrNFS, addr, err)
	}
	return r.serve(addr, l, epoch)
}

// serve serves l, bound for addr, with epoch's verifier.
func (r *NFSRole) serve(addr string, l net.Listener, epoch uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.served[addr]; dup {
		l.Close()
		return fmt.Errorf("%w: %s is served already (Stop it first)", ErrNFS, addr)
	}
	sv := &nfsServed{bound: l.Addr().String(), epoch: epoch, verifier: r.Verifier(epoch), l: l}
	h, err := r.run.Go("nfs "+addr, nfsServeWorker{gw: r.gw, l: l, verifier: sv.verifier}, runner.Options{})
	if err != nil {
		l.Close()
		return fmt.Errorf("%w: %s: %w", ErrNFS, addr, err)
	}
	sv.h = h
	r.served[addr] = sv
	r.log.Info("NFS serving", "addr", sv.bound, "epoch", epoch, "verifier", fmt.Sprintf("%016x", sv.verifier))
	return nil
}

// Stop stops serving addr: it closes its listener and waits until the
// gateway has closed every connection accepted there (within ctx; an
// error wrapping runner.ErrNotStopped if not). Errors: ErrNFS when addr
// is not served.
func (r *NFSRole) Stop(ctx context.Context, addr string) error {
	r.mu.Lock()
	sv, ok := r.served[addr]
	delete(r.served, addr)
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s is not served here", ErrNFS, addr)
	}
	sv.l.Close()
	err := sv.h.Stop(ctx)
	r.log.Info("NFS stopped serving", "addr", sv.bound, "err", err)
	return err
}

// Addrs returns the addresses served (as Serve was given them), sorted.
func (r *NFSRole) Addrs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.served))
	for a := range r.served {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// listeners returns the bound addresses served, sorted.
func (r *NFSRole) listeners() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.served))
	for _, sv := range r.served {
		out = append(out, sv.bound)
	}
	slices.Sort(out)
	return out
}

// stopAll stops serving every address, each within ctx.
func (r *NFSRole) stopAll(ctx context.Context) {
	for _, a := range r.Addrs() {
		if err := r.Stop(ctx, a); err != nil && !errors.Is(err, ErrNFS) {
			r.log.Warn("stopping an NFS address", "addr", a, "err", err)
		}
	}
}

// NFSCloseTimeout bounds the release of a stopping gateway once its
// addresses are closed: flushing its open files, closing its metadata
// cache and revoking its session, which wait for the control plane (a
// node stopping after the etcd quorum is gone would otherwise wait for
// each call's own timeout). Nothing in it was promised stable to a
// client: FILE_SYNC writes and namespace changes are durable before their
// reply, and UNSTABLE writes not yet committed are sent again by their
// clients when the verifier changes.
const NFSCloseTimeout = 5 * time.Second

// close stops serving (each address within ctx) and releases the gateway
// and its file system (within NFSCloseTimeout).
func (r *NFSRole) close(ctx context.Context) {
	r.stopAll(ctx)
	ctx, cancel := context.WithTimeout(ctx, NFSCloseTimeout)
	defer cancel()
	if err := r.gw.Close(ctx); err != nil {
		r.log.Warn("closing the NFS gateway", "err", err)
	}
	if r.closed != nil {
		r.closed(ctx)
	}
}

// applyExports gives the gateway the exports of x (the default export
// while none is configured). Exports the gateway refuses leave it with
// those it had, logged.
func (r *NFSRole) applyExports(x cluster.NFSExports) {
	if err := r.gw.SetExports(nfsExports(x.Effective())); err != nil {
		r.log.Warn("the NFS gateway refuses the exports: keeping the previous ones", "version", x.Version, "err", err)
		return
	}
	if r.applied.Swap(x.Version) != x.Version {
		r.log.Info("NFS exports applied", "version", x.Version, "default", len(x.Exports) == 0)
	}
}

// nfsExports converts the configured exports to the gateway's.
func nfsExports(in []cluster.NFSExport) []nfs.Export {
	out := make([]nfs.Export, len(in))
	for i, e := range in {
		out[i] = nfs.Export{Path: e.Path, Clients: slices.Clone(e.Clients), ReadOnly: e.ReadOnly, NoRootSquash: e.NoRootSquash,
			AnonUID: e.AnonUID, AnonGID: e.AnonGID, Sync: e.Sync}
	}
	return out
}

// NFSStatus returns the gateway's addresses, clients and operations
// (admin.NFSNode).
func (r *NFSRole) NFSStatus() admin.NFSNodeStatus {
	st := r.gw.Stats()
	out := admin.NFSNodeStatus{Gateway: true, Listeners: r.listeners(), ExportsVersion: r.applied.Load(),
		Clients: []admin.NFSClient{}, Ops: []admin.NFSOp{}, RefusedConns: st.RefusedConns}
	for _, c := range st.Clients {
		out.Clients = append(out.Clients, admin.NFSClient{Addr: c.Addr, Listener: c.Listener, Ops: c.Ops, LastSeen: c.LastSeen.UTC()})
	}
	slices.SortFunc(out.Clients, func(a, b admin.NFSClient) int {
		return cmp.Or(b.LastSeen.Compare(a.LastSeen), cmp.Compare(a.Addr, b.Addr))
	})
	rates := r.rates.perSecond()
	for name, o := range st.Ops {
		out.Ops = append(out.Ops, admin.NFSOp{Procedure: name, Count: o.Count, Errors: o.Errors, Seconds: o.Seconds, PerSecond: rates[name]})
	}
	slices.SortFunc(out.Ops, func(a, b admin.NFSOp) int { return cmp.Compare(a.Procedure, b.Procedure) })
	return out
}

// nfsServeWorker is the worker "nfs ADDR": one blocking step serves the
// listener until it is closed (NFSRole.Stop) or the step's context ends
// (the runner stops); the gateway then closes the connections it accepted
// there. A failure of the listener ends the worker with its error (shown
// by weft node workers, and logged); the node goes on.
type nfsServeWorker struct {
	gw       nfsGateway
	l        net.Listener
	verifier uint64
}

var _ runner.Worker = nfsServeWorker{}

func (w nfsServeWorker) Step(ctx context.Context) (runner.State, error) {
	defer context.AfterFunc(ctx, func() { w.l.Close() })()
	err := w.gw.Serve(ctx, w.l, w.verifier)
	if err != nil && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
		return runner.Done, fmt.Errorf("server: nfs %s: %w", w.l.Addr(), err)
	}
	return runner.Done, nil
}

// nfsRateWorker is the worker "nfs-rates".
type nfsRateWorker struct{ r *NFSRole }

var _ runner.Worker = nfsRateWorker{}

func (w nfsRateWorker) Step(context.Context) (runner.State, error) {
	w.r.rates.add(time.Now(), w.r.gw.Stats().Ops)
	return runner.Idle, nil
}

// nfsIdleWorker is the worker "nfs-idle".
type nfsIdleWorker struct{ r *NFSRole }

var _ runner.Worker = nfsIdleWorker{}

func (w nfsIdleWorker) Step(ctx context.Context) (runner.State, error) {
	w.r.gw.CloseIdle(ctx)
	return runner.Idle, nil
}

// nfsRates keeps the last samples of the gateway's operation counts, to
// tell each procedure's rate.
//
// Locking: mu guards samples.
type nfsRates struct {
	mu      sync.Mutex
	keep    int
	samples []nfsSample // oldest first, at most keep+1
}

type nfsSample struct {
	at     time.Time
	counts map[string]uint64
}

func newNFSRates(keep int) *nfsRates { return &nfsRates{keep: max(keep, 1)} }

// add records the counts of ops at time at.
func (n *nfsRates) add(at time.Time, ops map[string]nfs.OpStat) {
	s := nfsSample{at: at, counts: make(map[string]uint64, len(ops))}
	for name, o := range ops {
		s.counts[name] = o.Count
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.samples = append(n.samples, s)
	if len(n.samples) > n.keep+1 {
		n.samples = slices.Delete(n.samples, 0, len(n.samples)-n.keep-1)
	}
}

// perSecond returns each procedure's operations per second between the
// oldest and the newest sample (none before two samples). A count that
// went down (a restarted gateway) counts from 0.
func (n *nfsRates) perSecond() map[string]float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]float64{}
	if len(n.samples) < 2 {
		return out
	}
	first, last := n.samples[0], n.samples[len(n.samples)-1]
	secs := last.at.Sub(first.at).Seconds()
	if secs <= 0 {
		return out
	}
	for name, c := range last.counts {
		d := c
		if p := first.counts[name]; p <= c {
			d = c - p
		}
		out[name] = float64(d) / secs
	}
	return out
}

// startNFS builds the node's gateway and serves lis (bound for the --nfs
// addresses, in order), with epoch 0.
func (s *Server) startNFS(ctx context.Context, lis []net.Listener) (err error) {
	log := s.log.With("role", "nfs")
	var undo []func(context.Context)
	release := func(ctx context.Context) {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i](ctx)
		}
	}
	defer func() {
		if err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), NFSCloseTimeout)
			defer cancel()
			release(ctx)
			for _, l := range lis {
				l.Close()
			}
		}
	}()
	sess, err := concurrency.NewSession(s.etcd, concurrency.WithTTL(int(NFSSessionTTL/time.Second)))
	if err != nil {
		return fmt.Errorf("server: nfs: session lease: %w", err)
	}
	undo = append(undo, func(ctx context.Context) {
		// Not sess.Close, which waits up to the lease's TTL for a revoke:
		// a lease not revoked expires by itself.
		sess.Orphan()
		if _, err := s.etcd.Revoke(ctx, sess.Lease()); err != nil {
			log.Warn("revoking the session lease (it expires by itself)", "err", err)
		}
	})
	sid := meta.SessionID(sess.Lease())
	m, stopCache, err := namespace.OpenCached(ctx, s.etcd, s.embedded, namespace.CacheOptions{Session: sid, WriteBack: false, Log: log, Runner: s.run})
	if stopCache != nil {
		undo = append(undo, func(context.Context) { stopCache() })
	}
	if err != nil {
		return fmt.Errorf("server: nfs: %w", err)
	}
	undo = append(undo, func(ctx context.Context) {
		if err := m.Close(ctx); err != nil {
			log.Error("committing the last namespace changes", "err", err)
		}
		if err := m.CloseSession(ctx, sid); err != nil {
			log.Warn("closing the session", "err", err)
		}
	})
	topo := topology.New(s.store, time.Second)
	c, err := client.New(client.Config{Meta: m, Topology: topo, Session: sid, Log: log, ClusterID: s.store.ClusterID(), BlockTLS: s.clientTLS(),
		Class: qos.Other, ClientID: "nfs-" + s.cfg.Name, InlineAllowed: s.space.Below})
	if err != nil {
		return fmt.Errorf("server: nfs: %w", err)
	}
	undo = append(undo, func(context.Context) { c.Close() })
	follow := cluster.NewPolicyFollower(s.etcd, log)
	if err := follow.Load(ctx); err != nil {
		return fmt.Errorf("server: nfs: %w", err)
	}
	ph, err := s.run.Go("nfs-policy-follow", follow, runner.Options{})
	if err != nil {
		return fmt.Errorf("server: nfs: %w", err)
	}
	undo = append(undo, func(ctx context.Context) { _ = ph.Stop(ctx) })
	fs := vfs.New(vfs.Config{Meta: m, Client: c, Session: sid, Capacity: mount.Capacity(s.store), Log: log, Runner: s.run,
		Placer: mount.NewPlacer(follow, topo.Drives, log), CheckPermissions: true})
	undo = append(undo, func(ctx context.Context) {
		if err := fs.Close(ctx); err != nil {
			log.Warn("closing open files", "err", err)
		}
	})
	var role *NFSRole
	exp := cluster.NewNFSExportsFollower(s.store, log, func(x cluster.NFSExports) {
		if role != nil {
			role.applyExports(x)
		}
	})
	if err := exp.Load(ctx); err != nil {
		return fmt.Errorf("server: nfs: %w", err)
	}
	gw, err := nfs.New(nfs.Config{FS: fs, Log: log, Exports: nfsExports(exp.Current().Effective()), DRC: newNFSDRC(s.etcd),
		MaxConns: s.cfg.NFS.MaxConnections})
	if err != nil {
		return fmt.Errorf("server: nfs: %w", err)
	}
	role = newNFSRole(gw, s.run, log, release)
	// After a crash nothing reaches etcd any more: the data path's
	// connections are closed, the session's lease is left to expire.
	role.crashed = func() {
		sess.Orphan()
		c.Close()
	}
	role.exp = exp
	role.applied.Store(exp.Current().Version)
	eh, err := s.run.Go("nfs-exports", exp, runner.Options{})
	if err != nil {
		return fmt.Errorf("server: nfs: %w", err)
	}
	undo = append(undo, func(ctx context.Context) { _ = eh.Stop(ctx) })
	rh, err := s.run.Go("nfs-rates", nfsRateWorker{role}, runner.Options{Idle: nfsRateEvery, MinBackoff: nfsRateEvery, MaxBackoff: nfsRateEvery})
	if err != nil {
		return fmt.Errorf("server: nfs: %w", err)
	}
	undo = append(undo, func(ctx context.Context) { _ = rh.Stop(ctx) })
	ih, err := s.run.Go("nfs-idle", nfsIdleWorker{role}, runner.Options{Idle: nfsIdleEvery, Delay: nfsIdleEvery, MinBackoff: nfsIdleEvery, MaxBackoff: nfsIdleEvery})
	if err != nil {
		return fmt.Errorf("server: nfs: %w", err)
	}
	undo = append(undo, func(ctx context.Context) { _ = ih.Stop(ctx) })
	for i, l := range lis {
		if err := role.serve(s.cfg.NFS.Listen[i], l, 0); err != nil {
			lis = lis[i+1:]
			role.stopAll(context.Background())
			_ = gw.Close(context.Background())
			return err
		}
	}
	lis = nil
	s.nfs = role
	return nil
}

// NFS returns the node's NFS gateway, nil if it runs none.
func (s *Server) NFS() *NFSRole { return s.nfs }

// stopNFS stops the gateway (its addresses, then its file system), or
// closes the --nfs listeners a failed start left bound.
func (s *Server) stopNFS(ctx context.Context) {
	s.stopNFSAddresses(ctx)
	if s.nfs != nil {
		s.nfs.close(ctx)
	}
	for _, l := range s.nfsLis {
		l.Close()
	}
}
