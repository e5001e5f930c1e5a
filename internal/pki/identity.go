package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
)

// Kind is what a certificate's holder is to the cluster.
type Kind string

// Kinds of identity. A node serves (block service, etcd member, admin API)
// and is a client of the other nodes; a client is a mount or a gateway; an
// admin runs the CLI against the admin API.
const (
	KindNode   Kind = "node"
	KindClient Kind = "client"
	KindAdmin  Kind = "admin"
)

// ParseKind parses "node", "client" or "admin".
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case KindNode, KindClient, KindAdmin:
		return k, nil
	}
	return "", fmt.Errorf("%w: certificate kind %q: use node, client or admin", ErrInvalid, s)
}

// Identity is who a certificate names: its kind and name. It is carried in
// the subject: CommonName "KIND:NAME", OrganizationalUnit KIND, and
// Organization the cluster ("weft CLUSTERID").
type Identity struct {
	Kind Kind
	Name string
}

// String returns "KIND:NAME".
func (id Identity) String() string { return string(id.Kind) + ":" + id.Name }

// ParseIdentity parses "KIND:NAME" (an Identity's String, a certificate's
// CommonName).
func ParseIdentity(s string) (Identity, error) {
	kind, name, ok := strings.Cut(s, ":")
	k, err := ParseKind(kind)
	if !ok || err != nil || !ValidName(name) {
		return Identity{}, fmt.Errorf("%w: identity %q: want KIND:NAME, KIND node, client or admin", ErrInvalid, s)
	}
	return Identity{Kind: k, Name: name}, nil
}

// ValidName reports whether s may name a node, client or admin: 1-63 of
// a-z, A-Z, 0-9, '-', '_', '.', '@'.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.@", c)) {
			return false
		}
	}
	return true
}

// IdentityOf returns the identity a certificate issued by Issue names.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	kind, name, ok := strings.Cut(cert.Subject.CommonName, ":")
	if !ok || len(cert.Subject.OrganizationalUnit) != 1 || cert.Subject.OrganizationalUnit[0] != kind {
		return Identity{}, fmt.Errorf("%w: certificate %q is not a weft identity", ErrIdentity, cert.Subject.CommonName)
	}
	k, err := ParseKind(kind)
	if err != nil || !ValidName(name) {
		return Identity{}, fmt.Errorf("%w: certificate %q is not a weft identity", ErrIdentity, cert.Subject.CommonName)
	}
	return Identity{Kind: k, Name: name}, nil
}

// PeerIdentity returns the identity of the peer of a TLS connection whose
// handshake verified the peer's chain (mutual TLS with
// RequireAndVerifyClientCert, or the server side of a client connection).
func PeerIdentity(st tls.ConnectionState) (Identity, error) {
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return Identity{}, ErrNoPeer
	}
	return IdentityOf(st.VerifiedChains[0][0])
}

// Errors of the package; messages wrap them with the file, name or
// certificate concerned and what to do.
var (
	// ErrInvalid: a bad argument (kind, name, validity).
	ErrInvalid = errors.New("pki: invalid argument")
	// ErrIdentity: a certificate that does not name a weft identity.
	ErrIdentity = errors.New("pki: not a weft identity")
	// ErrNoPeer: a connection without a verified peer certificate.
	ErrNoPeer = errors.New("pki: no verified peer certificate")
	// ErrExpired: a certificate past its NotAfter (or before NotBefore).
	ErrExpired = errors.New("pki: certificate expired")
	// ErrNotFound: no such certificate or key file.
	ErrNotFound = errors.New("pki: not found")
)
