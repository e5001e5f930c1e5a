package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/pki"
	"github.com/weftfs/weft/internal/pki/pkitest"
)

var (
	nodeID  = pki.Identity{Kind: pki.KindNode, Name: "n1"}
	adminID = pki.Identity{Kind: pki.KindAdmin, Name: "root"}
	mountID = pki.Identity{Kind: pki.KindClient, Name: "mnt"}
)

// newPKI makes a CA for cluster in a new directory and issues ids there.
func newPKI(t *testing.T, cluster string, ids ...pki.Identity) string {
	return pkitest.New(t, cluster, ids...)
}

func tlsOf(t *testing.T, dir string, id pki.Identity) *tls.Config {
	t.Helper()
	src, err := pki.NewSource(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	return src.ClientTLS("")
}

// guarded serves the API behind its Guard over HTTPS as node n1 of the CA
// in dir, and returns its address.
func guarded(t *testing.T, dir string) (string, *cluster.Store) {
	t.Helper()
	store, err := cluster.Open(context.Background(), etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // pools of mirror:2 can be made
		id, _ := store.AllocDriveID(context.Background())
		if _, err := store.RegisterDrive(context.Background(), cluster.DriveRecord{ID: id, Node: "n1", Path: fmt.Sprintf("/d%d", i), Class: "ssd", Pool: "default"}); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	src, err := pki.NewSource(dir, nodeID)
	if err != nil {
		t.Fatal(err)
	}
	h := Guard{Tokens: store, Log: log}.Wrap(NewHandler(Deps{Store: store, Node: NodeInfo{Name: "n1"}, Log: log}))
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = src.ServerTLSOptionalClient()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "https://"), store
}

// status makes a request and returns the answer's status, body and
// headers (or the transport error).
func status(t *testing.T, c *Client, method, path, ctype, body string, hdr ...string) (int, string, http.Header, error) {
	t.Helper()
	req, err := http.NewRequest(method, c.Base()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c.Authorize(req)
	resp, err := c.HTTP().Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header, nil
}

// The guard's rules: reads and writes authenticated (certificate or
// token), a client identity only learns where etcd is, changes only as
// JSON, nothing from another origin, and never a CORS header.
func TestGuard(t *testing.T) {
	dir := newPKI(t, "c1", nodeID, adminID, mountID)
	addr, _ := guarded(t, dir)
	trust, err := pki.NewTrust(dir)
	if err != nil {
		t.Fatal(err)
	}
	anon := NewClient(addr, WithTLS(trust.ClientTLS("")))
	admin := NewClient(addr, WithTLS(tlsOf(t, dir, adminID)))
	node := NewClient(addr, WithTLS(tlsOf(t, dir, nodeID)))
	mount := NewClient(addr, WithTLS(tlsOf(t, dir, mountID)))
	ctx := context.Background()

	tok, err := admin.CreateToken(ctx, "ci", "")
	if err != nil {
		t.Fatal(err)
	}
	if tok.View.CreatedBy != "admin:root" || !strings.HasPrefix(tok.Token, "weft_") {
		t.Fatalf("token %+v", tok)
	}
	bearer := NewClient(addr, WithTLS(trust.ClientTLS("")), WithToken(tok.Token))
	json := "application/json"
	for _, tc := range []struct {
		name               string
		c                  *Client
		method, path, body string
		ctype              string
		hdr                []string
		code               int
		want               string
	}{
		{"health is open", anon, "GET", "/healthz", "", "", nil, 200, "ok"},
		{"a read needs authentication", anon, "GET", "/v1/status", "", "", nil, 401, "authentication required"},
		{"a change needs authentication", anon, "POST", "/v1/drives/d1/suspend", "", json, nil, 401, "weft token create"},
		{"metrics need it too", anon, "GET", "/metrics", "", "", nil, 401, ""},
		{"admin reads", admin, "GET", "/v1/drives", "", "", nil, 200, "d1"},
		{"admin creates", admin, "POST", "/v1/pools", `{"name":"p1","protection":"mirror:2"}`, json, nil, 201, "p1"},
		{"node creates", node, "POST", "/v1/pools", `{"name":"p2","protection":"mirror:2"}`, json, nil, 201, "p2"},
		{"token creates", bearer, "POST", "/v1/pools", `{"name":"p3","protection":"mirror:2"}`, json, nil, 201, "p3"},
		{"client learns the endpoints", mount, "GET", "/v1/node", "", "", nil, 200, "n1"},
		{"client reads nothing else", mount, "GET", "/v1/drives", "", "", nil, 403, "client:mnt may not GET /v1/drives"},
		{"client changes nothing", mount, "POST", "/v1/pools", `{"name":"p4","protection":"mirror:2"}`, json, nil, 403, "client:mnt"},
		{"text/plain change", admin, "POST", "/v1/pools", `{"name":"p5","protection":"mirror:2"}`, "text/plain", nil, 415, "Content-Type: application/json"},
		{"form change", admin, "POST", "/v1/jobs", `type=repair`, "application/x-www-form-urlencoded", nil, 415, ""},
		{"bodyless change without a type", admin, "POST", "/v1/drives/d1/suspend", "", "", nil, 415, ""},
		{"json with a charset", admin, "POST", "/v1/pools", `{"name":"p6","protection":"mirror:2"}`, "application/json; charset=utf-8", nil, 201, "p6"},
		{"another origin", admin, "POST", "/v1/pools", `{"name":"p7","protection":"mirror:2"}`, json, []string{"Origin", "https://evil.example"}, 403, "another origin"},
		{"another origin reading", admin, "GET", "/v1/pools", "", "", []string{"Origin", "https://evil.example"}, 403, ""},
		{"the API's own origin", admin, "GET", "/v1/pools", "", "", []string{"Origin", "https://" + addr}, 200, ""},
		{"http origin for https", admin, "GET", "/v1/pools", "", "", []string{"Origin", "http://" + addr}, 403, ""},
		{"cross-site fetch", admin, "GET", "/v1/pools", "", "", []string{"Sec-Fetch-Site", "cross-site"}, 403, "cross-site"},
		{"a bad token", NewClient(addr, WithTLS(trust.ClientTLS("")), WithToken(tok.Token+"x")), "GET", "/v1/status", "", "", nil, 401, "unknown or revoked"},
		{"not a bearer token", anon, "GET", "/v1/status", "", "", []string{"Authorization", "Basic YTpi"}, 401, "Bearer"},
		// A callback runs a command on a node: only an admin (or a
		// token, or a node) may add or delete one. (This handler has no
		// job engine: past the guard, 503.)
		{"anonymous adds a callback", anon, "POST", "/v1/callbacks", `{"name":"x","events":["all"],"command":"/bin/true"}`, json, nil, 401, "authentication required"},
		{"client adds a callback", mount, "POST", "/v1/callbacks", `{"name":"x","events":["all"],"command":"/bin/true"}`, json, nil, 403, "client:mnt may not POST /v1/callbacks"},
		{"client deletes a callback", mount, "DELETE", "/v1/callbacks/x", "", json, nil, 403, "client:mnt may not DELETE"},
		{"client lists callbacks", mount, "GET", "/v1/callbacks", "", "", nil, 403, "client:mnt"},
		{"admin adds a callback", admin, "POST", "/v1/callbacks", `{"name":"x","events":["all"],"command":"/bin/true"}`, json, nil, 503, "runs no job engine"},
		{"token deletes a callback", bearer, "DELETE", "/v1/callbacks/x", "", json, nil, 503, "runs no job engine"},
	} {
		code, body, hdr, err := status(t, tc.c, tc.method, tc.path, tc.ctype, tc.body, tc.hdr...)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %s %s: %d %s; want %d with %q", tc.name, tc.method, tc.path, code, strings.TrimSpace(body), tc.code, tc.want)
		}
		if code == 401 && hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
		}
		for k := range hdr {
			if strings.HasPrefix(strings.ToLower(k), "access-control-") {
				t.Errorf("%s: CORS header %s sent", tc.name, k)
			}
		}
	}

	// Tokens: listed without their secret, revoked at once.
	list, err := bearer.Tokens(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "ci" {
		t.Fatalf("tokens = %+v, %v", list, err)
	}
	if _, err := admin.RevokeToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	var ae *Error
	if _, err := bearer.Status(ctx); !errors.As(err, &ae) || ae.Status != 401 {
		t.Fatalf("a revoked token: %v", err)
	}
}

// A certificate of another cluster's CA, or an expired one, does not get
// past the handshake; the client is told which it was.
func TestGuardRefusesForeignAndExpired(t *testing.T) {
	dir := newPKI(t, "c1", nodeID, adminID)
	addr, _ := guarded(t, dir)
	trust, err := pki.NewTrust(dir)
	if err != nil {
		t.Fatal(err)
	}
	foreign := tlsOf(t, newPKI(t, "c2", adminID), adminID)
	foreign.VerifyConnection = trust.ClientTLS("").VerifyConnection // trusts c1's node: only the node can refuse
	if _, err := NewClient(addr, WithTLS(foreign)).Status(context.Background()); err == nil || !strings.Contains(err.Error(), "another cluster's CA") {
		t.Fatalf("another CA's admin: %v", err)
	}
	ca, err := pki.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := pki.Identity{Kind: pki.KindAdmin, Name: "old"}
	certPEM, keyPEM, err := ca.Issue(old, nil, time.Hour, time.Now().Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	expired := trust.ClientTLS("")
	expired.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	_, err = NewClient(addr, WithTLS(expired)).Status(context.Background())
	if !errors.Is(err, pki.ErrExpired) && (err == nil || !strings.Contains(err.Error(), "expired") || !strings.Contains(err.Error(), "weft cert issue")) {
		t.Fatalf("an expired admin certificate: %v", err)
	}
}

// On a node run with --insecure the guard authenticates nobody but still
// refuses changes that are not JSON and requests from other origins; the
// API refuses to make tokens there.
func TestGuardInsecure(t *testing.T) {
	store, err := cluster.Open(context.Background(), etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer(Guard{Insecure: true, Log: log}.Wrap(NewHandler(Deps{Store: store, Node: NodeInfo{Name: "n1"}, Log: log, Insecure: true})))
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL)
	if code, _, _, _ := status(t, c, "GET", "/v1/status", "", ""); code != 200 {
		t.Fatalf("insecure read: %d", code)
	}
	if code, _, _, _ := status(t, c, "POST", "/v1/pools", "text/plain", `{"name":"p","protection":"mirror:2"}`); code != 415 {
		t.Fatalf("insecure text/plain change: %d", code)
	}
	if code, _, _, _ := status(t, c, "GET", "/v1/status", "", "", "Origin", "http://evil.example"); code != 403 {
		t.Fatalf("insecure cross-origin read: %d", code)
	}
	var ae *Error
	if _, err := c.CreateToken(context.Background(), "t", ""); !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("token on an insecure node: %v", err)
	}
}
