package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/pki"
	"github.com/weftfs/weft/internal/qos"
)

// A node's security (see docs/admin-guide.md, "Certificates" and "Who may
// do what"): with a PKI directory, every connection it serves or makes is
// mutual TLS with its node certificate — the block service (which admits
// node and client identities), the admin API (an identity or a bearer
// token, admin.Guard), its embedded etcd member (client and peer URLs) —
// and etcd's authentication is on (cluster.EnableAuth). The certificate
// and the CAs are read again when their files change (pki.Source), so a
// renewal or a CA rotation needs no restart; etcd, which reads its
// certificate at every handshake, reads the trusted CAs only when it
// starts.
//
// With --insecure nothing of this: plain text, nobody authenticated. The
// node says so loudly at every start.

// expiryWarning is how long before its certificate expires a node starts
// warning about it at start-up.
const expiryWarning = 30 * 24 * time.Hour

// loadTLS reads the node's certificate and the cluster's CAs (or logs the
// insecure mode).
func (s *Server) loadTLS() error {
	if s.cfg.Insecure {
		s.log.Warn("INSECURE: this node runs without TLS and authenticates nobody (--insecure): anyone who reaches its ports — any user of this machine, "+
			"or of the network for a non-loopback address — can read and change every file and setting of the cluster; use it only for experiments",
			"open_to_network", s.cfg.NonLoopback())
		return nil
	}
	id := pki.Identity{Kind: pki.KindNode, Name: s.cfg.Name}
	src, err := pki.NewSource(s.cfg.PKIDir, id)
	if err != nil {
		return fmt.Errorf("server: node %s's certificate (--pki %s): %w", s.cfg.Name, s.cfg.PKIDir, err)
	}
	s.tls = src
	if left := time.Until(src.NotAfter()); left < expiryWarning {
		s.log.Warn("the node's certificate expires soon: renew it with weft cert issue --node "+s.cfg.Name,
			"expires", src.NotAfter().UTC().Format(time.RFC3339), "left", left.Round(time.Hour).String())
	}
	return nil
}

// memberTLS returns the embedded member's TLS files, nil if insecure.
// Only the founding members' node identities may use its peer URL.
func (s *Server) memberTLS() *etcdx.MemberTLS {
	if s.tls == nil {
		return nil
	}
	cert, key, bundle := s.tls.Files()
	var cns []string
	for _, m := range s.cfg.foundingMembers() {
		cns = append(cns, pki.Identity{Kind: pki.KindNode, Name: m}.String())
	}
	return &etcdx.MemberTLS{CertFile: cert, KeyFile: key, TrustedCAFile: bundle, PeerCNs: cns}
}

// connectEtcd opens the node's etcd client and, with TLS, makes sure
// etcd's authentication is on and knows the cluster's identities.
func (s *Server) connectEtcd(ctx context.Context) error {
	var opts []etcdx.ClientOption
	if s.tls != nil {
		opts = append(opts, etcdx.WithTLS(s.tls.ClientTLS("")))
	}
	cli, err := etcdx.NewClient(ctx, s.cfg.endpoints(), opts...)
	if errors.Is(err, etcdx.ErrDenied) {
		return fmt.Errorf("server: the control plane does not know node %s (no etcd user node:%s): register it where an administrator's credentials are: "+
			"weft cert register --node %s (weft cert issue does it when the cluster answers): %w", s.cfg.Name, s.cfg.Name, s.cfg.Name, err)
	}
	if err != nil {
		return fmt.Errorf("server: %w", pki.Explain(err))
	}
	s.etcd = cli
	if err := etcdx.Steer(s.run, cli, s.log); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if s.tls == nil {
		return nil
	}
	on, err := cluster.EnableAuth(ctx, cli, s.knownIdentities())
	if err != nil {
		return fmt.Errorf("server: etcd authentication: %w", err)
	}
	if on {
		s.log.Info("etcd authentication enabled: only the cluster's identities may use the control plane")
	}
	return nil
}

// knownIdentities are the identities a node makes sure etcd knows: its
// own, the founding members', and every identity whose certificate its
// PKI directory holds and its CAs signed (on the machine of the cluster's
// CA: every identity issued so far; in a local cluster: all of them).
func (s *Server) knownIdentities() []pki.Identity {
	seen := map[pki.Identity]bool{}
	var ids []pki.Identity
	add := func(id pki.Identity) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	add(pki.Identity{Kind: pki.KindNode, Name: s.cfg.Name})
	for _, m := range s.cfg.foundingMembers() {
		if pki.ValidName(m) {
			add(pki.Identity{Kind: pki.KindNode, Name: m})
		}
	}
	issued, err := pki.List(s.cfg.PKIDir)
	if err != nil {
		s.log.Warn("listing the identities of the PKI directory", "dir", s.cfg.PKIDir, "err", err)
	}
	for _, is := range issued {
		if is.Trusted {
			add(is.Identity)
		}
	}
	return ids
}

// clientTLS returns the TLS configuration of the node's connections as
// a client (to block services, other nodes' admin APIs), nil if
// insecure.
func (s *Server) clientTLS() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.ClientTLS("")
}

// dialBlocks connects to a node's block service as this node, for the
// jobs: its calls are of QoS class maintenance, from client node-NAME,
// and name the job of their context.
func (s *Server) dialBlocks(addr string) (*block.Client, error) {
	opts := []block.DialOption{block.WithDefaultTag(qos.Tag{Class: qos.Maintenance, Client: s.jobsClientID()}),
		block.WithContextTag(func(ctx context.Context) qos.Tag { return qos.Tag{Job: jobOf(ctx)} })}
	if s.tls != nil {
		opts = append(opts, block.WithTLS(s.clientTLS()))
	}
	return block.Dial(addr, opts...)
}

// adminPeer returns the options of the admin client with which this node
// relays requests to other nodes.
func (s *Server) adminPeer() []admin.ClientOption {
	if s.tls == nil {
		return nil
	}
	return []admin.ClientOption{admin.WithTLS(s.tls.ClientTLS(""))}
}

// adminListener returns the listener the admin API serves: over TLS
// unless insecure. A client certificate is optional there: a bearer
// token may stand in for it (admin.Guard decides).
func (s *Server) adminListener() net.Listener {
	if s.tls == nil {
		return s.adminLis
	}
	return tlsListener(s.adminLis, s.tls)
}

func tlsListener(l net.Listener, src *pki.Source) net.Listener {
	return tls.NewListener(l, src.ServerTLSOptionalClient())
}

// jobOf names the job whose work ctx does, "" outside a job: the QoS tag
// of the jobs' block calls.
func jobOf(ctx context.Context) string {
	if id, ok := job.JobIDOf(ctx); ok {
		return id.String()
	}
	return ""
}

// jobsClientID names the node's jobs as the client of their block I/O
// in the QoS statistics: node-NAME (a mount is mount-SESSION).
func (s *Server) jobsClientID() string { return "node-" + s.cfg.Name }
