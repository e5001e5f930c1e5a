package pki

import (
	"crypto/tls"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	node  = Identity{Kind: KindNode, Name: "n1"}
	mount = Identity{Kind: KindClient, Name: "mnt"}
	root  = Identity{Kind: KindAdmin, Name: "root"}
)

// newPKI makes a CA in a new directory and issues ids there.
func newPKI(t *testing.T, cluster string, ids ...Identity) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	if _, err := InitCA(dir, cluster, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := IssueTo(dir, dir, id, DefaultHosts("h1"), 0, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func source(t *testing.T, dir string, id Identity) *Source {
	t.Helper()
	s, err := NewSource(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handshake runs a TLS server with srv and a client with cli over
// loopback and returns the identity the server saw and each side's error.
func handshake(t *testing.T, srv, cli *tls.Config) (Identity, error, error) {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type result struct {
		id  Identity
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			got <- result{err: err}
			return
		}
		id, err := PeerIdentity(tc.ConnectionState())
		_, _ = tc.Write([]byte("x")) // lets the client see a late rejection
		got <- result{id, err}
	}()
	c, cerr := tls.Dial("tcp", l.Addr().String(), cli)
	if cerr == nil {
		buf := make([]byte, 1)
		_, cerr = c.Read(buf)
		c.Close()
	}
	r := <-got
	return r.id, r.err, cerr
}

func TestMutualTLS(t *testing.T) {
	dir := newPKI(t, "c1", node, mount, root)
	srv := source(t, dir, node)
	for _, id := range []Identity{mount, root, node} {
		saw, serr, cerr := handshake(t, srv.ServerTLS(), source(t, dir, id).ClientTLS("127.0.0.1"))
		if serr != nil || cerr != nil || saw != id {
			t.Fatalf("%s: server saw %v (%v), client %v", id, saw, serr, cerr)
		}
	}
	// Keys are the owner's alone; the directory too.
	_, key := Paths(dir, mount)
	for path, want := range map[string]fs.FileMode{key: 0o600, filepath.Join(dir, CAKeyFile): 0o600, dir: 0o700} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, st.Mode().Perm(), err, want)
		}
	}
}

func TestRefusals(t *testing.T) {
	dir := newPKI(t, "c1", node, mount)
	other := newPKI(t, "c2", node, mount)
	srv := source(t, dir, node)

	// A client of another cluster's CA is refused by the server, and a
	// server of another CA by the client.
	foreign := source(t, other, mount)
	trusting := foreign.ClientTLS("127.0.0.1")
	trusting.VerifyConnection = func(cs tls.ConnectionState) error { // trusts this cluster's server
		_, pool := srv.current()
		return verifyServer(cs, pool, time.Now())
	}
	if _, serr, cerr := handshake(t, srv.ServerTLS(), trusting); serr == nil || cerr == nil {
		t.Fatalf("a foreign client got in: server %v, client %v", serr, cerr)
	} else if !strings.Contains(Explain(cerr).Error(), "another cluster's CA") {
		t.Errorf("client error %q does not explain", Explain(cerr))
	}
	if _, _, cerr := handshake(t, source(t, other, node).ServerTLS(), source(t, dir, mount).ClientTLS("127.0.0.1")); cerr == nil || !strings.Contains(cerr.Error(), "not trusted") {
		t.Fatalf("a foreign server was trusted: %v", cerr)
	}
	// No client certificate at all.
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}
	if _, serr, _ := handshake(t, srv.ServerTLS(), noCert); serr == nil {
		t.Fatal("a client without a certificate got in")
	}
	// The server's name must match.
	if _, _, cerr := handshake(t, srv.ServerTLS(), source(t, dir, mount).ClientTLS("elsewhere.example")); cerr == nil {
		t.Fatal("the server's certificate was accepted for another name")
	}
}

