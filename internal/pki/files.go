package pki

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/weftfs/weft/internal/durable"
)

// Files of a PKI directory (the cluster directory's "pki", or where the
// flags say). Keys are written 0600 and the directory is 0700.
//
//	ca.crt           the trust bundle: the CA certificates a cluster
//	                 trusts, newest first (more than one while a CA is
//	                 being rotated)
//	ca.key           the current CA's key: only where certificates are
//	                 issued
//	KIND-NAME.crt    an identity's certificate (node-n1.crt, admin-root.crt)
//	KIND-NAME.key    its key
//	issued/KIND-NAME.crt
//	                 in the CA's directory: a copy of each certificate
//	                 issued into another directory (IssueTo with --out), so
//	                 that the CA's directory lists every identity it
//	                 issued (List, weft cert list) and a new cluster's
//	                 first node registers them all (see docs/admin-guide.md,
//	                 "Certificates")
const (
	BundleFile = "ca.crt"
	CAKeyFile  = "ca.key"
	IssuedDir  = "issued"
)

// Paths returns the certificate and key files of id in dir.
func Paths(dir string, id Identity) (cert, key string) {
	base := filepath.Join(dir, string(id.Kind)+"-"+id.Name)
	return base + ".crt", base + ".key"
}

// BundlePath returns the trust bundle's file in dir.
func BundlePath(dir string) string { return filepath.Join(dir, BundleFile) }

// InitCA makes a new CA for cluster and writes it to dir (created 0700):
// the bundle with it alone, and its key. A directory that has a CA already
// is refused (fs.ErrExist): a cluster has one CA at a time, replaced only
// by RotateCA.
func InitCA(dir, cluster string, now time.Time) (*CA, error) {
	if _, err := os.Stat(BundlePath(dir)); err == nil {
		return nil, fmt.Errorf("pki: %s holds a CA already (%w): use it, or rotate it with weft cert rotate-ca", dir, fs.ErrExist)
	}
	ca, err := NewCA(cluster, 0, now)
	if err != nil {
		return nil, err
	}
	if err := writeCA(dir, ca, nil); err != nil {
		return nil, err
	}
	return ca, nil
}

// RotateCA makes a new CA and puts it first in dir's bundle, keeping the
// old CAs after it: certificates of either are trusted while the
// identities are reissued by the new one (weft cert issue); DropOldCAs
// then removes the old ones from the bundle.
func RotateCA(dir, cluster string, now time.Time) (*CA, error) {
	old, err := LoadBundle(dir)
	if err != nil {
		return nil, err
	}
	ca, err := NewCA(cluster, 0, now)
	if err != nil {
		return nil, err
	}
	return ca, writeCA(dir, ca, old)
}

// DropOldCAs keeps only the newest CA (the first) in dir's bundle. Every
// identity must have been reissued by it first: certificates of the old
// CAs stop working everywhere the new bundle is read.
func DropOldCAs(dir string) error {
	certs, err := LoadBundle(dir)
	if err != nil {
		return err
	}
	return writeBundle(dir, certs[:1])
}

func writeCA(dir string, ca *CA, older []*x509.Certificate) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(filepath.Join(dir, CAKeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return writeBundle(dir, append([]*x509.Certificate{ca.Cert}, older...))
}

func writeBundle(dir string, certs []*x509.Certificate) error {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	if err := durable.WriteFile(BundlePath(dir), b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

// LoadBundle reads dir's trust bundle, newest CA first.
func LoadBundle(dir string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(BundlePath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no CA bundle %s: create the cluster's CA with weft cluster init (weft local up makes one by itself), or point --pki at the directory that holds it", ErrNotFound, BundlePath(dir))
	}
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	certs, err := parseCerts(b)
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("%w: %s holds no CA certificate (%v)", ErrInvalid, BundlePath(dir), err)
	}
	return certs, nil
}

// LoadCA reads the current CA (the bundle's first certificate, and
// ca.key), to issue certificates.
func LoadCA(dir string) (*CA, error) {
	certs, err := LoadBundle(dir)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no CA key %s: certificates are issued where the CA key is (the machine that ran weft cluster init)", ErrNotFound, filepath.Join(dir, CAKeyFile))
	}
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	key, err := parseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, filepath.Join(dir, CAKeyFile), err)
	}
	if !publicKeysEqual(certs[0].PublicKey, key.Public()) {
		return nil, fmt.Errorf("%w: %s does not belong to the first CA of %s", ErrInvalid, filepath.Join(dir, CAKeyFile), BundlePath(dir))
	}
	return &CA{Cert: certs[0], Key: key}, nil
}

// WriteIdentity writes id's certificate and key to dir (created 0700).
func WriteIdentity(dir string, id Identity, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	cert, key := Paths(dir, id)
	// The key first: a certificate never sits beside a key it does not
	// match for longer than a crash between the two writes.
	if err := durable.WriteFile(key, keyPEM, 0o600); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := durable.WriteFile(cert, certPEM, 0o644); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

// IssueTo issues a certificate for id with the CA in caDir and writes it
// with its key to dir: what weft cert issue and weft local up do. When dir
// is another directory, it also writes caDir's trust bundle there (so that
// dir is all a machine needs) and keeps a copy of the certificate in
// caDir's issued/ (see IssuedDir). Issuing an identity again replaces its
// certificate and key (renewal).
func IssueTo(caDir, dir string, id Identity, hosts []string, validity time.Duration, now time.Time) (*x509.Certificate, error) {
	ca, err := LoadCA(caDir)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue(id, hosts, validity, now)
	if err != nil {
		return nil, err
	}
	if err := WriteIdentity(dir, id, certPEM, keyPEM); err != nil {
		return nil, err
	}
	if !sameDir(caDir, dir) {
		bundle, err := os.ReadFile(BundlePath(caDir))
		if err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
		if err := durable.WriteFile(BundlePath(dir), bundle, 0o644); err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
		if err := os.MkdirAll(filepath.Join(caDir, IssuedDir), 0o700); err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
		cert, _ := Paths(filepath.Join(caDir, IssuedDir), id)
		if err := durable.WriteFile(cert, certPEM, 0o644); err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
	}
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// sameDir reports whether a and b name one directory.
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out, nil
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

func parseKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", k)
	}
	return s, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	x, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && x.Equal(b)
}
