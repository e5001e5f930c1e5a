package etcdx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ErrNotReady is returned by Start when the member does not become ready
// within MemberConfig.ReadyTimeout.
var ErrNotReady = errors.New("etcdx: member not ready")

// MemberConfig describes one embedded etcd member.
type MemberConfig struct {
	// Name is the member name, unique in the etcd cluster (weft uses the node
	// name).
	Name string
	// Dir is the member's data directory. A directory that already holds a
	// member's data restarts that member; InitialCluster is then ignored.
	Dir string
	// ClientURL is where clients connect, e.g. "http://127.0.0.1:2379".
	ClientURL string
	// PeerURL is where the other members connect, e.g. "http://127.0.0.1:2380".
	PeerURL string
	// InitialCluster lists every founding member as "name=peerURL,…". Empty
	// means a one-member cluster of this member alone.
	InitialCluster string
	// ClusterToken distinguishes clusters bootstrapped on the same addresses.
	ClusterToken string
	// ReadyTimeout bounds how long Start waits for the member to join a
	// quorum. Zero means 60 s.
	ReadyTimeout time.Duration
	// QuotaBytes is the backend size quota: past it the member refuses
	// every write (an alarm) until compacted and defragmented. Zero means
	// DefaultQuota.
	QuotaBytes int64
	// LogLevel is etcd's own log level ("error" unless set).
	LogLevel string
	// TLS, when set, serves the client and peer URLs (which must then be
	// https) with mutual TLS; nil serves them in plain http (weft server
	// --insecure).
	TLS *MemberTLS
}

// MemberTLS is an embedded member's TLS material, as files: etcd reads its
// certificate and key again at each handshake, so a renewed certificate is
// used without a restart; the trusted CAs it reads when it starts (see
// docs/admin-guide.md, "Rotating the CA").
//
// Clients and peers must present a certificate signed by a CA of
// TrustedCAFile (ClientCertAuth on both URLs); with etcd's authentication
// on, a client's certificate CommonName is its etcd user. On the peer URL
// only the certificates named in PeerCNs are admitted (the founding
// members' node identities): any other identity of the cluster — a mount's,
// say — could otherwise speak raft to the members. The client's address
// is not checked against a peer certificate's names (etcd's SAN check,
// which does reverse DNS lookups): the identity is the certificate.
type MemberTLS struct {
	CertFile, KeyFile, TrustedCAFile string
	// PeerCNs are the certificate CommonNames admitted on the peer URL;
	// empty admits every certificate the CAs signed.
	PeerCNs []string
}

// MemberKeepAliveMinTime is the shortest keep-alive ping interval an
// embedded member accepts from its clients: below KeepAliveTime.
const MemberKeepAliveMinTime = 500 * time.Millisecond

// Member is a running embedded etcd member.
type Member struct {
	etcd     *embed.Etcd
	cfg      MemberConfig
	stopOnce sync.Once // Close or Crash
}

// DefaultQuota is an embedded member's database quota unless set
// (weft server --etcd-quota): etcd's suggested largest, four times its
// own default. MinQuota and MaxQuota bound what may be set: less than
// 64 MiB leaves no room for a namespace of any size; past 64 GiB etcd's
// start, snapshots and defragmentation take minutes, and members that
// fall behind may never catch up.
const (
	DefaultQuota = 8 << 30
	MinQuota     = 64 << 20
	MaxQuota     = 64 << 30
)