func TestExpired(t *testing.T) {
	dir := newPKI(t, "c1", node)
	ca, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	// An admin certificate that expired yesterday.
	certPEM, keyPEM, err := ca.Issue(root, nil, 24*time.Hour, time.Now().Add(-48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteIdentity(dir, root, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	_, err = NewSource(dir, root)
	if !errors.Is(err, ErrExpired) || !strings.Contains(err.Error(), "expired on") || !strings.Contains(err.Error(), "weft cert issue") {
		t.Fatalf("loading an expired certificate: %v", err)
	}
	// Presented anyway, the server refuses it as expired, and the client
	// is told so.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cli := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}
	_, serr, cerr := handshake(t, source(t, dir, node).ServerTLS(), cli)
	if serr == nil || cerr == nil {
		t.Fatalf("an expired client certificate got in: server %v, client %v", serr, cerr)
	}
	if e := Explain(cerr); !errors.Is(e, ErrExpired) {
		t.Fatalf("client error %v is not explained as an expired certificate", e)
	}
}

// A CA is rotated while a client and a server run: the new CA is added to
// the bundle, the server's certificate is reissued by it, and both pick
// the files up without a restart; then the old CA is dropped.
func TestRotation(t *testing.T) {
	dir := newPKI(t, "c1", node, mount)
	srv, cli := source(t, dir, node), source(t, dir, mount)
	clock := time.Now()
	srv.now = func() time.Time { return clock }
	cli.now = srv.now
	if _, err := RotateCA(dir, "c1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if certs, _ := LoadBundle(dir); len(certs) != 2 {
		t.Fatalf("bundle holds %d CAs during rotation, want 2", len(certs))
	}
	if _, err := IssueTo(dir, dir, node, DefaultHosts("h1"), 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(reloadCheck) // both look at their files again
	if _, serr, cerr := handshake(t, srv.ServerTLS(), cli.ClientTLS("127.0.0.1")); serr != nil || cerr != nil {
		t.Fatalf("during rotation: server %v, client %v", serr, cerr)
	}
	if srv.leaf.Issuer.SerialNumber == "" && srv.leaf.Issuer.CommonName == "" {
		t.Fatal("no issuer")
	}
	// The client's certificate is still the old CA's: dropping the old CA
	// now locks it out until it is reissued.
	if err := DropOldCAs(dir); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(reloadCheck)
	if _, serr, _ := handshake(t, srv.ServerTLS(), cli.ClientTLS("127.0.0.1")); serr == nil {
		t.Fatal("a certificate of the dropped CA still got in")
	}
	if _, err := IssueTo(dir, dir, mount, nil, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(reloadCheck)
	if _, serr, cerr := handshake(t, srv.ServerTLS(), cli.ClientTLS("127.0.0.1")); serr != nil || cerr != nil {
		t.Fatalf("after rotation: server %v, client %v", serr, cerr)
	}
}

func TestIdentityAndArguments(t *testing.T) {
	dir := newPKI(t, "c1")
	if _, err := InitCA(dir, "c1", time.Now()); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second CA in one directory: %v", err)
	}
	for _, bad := range []Identity{{Kind: "user", Name: "x"}, {Kind: KindNode, Name: ""}, {Kind: KindNode, Name: "a/b"}, {Kind: KindNode, Name: strings.Repeat("x", 64)}} {
		if _, err := IssueTo(dir, dir, bad, nil, 0, time.Now()); !errors.Is(err, ErrInvalid) {
			t.Errorf("issue %+v: %v", bad, err)
		}
	}
	if _, err := NewSource(dir, mount); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "weft cert issue --client mnt") {
		t.Fatalf("missing certificate: %v", err)
	}
	if _, err := LoadCA(t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no CA: %v", err)
	}
	// A certificate copied under another identity's name is refused.
	if _, err := IssueTo(dir, dir, mount, nil, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	mc, mk := Paths(dir, mount)
	rc, rk := Paths(dir, root)
	for from, to := range map[string]string{mc: rc, mk: rk} {
		b, _ := os.ReadFile(from)
		_ = os.WriteFile(to, b, 0o600)
	}
	if _, err := NewSource(dir, root); !errors.Is(err, ErrIdentity) {
		t.Fatalf("a client certificate loaded as an admin: %v", err)
	}
}
