package local

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/weftfs/weft/internal/pki"
)

// A local cluster's certificates, in DIR/pki (0700; keys 0600), made by
// Up when the cluster is created and kept current on every start: the
// cluster's CA, a node certificate per node (its listen address, and the
// loopback names, as its names), a client certificate for its mounts
// (MountIdentity) and an admin certificate for the CLI and the supervisor
// (AdminIdentity). A certificate that is missing, of a CA no longer in the
// bundle, expiring within renewBefore, or (a node's) without its address
// is issued again; the nodes and mounts pick the new one up without a
// restart. The CLI run in the directory that holds weft-data finds them
// by itself (weft-data/pki).
const (
	PKIDir      = "pki"
	renewBefore = 30 * 24 * time.Hour
)

// Identities of a local cluster's mount and administrator.
var (
	MountIdentity = pki.Identity{Kind: pki.KindClient, Name: "mount"}
	AdminIdentity = pki.Identity{Kind: pki.KindAdmin, Name: "root"}
)

// ensurePKI makes or renews the certificates of the cluster of layout l in
// dir/pki (see above).
func ensurePKI(dir string, l Layout, now time.Time) error {
	pdir := filepath.Join(dir, PKIDir)
	if _, err := os.Stat(pki.BundlePath(pdir)); os.IsNotExist(err) {
		if _, err := pki.InitCA(pdir, "local "+l.Token, now); err != nil {
			return fmt.Errorf("local: %w", err)
		}
	}
	issued, err := pki.List(pdir)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	have := map[pki.Identity]pki.Issued{}
	for _, is := range issued {
		have[is.Identity] = is
	}
	want := map[pki.Identity][]string{MountIdentity: nil, AdminIdentity: nil}
	for _, n := range l.Members {
		host, _, _ := net.SplitHostPort(n.GRPCAddr)
		hostname, _ := os.Hostname()
		want[pki.Identity{Kind: pki.KindNode, Name: n.Name}] = append([]string{host}, pki.DefaultHosts(hostname)...)
	}
	for id, hosts := range want {
		is, ok := have[id]
		current := ok && is.HasKey && is.Trusted && is.NotAfter.Sub(now) > renewBefore
		for _, h := range hosts {
			current = current && slices.Contains(is.Hosts, canonicalHost(h))
		}
		if current {
			continue
		}
		if _, err := pki.IssueTo(pdir, pdir, id, hosts, 0, now); err != nil {
			return fmt.Errorf("local: certificate of %s: %w", id, err)
		}
	}
	return nil
}

// canonicalHost writes an address as a certificate lists it.
func canonicalHost(h string) string {
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// adminTLS returns the TLS configuration of the supervisor's admin API
// client: the cluster's admin identity.
func adminTLS(dir string) (*tls.Config, error) {
	src, err := pki.NewSource(filepath.Join(dir, PKIDir), AdminIdentity)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return src.ClientTLS(""), nil
}
