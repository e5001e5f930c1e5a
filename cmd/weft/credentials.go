package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/local"
	"github.com/weftfs/weft/internal/pki"
)

// The CLI's credentials are found as the admin address is: a flag, then
// the environment, then what `weft local up` left in ./weft-data.
const (
	envPKI   = "WEFT_PKI"
	envToken = "WEFT_TOKEN"
)

// pkiDir returns the PKI directory the flags, the environment or
// ./weft-data point at, and where it came from; "" if none.
func (g *globals) pkiDir() (dir, from string) {
	switch {
	case g.pki != "":
		return g.pki, "--pki"
	case os.Getenv(envPKI) != "":
		return os.Getenv(envPKI), "$" + envPKI
	}
	local := filepath.Join("weft-data", local.PKIDir)
	if _, err := os.Stat(pki.BundlePath(local)); err == nil {
		return local, "./weft-data"
	}
	return "", ""
}

// tokenValue returns the bearer token of --token or $WEFT_TOKEN.
func (g *globals) tokenValue() string {
	if g.token != "" {
		return g.token
	}
	return os.Getenv(envToken)
}

// credentials returns the admin client's options: TLS with the admin
// certificate of the PKI directory, or with its CAs only and a token;
// none with --insecure, or when nothing points at credentials (then only
// a cluster run with --insecure answers, and the client says so).
func (g *globals) credentials() ([]admin.ClientOption, error) {
	if g.insecure {
		return nil, nil
	}
	dir, from := g.pkiDir()
	tok := g.tokenValue()
	switch {
	case dir == "" && tok == "":
		return nil, nil
	case dir == "":
		return nil, usageError{fmt.Errorf("a token needs the cluster's CA to check the nodes it talks to: pass --pki DIR (or $%s) with the cluster's ca.crt in DIR", envPKI)}
	}
	if tok != "" {
		src, err := pki.NewTrust(dir)
		if err != nil {
			return nil, fmt.Errorf("%w (the PKI directory came from %s)", err, from)
		}
		return []admin.ClientOption{admin.WithTLS(src.ClientTLS("")), admin.WithToken(tok)}, nil
	}
	id, err := pki.FindIdentity(dir, pki.KindAdmin, g.as)
	if errors.Is(err, pki.ErrInvalid) && g.as == "" {
		// Several administrators: a local cluster's directory still has
		// the one weft local up made, which it uses unless told otherwise.
		if own, ferr := pki.FindIdentity(dir, pki.KindAdmin, local.AdminIdentity.Name); ferr == nil {
			id, err = own, nil
		}
	}
	if errors.Is(err, pki.ErrNotFound) {
		return nil, fmt.Errorf("%s (from %s) holds no admin certificate: issue one where the cluster's CA is (weft cert issue --admin NAME --out %s), or use a token (--token, $%s): %w",
			dir, from, dir, envToken, err)
	}
	if err != nil {
		return nil, err
	}
	src, err := pki.NewSource(dir, id)
	if err != nil {
		return nil, err
	}
	return []admin.ClientOption{admin.WithTLS(src.ClientTLS(""))}, nil
}

// caDir returns the directory of the cluster's CA for the cert commands:
// where the flags, the environment or ./weft-data point, or an error
// saying how to point at it.
func (g *globals) caDir() (string, error) {
	dir, _ := g.pkiDir()
	if dir == "" {
		return "", usageError{fmt.Errorf("which cluster's CA? pass --pki DIR (or set $%s): the directory weft cluster init made", envPKI)}
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no PKI directory %s: make a cluster's CA with weft cluster init --pki %s", dir, dir)
	}
	return dir, nil
}