// Start starts an embedded member and waits until it is ready to serve
// (which for a multi-member cluster needs a quorum of founding members).
// Errors: a bad URL, a data directory of another cluster, ErrNotReady.
func Start(ctx context.Context, mc MemberConfig, log *slog.Logger) (*Member, error) {
	if mc.Name == "" || mc.Dir == "" {
		return nil, fmt.Errorf("etcdx: member needs a name and a data directory")
	}
	scheme := "http"
	if mc.TLS != nil {
		scheme = "https"
	}
	curl, err := url.Parse(mc.ClientURL)
	if err != nil || curl.Host == "" || curl.Scheme != scheme {
		return nil, fmt.Errorf("etcdx: bad client URL %q: want %s://HOST:PORT", mc.ClientURL, scheme)
	}
	purl, err := url.Parse(mc.PeerURL)
	if err != nil || purl.Host == "" || purl.Scheme != scheme {
		return nil, fmt.Errorf("etcdx: bad peer URL %q: want %s://HOST:PORT", mc.PeerURL, scheme)
	}
	if err := os.MkdirAll(mc.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcdx: data directory: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = mc.Name
	cfg.Dir = mc.Dir
	cfg.ListenClientUrls = []url.URL{*curl}
	cfg.AdvertiseClientUrls = []url.URL{*curl}
	cfg.ListenPeerUrls = []url.URL{*purl}
	cfg.AdvertisePeerUrls = []url.URL{*purl}
	cfg.InitialCluster = mc.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = mc.Name + "=" + mc.PeerURL
	}
	cfg.InitialClusterToken = mc.ClusterToken
	if cfg.InitialClusterToken == "" {
		cfg.InitialClusterToken = "weft"
	}
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.QuotaBackendBytes = mc.QuotaBytes
	if cfg.QuotaBackendBytes == 0 {
		cfg.QuotaBackendBytes = DefaultQuota
	}
	// Metadata transactions can be large (a directory's worth of entries);
	// raise etcd's defaults (128 ops, 1.5 MiB) to what the kv layer assumes.
	cfg.MaxTxnOps = 1024
	cfg.MaxRequestBytes = 8 << 20
	// Keep history short: weft reads current values and uses revisions only
	// for compare-and-swap, so old revisions are dead weight.
	// NewConfig leaves the slow-request threshold at 0, which makes etcd
	// format every request as slow: about 12% of its CPU.
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	// A member cut off from the others and returning must not disturb the
	// leader: with Pre-Vote it asks whether it could win before raising
	// its term, and with CheckQuorum (always on in etcd 3.6) the others
	// refuse while they hear from a leader. etcd 3.6 defaults Pre-Vote
	// on; weft says so rather than rely on it.
	cfg.PreVote = true
	// Clients ping every KeepAliveTime (client.go); etcd's default minimum
	// (5 s) would answer faster pings with GOAWAY.
	cfg.GRPCKeepAliveMinTime = MemberKeepAliveMinTime
	// weft's clients speak gRPC; etcd's JSON gateway (/v3/kv/range …) is
	// one more door, and one that cannot carry a client certificate's
	// identity to etcd's authentication.
	cfg.EnableGRPCGateway = false
	if t := mc.TLS; t != nil {
		cfg.TlsMinVersion = "TLS1.3"
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: true}
		cfg.PeerTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: true,
			AllowedCNs: t.PeerCNs, SkipClientSANVerify: true}
	}
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "10m"
	lvl := mc.LogLevel
	if lvl == "" {
		lvl = "error"
	}
	cfg.LogLevel = lvl
	zl, err := zapLogger(lvl)
	if err != nil {
		return nil, err
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zl)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdx: start member %s in %s: %w", mc.Name, mc.Dir, err)
	}
	timeout := mc.ReadyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdx: member %s: %w", mc.Name, err)
	case <-t.C:
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("%w: member %s waited %s for a quorum of %s", ErrNotReady, mc.Name, timeout, cfg.InitialCluster)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	if log != nil {
		log.Info("etcd member ready", "name", mc.Name, "client", mc.ClientURL, "peer", mc.PeerURL, "dir", mc.Dir)
	}
	return &Member{etcd: e, cfg: mc}, nil
}

// PeerURL returns the member's peer URL.
func (m *Member) PeerURL() string { return m.cfg.PeerURL }

// Endpoints returns the member's client URL as a one-element list.
func (m *Member) Endpoints() []string { return []string{m.cfg.ClientURL} }

// Err returns a channel that reports a fatal error of the running member.
func (m *Member) Err() <-chan error { return m.etcd.Err() }

// Close stops the member gracefully. It is safe to call more than once,
// and after Crash.
//
// Over TLS etcd serves gRPC inside its HTTP/2 server, and its Close stops
// gRPC but leaves the HTTP/2 connections that outlived the shutdown's
// grace open: they go on answering pings, and every request on them with
// an empty "200 OK" (a client sees "malformed header: missing HTTP
// content-type"), so a client in the same process would never turn to
// another member. Close therefore shuts those connections down, as the
// end of a member's process would.
func (m *Member) Close() {
	if m == nil || m.etcd == nil {
		return
	}
	m.stopOnce.Do(func() {
		m.etcd.Close()
		sever(m.cfg.ClientURL, m.cfg.PeerURL)
	})
}

// zapLogger builds a logger for etcd's internals writing to stderr at lvl.
func zapLogger(lvl string) (*zap.Logger, error) {
	var l zapcore.Level
	if err := l.Set(strings.ToLower(lvl)); err != nil {
		return nil, fmt.Errorf("etcdx: bad etcd log level %q: %w", lvl, err)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(l)
	zc.OutputPaths = []string{"stderr"}
	zc.ErrorOutputPaths = []string{"stderr"}
	zc.Sampling = nil
	return zc.Build()
}
