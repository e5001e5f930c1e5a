package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"
)

// reloadCheck is how often a Source looks at its files' modification
// times: a replaced certificate (rotation) is in use within this time.
const reloadCheck = 2 * time.Second

// Source holds one identity's certificate and the trust bundle, read from
// a PKI directory and read again when the files change, so that a
// certificate or a CA is rotated without restarting the process. It makes
// the TLS configurations of servers and clients with that identity.
//
// Locking: a Source is safe for concurrent use.
type Source struct {
	dir string
	id  Identity // zero for a trust-only Source (NewTrust)
	now func() time.Time

	mu      sync.Mutex
	checked time.Time // last look at the files' times
	stamp   []time.Time
	cert    *tls.Certificate // nil for a trust-only Source
	leaf    *x509.Certificate
	pool    *x509.CertPool
}

// NewSource reads id's certificate and key and the trust bundle from dir.
// It refuses a certificate that is expired or not yet valid (ErrExpired,
// with the date and how to renew), one not signed by a CA of the bundle,
// one that does not name id, and a key that does not match.
func NewSource(dir string, id Identity) (*Source, error) {
	s := &Source{dir: dir, id: id, now: time.Now}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// NewTrust reads only the trust bundle of dir: a Source that presents no
// certificate, for a client that authenticates otherwise (an
// administrator's bearer token) but must still verify the servers it
// talks to. Its ServerTLS is not to be used.
func NewTrust(dir string) (*Source, error) {
	s := &Source{dir: dir, now: time.Now}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// Identity returns the identity the Source presents (zero for NewTrust's).
func (s *Source) Identity() Identity { return s.id }

// Files returns the certificate, key and trust bundle files the Source
// reads, for a consumer that takes file names (embedded etcd, which reads
// its certificate again at each handshake). cert and key are "" for a
// trust-only Source.
func (s *Source) Files() (cert, key, bundle string) {
	if s.id == (Identity{}) {
		return "", "", BundlePath(s.dir)
	}
	cert, key = Paths(s.dir, s.id)
	return cert, key, BundlePath(s.dir)
}

// Dir returns the PKI directory.
func (s *Source) Dir() string { return s.dir }

// NotAfter returns when the current certificate expires (zero for a
// trust-only Source).
func (s *Source) NotAfter() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leaf == nil {
		return time.Time{}
	}
	return s.leaf.NotAfter
}

func (s *Source) files() []string {
	cert, key, bundle := s.Files()
	if cert == "" {
		return []string{bundle}
	}
	return []string{cert, key, bundle}
}

// load reads the files and checks them; it keeps the previous state on
// error.
func (s *Source) load() error {
	paths := s.files()
	stamp := make([]time.Time, len(paths))
	for i, p := range paths {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) && s.id != (Identity{}) {
			return fmt.Errorf("%w: %s: issue it with weft cert issue --%s %s (weft local up does it by itself)", ErrNotFound, p, s.id.Kind, s.id.Name)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: no CA bundle %s: copy the cluster's ca.crt there (from the machine that ran weft cluster init)", ErrNotFound, p)
		}
		if err != nil {
			return fmt.Errorf("pki: %w", err)
		}
		stamp[i] = st.ModTime()
	}
	cas, err := LoadBundle(s.dir)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	if s.id == (Identity{}) {
		s.mu.Lock()
		s.pool, s.stamp, s.checked = pool, stamp, s.now()
		s.mu.Unlock()
		return nil
	}
	pair, err := tls.LoadX509KeyPair(paths[0], paths[1])
	if err != nil {
		return fmt.Errorf("%w: %s with %s: %v", ErrInvalid, paths[0], paths[1], err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return err
		}
	}
	if err := CheckValid(leaf, paths[0], s.now()); err != nil {
		return err
	}
	if got, err := IdentityOf(leaf); err != nil || got != s.id {
		return fmt.Errorf("%w: %s names %q, not %s", ErrIdentity, paths[0], leaf.Subject.CommonName, s.id)
	}
	usage := x509.ExtKeyUsageClientAuth
	if s.id.Kind == KindNode {
		usage = x509.ExtKeyUsageServerAuth
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: s.now(), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return fmt.Errorf("%w: %s is not signed by a CA of %s: %v (issue it again with this cluster's CA)", ErrInvalid, paths[0], BundlePath(s.dir), err)
	}
	s.mu.Lock()
	s.cert, s.leaf, s.pool, s.stamp, s.checked = &pair, leaf, pool, stamp, s.now()
	s.mu.Unlock()
	return nil
}

