package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Issued is one identity's certificate found in a PKI directory.
type Issued struct {
	Identity  Identity  `json:"identity"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	// Issuer is the CommonName of the CA that signed it.
	Issuer string `json:"issuer"`
	// Trusted says a CA of the directory's bundle signed it; CA is that
	// CA's place in the bundle (0: the newest; -1: none).
	Trusted bool `json:"trusted"`
	CA      int  `json:"ca"`
	// Hosts are a node's names and addresses (its certificate's SANs).
	Hosts []string `json:"hosts,omitempty"`
	// Cert is the certificate's file; HasKey says its key is beside it.
	Cert   string `json:"cert"`
	HasKey bool   `json:"has_key"`
}

// List returns the identities whose certificates are in dir or in its
// issued/ copies (IssueTo), the newest certificate of each, ordered by
// kind and name. A file that is not a weft identity's certificate is
// skipped.
func List(dir string) ([]Issued, error) {
	pool, _ := LoadBundle(dir) // an absent bundle lists as untrusted
	newest := map[Identity]Issued{}
	for _, d := range []string{dir, filepath.Join(dir, IssuedDir)} {
		ents, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) && d != dir {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
		for _, e := range ents {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".crt") || name == BundleFile {
				continue
			}
			path := filepath.Join(d, name)
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("pki: %w", err)
			}
			certs, err := parseCerts(b)
			if err != nil || len(certs) == 0 {
				continue
			}
			c := certs[0]
			id, err := IdentityOf(c)
			if err != nil {
				continue
			}
			is := Issued{Identity: id, NotBefore: c.NotBefore, NotAfter: c.NotAfter, Issuer: c.Issuer.CommonName, Cert: path, CA: -1}
			for i, ca := range pool {
				if c.CheckSignatureFrom(ca) == nil {
					is.Trusted, is.CA = true, i
					break
				}
			}
			is.Hosts = append(is.Hosts, c.DNSNames...)
			for _, ip := range c.IPAddresses {
				is.Hosts = append(is.Hosts, ip.String())
			}
			_, key := Paths(d, id)
			if _, err := os.Stat(key); err == nil {
				is.HasKey = true
			}
			if old, ok := newest[id]; !ok || is.NotAfter.After(old.NotAfter) || (is.NotAfter.Equal(old.NotAfter) && is.HasKey) {
				newest[id] = is
			}
		}
	}
	out := make([]Issued, 0, len(newest))
	for _, is := range newest {
		out = append(out, is)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Identity.Kind != out[j].Identity.Kind {
			return out[i].Identity.Kind < out[j].Identity.Kind
		}
		return out[i].Identity.Name < out[j].Identity.Name
	})
	return out, nil
}

// FindIdentity returns the identity of kind to use from dir: KIND:name if
// name is given (its certificate must be there), else the only identity of
// that kind whose certificate and key are in dir. No such identity, or
// several without a name to choose, is an error that lists what dir holds
// and what to do.
func FindIdentity(dir string, kind Kind, name string) (Identity, error) {
	if name != "" {
		id := Identity{Kind: kind, Name: name}
		cert, key := Paths(dir, id)
		for _, p := range []string{cert, key} {
			if _, err := os.Stat(p); err != nil {
				return Identity{}, fmt.Errorf("%w: %s: no %s identity %q in %s (%v)", ErrNotFound, p, kind, name, dir, err)
			}
		}
		return id, nil
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrPermission) {
		return Identity{}, fmt.Errorf("%w: %v: the certificates are their owner's alone: run as that user (or root), or point --pki at a copy of yours", ErrInvalid, err)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v: create the cluster's certificates first (weft local up makes them, or weft cluster init and weft cert issue)", ErrNotFound, err)
	}
	var found []Identity
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), ".crt")
		n, isKind := strings.CutPrefix(base, string(kind)+"-")
		if !ok || !isKind || !ValidName(n) {
			continue
		}
		id := Identity{Kind: kind, Name: n}
		if _, key := Paths(dir, id); fileExists(key) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Identity{}, fmt.Errorf("%w: no %s certificate with its key in %s: issue one with weft cert issue --%s NAME --out %s", ErrNotFound, kind, dir, kind, dir)
	}
	var names []string
	for _, id := range found {
		names = append(names, id.Name)
	}
	return Identity{}, fmt.Errorf("%w: %s holds %d %s identities (%s): choose one with --as NAME", ErrInvalid, dir, len(found), kind, strings.Join(names, ", "))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
