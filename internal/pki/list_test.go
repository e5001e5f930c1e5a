package pki

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A certificate issued into another directory takes the bundle with it and
// leaves a copy in the CA's issued/; List finds both kinds, newest first
// per identity; FindIdentity picks the one identity of a kind or asks.
func TestIssueElsewhereAndList(t *testing.T) {
	dir := newPKI(t, "c1", node, root)
	out := filepath.Join(t.TempDir(), "n2-pki")
	n2 := Identity{Kind: KindNode, Name: "n2"}
	if _, err := IssueTo(dir, out, n2, []string{"10.0.0.2", "n2.example"}, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSource(out, n2); err != nil { // bundle + identity: all a machine needs
		t.Fatalf("the out directory is not usable alone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, CAKeyFile)); err == nil {
		t.Fatal("the CA key was copied out")
	}
	got, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, is := range got {
		ids = append(ids, is.Identity.String())
		if !is.Trusted {
			t.Errorf("%s not trusted", is.Identity)
		}
		if is.Identity == n2 && (is.HasKey || !strings.Contains(strings.Join(is.Hosts, ","), "10.0.0.2")) {
			t.Errorf("n2 listed as %+v", is)
		}
	}
	if strings.Join(ids, " ") != "admin:root node:n1 node:n2" {
		t.Fatalf("List = %v", ids)
	}
	if id, err := FindIdentity(dir, KindAdmin, ""); err != nil || id != root {
		t.Fatalf("FindIdentity admin: %v %v", id, err)
	}
	if _, err := IssueTo(dir, dir, Identity{Kind: KindAdmin, Name: "alice"}, nil, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := FindIdentity(dir, KindAdmin, ""); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "alice, root") {
		t.Fatalf("two admins, no name: %v", err)
	}
	if id, err := FindIdentity(dir, KindAdmin, "alice"); err != nil || id.Name != "alice" {
		t.Fatalf("FindIdentity admin alice: %v %v", id, err)
	}
	if _, err := FindIdentity(dir, KindClient, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no client: %v", err)
	}
}

// A trust-only source verifies servers and presents no certificate: a
// server that requires one refuses it, one that takes it optionally lets
// it in with no identity, and still refuses another CA's certificate.
func TestTrustAndOptionalClient(t *testing.T) {
	dir := newPKI(t, "c1", node, root)
	other := newPKI(t, "c2", root)
	trust, err := NewTrust(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := source(t, dir, node)
	if _, serr, _ := handshake(t, srv.ServerTLS(), trust.ClientTLS("127.0.0.1")); serr == nil {
		t.Fatal("a client without a certificate got past ServerTLS")
	}
	if id, serr, cerr := handshake(t, srv.ServerTLSOptionalClient(), trust.ClientTLS("127.0.0.1")); serr != ErrNoPeer || cerr != nil || id != (Identity{}) {
		t.Fatalf("optional client certificate, none sent: id %v, server %v, client %v", id, serr, cerr)
	}
	if id, serr, cerr := handshake(t, srv.ServerTLSOptionalClient(), source(t, dir, root).ClientTLS("127.0.0.1")); serr != nil || cerr != nil || id != root {
		t.Fatalf("optional client certificate, sent: id %v, server %v, client %v", id, serr, cerr)
	}
	foreign := source(t, other, root).ClientTLS("127.0.0.1")
	foreign.VerifyConnection = trust.ClientTLS("127.0.0.1").VerifyConnection
	if _, serr, _ := handshake(t, srv.ServerTLSOptionalClient(), foreign); serr == nil {
		t.Fatal("another CA's certificate got past ServerTLSOptionalClient")
	}
	if _, err := NewTrust(t.TempDir()); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "ca.crt") {
		t.Fatalf("trust without a bundle: %v", err)
	}
}