// CheckValid refuses a certificate outside its validity at now, with a
// message saying when it expired and how to renew it.
func CheckValid(c *x509.Certificate, what string, now time.Time) error {
	if now.After(c.NotAfter) {
		return fmt.Errorf("%w: %s (%s) expired on %s: renew it with weft cert issue (see docs/admin-guide.md, \"Certificates\")",
			ErrExpired, what, c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(c.NotBefore) {
		return fmt.Errorf("%w: %s (%s) is not valid before %s: check this machine's clock", ErrExpired, what, c.Subject.CommonName,
			c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// current returns the certificate and pool, reloading them if the files
// changed since the last look (at most every reloadCheck). A reload that
// fails keeps the previous ones (a half-written rotation must not take the
// service down); the next look tries again.
func (s *Source) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	if s.now().Sub(s.checked) < reloadCheck {
		defer s.mu.Unlock()
		return s.cert, s.pool
	}
	s.checked = s.now()
	stamp := s.stamp
	s.mu.Unlock()
	changed := false
	for i, p := range s.files() {
		if st, err := os.Stat(p); err == nil && i < len(stamp) && !st.ModTime().Equal(stamp[i]) {
			changed = true
		}
	}
	if changed {
		_ = s.load()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert, s.pool
}

// ServerTLS returns the configuration of a server that presents the
// Source's certificate and requires a client certificate signed by a CA of
// the bundle (mutual TLS). TLS 1.3 only. Which identities may do what is
// the service's decision (PeerIdentity).
func (s *Source) ServerTLS() *tls.Config { return s.serverTLS(tls.RequireAndVerifyClientCert) }

// ServerTLSOptionalClient is ServerTLS for a server that also admits
// clients without a certificate, which then authenticate otherwise (the
// admin API: a bearer token). A certificate a client does present is
// verified against the bundle as with ServerTLS: a bad one fails the
// handshake.
func (s *Source) ServerTLSOptionalClient() *tls.Config {
	return s.serverTLS(tls.VerifyClientCertIfGiven)
}

func (s *Source) serverTLS(auth tls.ClientAuthType) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS13}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := s.current()
		if cert == nil {
			return nil, fmt.Errorf("%w: a trust-only source has no certificate to serve", ErrInvalid)
		}
		return &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{*cert},
			ClientCAs:    pool,
			ClientAuth:   auth,
			NextProtos:   base.NextProtos,
		}, nil
	}
	return base
}

// ClientTLS returns the configuration of a client that presents the
// Source's certificate and verifies the server's against the bundle as it
// is at each handshake (so that a CA rotated meanwhile is trusted without
// a restart) and its name against serverName, or the dialled host when
// serverName is empty. The verification is x509's own
// (x509.Certificate.Verify), run from VerifyConnection because a static
// RootCAs could not follow the bundle. TLS 1.3 only.
func (s *Source) ClientTLS(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert, _ := s.current(); cert != nil {
				return cert, nil
			}
			return &tls.Certificate{}, nil // trust-only: no certificate
		},
		// Verified in VerifyConnection, against the current bundle.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, pool := s.current()
			return verifyServer(cs, pool, s.now())
		},
	}
}

// verifyServer verifies a server's chain as crypto/tls would with RootCAs
// set to pool: signed by a CA of the pool, for server authentication, and
// naming the host the client asked for.
func verifyServer(cs tls.ConnectionState, pool *x509.CertPool, now time.Time) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: the server sent no certificate", ErrNoPeer)
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter, CurrentTime: now, DNSName: cs.ServerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		var inv x509.CertificateInvalidError
		if errors.As(err, &inv) && inv.Reason == x509.Expired {
			return fmt.Errorf("%w: the server's certificate (%s) expired on %s: renew it on that node (weft cert issue --node)", ErrExpired,
				leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		return fmt.Errorf("pki: the server's certificate (%s) is not trusted: %w", leaf.Subject.CommonName, err)
	}
	return nil
}

// Explain rewords a TLS handshake failure a client saw into what an
// administrator can act on; other errors are returned as they are.
func Explain(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "tls: expired certificate"):
		return fmt.Errorf("%w: the server refused this machine's certificate as expired; renew it with weft cert issue (see docs/admin-guide.md, \"Certificates\"): %v", ErrExpired, err)
	case strings.Contains(msg, "tls: unknown certificate authority"), strings.Contains(msg, "tls: bad certificate"):
		return fmt.Errorf("pki: the server refused this machine's certificate (issued by another cluster's CA, or not at all?): %w", err)
	case strings.Contains(msg, "tls: certificate required"):
		return fmt.Errorf("pki: the server requires a client certificate and none was sent: %w", err)
	}
	return err
}
