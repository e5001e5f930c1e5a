package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Validity defaults: a CA lives long, the identities it issues less long,
// so that a leaked key stops working on its own and rotation is practised.
const (
	DefaultCAValidity       = 10 * 365 * 24 * time.Hour
	DefaultIdentityValidity = 2 * 365 * 24 * time.Hour
)

// clockSkew backdates NotBefore, so that a certificate is valid at once on
// machines whose clocks are a little behind the issuer's.
const clockSkew = 5 * time.Minute

// CA is a cluster's certificate authority: its certificate and key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a new CA for cluster (a cluster id or name, written in the
// subject so that an administrator sees whose CA a file holds). Its key is
// ECDSA P-256.
func NewCA(cluster string, validity time.Duration, now time.Time) (*CA, error) {
	if validity <= 0 {
		validity = DefaultCAValidity
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "weft CA " + cluster, Organization: []string{"weft " + cluster}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issue makes a certificate and key for id, signed by the CA, valid for
// validity (DefaultIdentityValidity when 0) from now. A node's certificate
// serves TLS (server auth, with hosts as its DNS names and IP addresses)
// and authenticates the node as a client; a client's and an admin's only
// authenticate. It returns both in PEM.
func (ca *CA) Issue(id Identity, hosts []string, validity time.Duration, now time.Time) (certPEM, keyPEM []byte, err error) {
	if _, err := ParseKind(string(id.Kind)); err != nil {
		return nil, nil, err
	}
	if !ValidName(id.Name) {
		return nil, nil, fmt.Errorf("%w: name %q: use 1-63 of a-z, A-Z, 0-9, '-', '_', '.', '@'", ErrInvalid, id.Name)
	}
	if validity <= 0 {
		validity = DefaultIdentityValidity
	}
	if end := now.Add(validity); end.After(ca.Cert.NotAfter) {
		validity = ca.Cert.NotAfter.Sub(now) // never outlive the CA
		if validity <= 0 {
			return nil, nil, fmt.Errorf("%w: the CA (%s) expired on %s: rotate it (weft cert rotate-ca)", ErrExpired,
				ca.Cert.Subject.CommonName, ca.Cert.NotAfter.Format(time.DateOnly))
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: key for %s: %w", id, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         id.String(),
			OrganizationalUnit: []string{string(id.Kind)},
			Organization:       ca.Cert.Subject.Organization,
		},
		NotBefore:   now.Add(-clockSkew),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if id.Kind == KindNode {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		seen := map[string]bool{}
		for _, h := range hosts {
			ip := net.ParseIP(h)
			if ip != nil {
				h = ip.String()
			}
			if h == "" || seen[h] {
				continue
			}
			seen[h] = true
			if ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: certificate for %s: %w", id, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// DefaultHosts are the names and addresses a node certificate carries
// besides those asked for: loopback and the machine's host name, so that
// clients on the same machine can reach it by any of them.
func DefaultHosts(hostname string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if hostname != "" && hostname != "localhost" {
		hosts = append(hosts, hostname)
	}
	return hosts
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial number: %w", err)
	}
	return s, nil
}
