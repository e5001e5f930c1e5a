package tests

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/local"
	"github.com/weftfs/weft/internal/pki"
	"github.com/weftfs/weft/tests/harness"
)

// An unprivileged user on a node's machine gets nothing: not the admin
// API (401, reads included), not etcd (its JSON gateway and its gRPC API
// refuse a client without the cluster's certificate), not the block
// service (the TLS handshake fails), not the drive directories, the
// cluster's keys or the supervisor's control socket. A certificate of
// another cluster's CA is refused by every service, and an expired one
// with a message that says so and how to renew it.
func TestNobodyGetsIn(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a probe as nobody")
	}
	// The cluster's directory is one nobody may walk to, so that what
	// refuses nobody is each thing's own mode, not a parent's.
	open := worldDir(t)
	c := harness.Start(t, harness.Options{Nodes: 2, DrivesPerNode: 1, Dir: filepath.Join(open, "weft-data")})
	ctx := context.Background()

	targets := securityTargets(t, c)
	results := probeAsNobody(t, targets)
	for _, r := range results {
		t.Logf("nobody: %-28s %s → %s", r.What, r.Target, r.Outcome)
		if r.Allowed {
			t.Errorf("nobody got in: %s %s: %s", r.What, r.Target, r.Outcome)
		}
		if strings.HasPrefix(r.What, "admin API ") && !strings.Contains(r.What, "http") && r.Outcome != "HTTP 401" {
			t.Errorf("nobody at %s: %s, want HTTP 401", r.Target, r.Outcome)
		}
	}
	if want := targets.count(); len(results) != want {
		t.Fatalf("the probe reported %d attempts, want %d:\n%+v", len(results), want, results)
	}

	// Another cluster's CA: its admin, node and client certificates are
	// refused by the admin API, etcd and the block service. The client
	// here does not check the server (InsecureSkipVerify): what refuses
	// is the service.
	other := filepath.Join(t.TempDir(), "other-pki")
	if _, err := pki.InitCA(other, "other", time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []pki.Identity{local.AdminIdentity, {Kind: pki.KindNode, Name: "n1"}, local.MountIdentity} {
		if _, err := pki.IssueTo(other, other, id, []string{"127.0.0.1", "localhost"}, 0, time.Now()); err != nil {
			t.Fatal(err)
		}
		cfg := presenting(t, other, id)
		for _, err := range attempts(ctx, targets, cfg) {
			if err.err == nil {
				t.Errorf("%s of another cluster's CA got into %s %s", id, err.what, err.target)
			}
		}
	}

	// An expired certificate of the cluster's own CA: the client says it
	// expired before it connects, and a service refuses it if sent anyway.
	expired := filepath.Join(t.TempDir(), "expired-pki")
	ca, err := pki.LoadCA(c.PKI)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(local.AdminIdentity, nil, 24*time.Hour, time.Now().Add(-48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	must(t, pki.WriteIdentity(expired, local.AdminIdentity, certPEM, keyPEM))
	bundle, err := os.ReadFile(pki.BundlePath(c.PKI))
	must(t, err)
	must(t, os.WriteFile(pki.BundlePath(expired), bundle, 0o644))
	if _, err := pki.NewSource(expired, local.AdminIdentity); !errors.Is(err, pki.ErrExpired) || !strings.Contains(err.Error(), "weft cert issue") {
		t.Errorf("loading an expired certificate: %v, want ErrExpired saying how to renew", err)
	}
	out, code := c.WeftEnv([]string{"WEFT_PKI=" + expired}, "status")
	if code == 0 || !strings.Contains(out, "expired on") || !strings.Contains(out, "weft cert issue") {
		t.Errorf("weft status with an expired certificate (exit %d):\n%s\nwant a failure saying it expired and how to renew", code, out)
	}
	for _, a := range attempts(ctx, targets, presenting(t, expired, local.AdminIdentity)) {
		if a.err == nil {
			t.Errorf("an expired certificate got into %s %s", a.what, a.target)
			continue
		}
		if e := pki.Explain(a.err); strings.HasPrefix(a.what, "admin API") && !errors.Is(e, pki.ErrExpired) {
			t.Errorf("the admin API refused an expired certificate with %v; the client's explanation %v does not say it expired", a.err, e)
		}
	}
}

// targets are what a probe tries: the services' addresses and the files a
// node keeps to itself.
type targets struct {
	Admin   []string `json:"admin"`   // host:port, HTTPS
	Etcd    []string `json:"etcd"`    // https://host:port
	Block   []string `json:"block"`   // host:port, gRPC over TLS
	Drives  []string `json:"drives"`  // drive directories
	Keys    []string `json:"keys"`    // private keys in the PKI directory
	Control []string `json:"control"` // the supervisor's unix socket
}

// count is the number of attempts a probe makes of t (see probeNobody).
func (t targets) count() int {
	return 3*len(t.Admin) + 3*len(t.Etcd) + 2*len(t.Block) + len(t.Drives) + len(t.Keys) + len(t.Control)
}

func securityTargets(t *testing.T, c *harness.Cluster) targets {
	t.Helper()
	ctx := context.Background()
	var tg targets
	nodes, err := c.Admin.Nodes(ctx)
	must(t, err)
	for _, n := range nodes {
		tg.Block = append(tg.Block, n.GRPCAddr)
		tg.Admin = append(tg.Admin, strings.TrimPrefix(strings.TrimPrefix(c.NodeAdmin(n.Name).Base(), "https://"), "http://"))
	}
	info, err := c.Admin.Node(ctx)
	must(t, err)
	tg.Etcd = info.EtcdEndpoints
	drives, err := c.Admin.Drives(ctx)
	must(t, err)
	for _, d := range drives {
		tg.Drives = append(tg.Drives, d.Path)
	}
	keys, err := filepath.Glob(filepath.Join(c.PKI, "*.key"))
	must(t, err)
	tg.Keys = keys
	sock, err := os.ReadFile(filepath.Join(c.Dir, local.ControlFile))
	must(t, err)
	tg.Control = []string{strings.TrimSpace(string(sock))}
	for i, a := range tg.Admin {
		tg.Admin[i] = strings.TrimRight(a, "/")
	}
	if len(tg.Admin) == 0 || len(tg.Etcd) == 0 || len(tg.Block) == 0 || len(tg.Drives) == 0 || len(tg.Keys) == 0 {
		t.Fatalf("harness: nothing to probe: %+v", tg)
	}
	return tg
}

// probeResult is one attempt of the probe: Allowed if it got in.
type probeResult struct {
	What    string `json:"what"`
	Target  string `json:"target"`
	Allowed bool   `json:"allowed"`
	Outcome string `json:"outcome"`
}

const probeEnv = "WEFT_TEST_NOBODY_PROBE"

// probeAsNobody runs this test binary as nobody (uid 65534), in
// TestNobodyProbe's probe mode, and returns what it reported.
func probeAsNobody(t *testing.T, tg targets) []probeResult {
	t.Helper()
	self, err := os.Executable()
	must(t, err)
	// A copy nobody may run: the test binary's own directory is root's.
	bin := filepath.Join(worldDir(t), "probe")
	b, err := os.ReadFile(self)
	must(t, err)
	must(t, os.WriteFile(bin, b, 0o755))
	in, err := json.Marshal(tg)
	must(t, err)
	cmd := exec.Command(bin, "-test.run=^TestNobodyProbe$", "-test.v")
	cmd.Env = []string{probeEnv + "=" + string(in), "PATH=/usr/bin:/bin", "HOME=/"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the probe as nobody: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var out []probeResult
	for _, line := range strings.Split(stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "PROBE "); ok {
			var r probeResult
			must(t, json.Unmarshal([]byte(rest), &r))
			out = append(out, r)
		}
	}
	return out
}

// TestNobodyProbe is TestNobodyGetsIn's probe, run as nobody by it; on
// its own it does nothing.
func TestNobodyProbe(t *testing.T) {
	t.Parallel()
	in := os.Getenv(probeEnv)
	if in == "" {
		t.Skip("run by TestNobodyGetsIn")
	}
	var tg targets
	must(t, json.Unmarshal([]byte(in), &tg))
	if os.Geteuid() == 0 {
		t.Fatal("the probe runs as root")
	}
	report := func(what, target string, allowed bool, outcome string) {
		b, _ := json.Marshal(probeResult{What: what, Target: target, Allowed: allowed, Outcome: outcome})
		fmt.Printf("PROBE %s\n", b)
	}
	// Without the cluster's certificates nobody can verify the servers
	// either: the probe does not try (InsecureSkipVerify), the most a
	// local attacker could do.
	bare := &tls.Config{InsecureSkipVerify: true}
	ctx := context.Background()
	for _, a := range attempts(ctx, tg, bare) {
		report(a.what, a.target, a.err == nil, errString(a.err, a.status))
	}
	// Plain HTTP, as the issue's curl did: the admin API refuses a
	// request that is not TLS.
	for _, a := range tg.Admin {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Post("http://"+a+"/v1/drives/d1/suspend", "application/json", nil)
		report("admin API over http", a, err == nil && resp.StatusCode < 300, outcome(resp, err))
	}
	// etcd's JSON gateway (the issue's /v3/kv/range), over http and https.
	for _, e := range tg.Etcd {
		for _, u := range []string{strings.Replace(e, "https://", "http://", 1), e} {
			hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: bare}}
			resp, err := hc.Post(u+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"L3dlZnQ=","range_end":"L3dlZnU="}`))
			body := ""
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
			}
			report("etcd JSON gateway", u, err == nil && resp.StatusCode == 200 && strings.Contains(body, "kvs"), outcome(resp, err))
		}
	}
	// The block service in plain text.
	for _, a := range tg.Block {
		bc, err := block.Dial(a)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = bc.Usage(cctx)
			cancel()
			bc.Close()
		}
		report("block service in plain text", a, err == nil, errString(err, 0))
	}
	for _, d := range tg.Drives {
		_, err := os.ReadDir(d)
		report("drive directory", d, err == nil || !errors.Is(err, fs.ErrPermission), errString(err, 0))
	}
	for _, k := range tg.Keys {
		_, err := os.ReadFile(k)
		report("private key", k, err == nil || !errors.Is(err, fs.ErrPermission), errString(err, 0))
	}
	for _, s := range tg.Control {
		conn, err := net.DialTimeout("unix", s, 5*time.Second)
		if err == nil {
			conn.Close()
		}
		report("control socket", s, err == nil || !errors.Is(err, fs.ErrPermission), errString(err, 0))
	}
}

// attempt is one try at a service with a TLS configuration; err is nil
// if the service let it in.
type attempt struct {
	what, target string
	status       int
	err          error
}

// attempts tries each service of tg with cfg: the admin API (a read and
// a change), etcd (a read of weft's keys) and the block service (the
// usage of its drives).
func attempts(ctx context.Context, tg targets, cfg *tls.Config) []attempt {
	var out []attempt
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg.Clone()}}
	for _, a := range tg.Admin {
		for _, r := range []struct{ method, path string }{{"GET", "/v1/status"}, {"POST", "/v1/drives/d1/suspend"}} {
			req, _ := http.NewRequestWithContext(ctx, r.method, "https://"+a+r.path, nil)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			at := attempt{what: "admin API " + r.method, target: a + r.path, err: err}
			if err == nil {
				resp.Body.Close()
				at.status = resp.StatusCode
				if resp.StatusCode >= 300 {
					at.err = fmt.Errorf("HTTP %d", resp.StatusCode)
				}
			}
			out = append(out, at)
		}
	}
	for _, e := range tg.Etcd {
		err := func() error {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			cli, err := etcdx.NewClient(cctx, []string{e}, etcdx.WithTLS(cfg.Clone()))
			if err != nil {
				return err
			}
			defer cli.Close()
			_, err = cli.Get(cctx, "/weft", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
			return err
		}()
		out = append(out, attempt{what: "etcd", target: e, err: err})
	}
	for _, a := range tg.Block {
		err := func() error {
			bc, err := block.Dial(a, block.WithTLS(cfg.Clone()))
			if err != nil {
				return err
			}
			defer bc.Close()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err = bc.Usage(cctx)
			return err
		}()
		out = append(out, attempt{what: "block service", target: a, err: err})
	}
	return out
}

// presenting is a client TLS configuration that presents id's certificate
// of dir and does not check the server.
func presenting(t *testing.T, dir string, id pki.Identity) *tls.Config {
	t.Helper()
	cert, key := pki.Paths(dir, id)
	pair, err := tls.LoadX509KeyPair(cert, key)
	must(t, err)
	return &tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
}

// worldDir returns a new directory anyone may enter, removed at cleanup.
func worldDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "weft-open-")
	must(t, err)
	must(t, os.Chmod(d, 0o755))
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func outcome(resp *http.Response, err error) string {
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	return resp.Status
}

func errString(err error, status int) string {
	if err == nil {
		if status != 0 {
			return fmt.Sprintf("HTTP %d", status)
		}
		return "ok"
	}
	return err.Error()
}
