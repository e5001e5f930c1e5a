package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/gateway/nfs"
	"github.com/weftfs/weft/internal/runner"
	"github.com/weftfs/weft/internal/vip"
)

// fakeGateway stands for the protocol server: it holds every connection
// it accepts open until its Serve returns, then closes them (as the
// gateway's contract says), and records the exports and verifiers.
type fakeGateway struct {
	mu        sync.Mutex
	stats     nfs.Stats
	exports   [][]nfs.Export
	refuse    error
	verifiers []uint64
	returned  map[string]bool // listener address → its Serve has returned
	idle      int             // CloseIdle calls
}

func (f *fakeGateway) Serve(ctx context.Context, l net.Listener, verifier uint64) error {
	f.mu.Lock()
	f.verifiers = append(f.verifiers, verifier)
	f.mu.Unlock()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		f.mu.Lock()
		if f.returned == nil {
			f.returned = map[string]bool{}
		}
		f.returned[l.Addr().String()] = true
		f.mu.Unlock()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			return err // net.ErrClosed after Stop: the worker takes it as the end
		}
		conns = append(conns, c)
	}
}

func (f *fakeGateway) SetExports(e []nfs.Export) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return f.refuse
	}
	f.exports = append(f.exports, e)
	return nil
}

func (f *fakeGateway) Stats() nfs.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *fakeGateway) Close(context.Context) error { return nil }

func (f *fakeGateway) CloseIdle(context.Context) {
	f.mu.Lock()
	f.idle++
	f.mu.Unlock()
}

func testRole(t *testing.T, gw nfsGateway) *NFSRole {
	t.Helper()
	run := runner.New(runner.Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { _ = run.Stop(context.Background()) })
	return newNFSRole(gw, run, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
}

// TestNFSRoleServeStop: Serve binds the address and serves it as a worker
// of the runner, with the verifier of its epoch; an address served twice
// is refused; Stop closes the listener and returns only once the
// gateway's Serve has returned, its connections closed.
func TestNFSRoleServeStop(t *testing.T) {
	ctx := context.Background()
	gw := &fakeGateway{}
	r := testRole(t, gw)
	if err := r.Serve("127.0.0.1:0", 7); err != nil {
		t.Fatal(err)
	}
	if err := r.Serve("127.0.0.1:0", 8); !errors.Is(err, ErrNFS) || !strings.Contains(err.Error(), "served already") {
		t.Fatalf("the same address again: %v; want ErrNFS", err)
	}
	if err := r.Serve("256.0.0.1:1", 0); !errors.Is(err, ErrNFS) || !strings.Contains(err.Error(), "256.0.0.1:1") {
		t.Fatalf("an address that cannot be bound: %v; want ErrNFS naming it", err)
	}
	ls := r.listeners()
	if len(ls) != 1 || strings.HasSuffix(ls[0], ":0") {
		t.Fatalf("listeners %v: want the one bound address", ls)
	}
	c, err := net.Dial("tcp", ls[0])
	if err != nil {
		t.Fatalf("dial the served address: %v", err)
	}
	defer c.Close()
	var st []runner.WorkerStatus
	for _, w := range r.run.Status() {
		if w.Name == "nfs 127.0.0.1:0" {
			st = append(st, w)
		}
	}
	if len(st) != 1 || st[0].State != runner.StateRunning {
		t.Fatalf("the worker: %+v", st)
	}
	if err := r.Stop(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	gw.mu.Lock()
	returned, verifiers := gw.returned[ls[0]], gw.verifiers
	gw.mu.Unlock()
	if !returned {
		t.Fatal("Stop returned before the gateway's Serve did")
	}
	if len(verifiers) != 1 || verifiers[0] != r.Verifier(7) {
		t.Errorf("verifiers %x; want the one of epoch 7, %x", verifiers, r.Verifier(7))
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read on a connection of a stopped address: %v; want EOF (closed)", err)
	}
	if c2, err := net.Dial("tcp", ls[0]); err == nil {
		c2.Close()
		t.Error("the stopped address still accepts connections")
	}
	if len(r.listeners()) != 0 || len(r.Addrs()) != 0 {
		t.Errorf("after Stop: listeners %v, addrs %v", r.listeners(), r.Addrs())
	}
	if err := r.Stop(ctx, "127.0.0.1:0"); !errors.Is(err, ErrNFS) {
		t.Errorf("Stop of an address not served: %v; want ErrNFS", err)
	}
	// The address can be served again, as after a failback.
	if err := r.Serve("127.0.0.1:0", 9); err != nil {
		t.Fatalf("serve again: %v", err)
	}
	r.stopAll(ctx)
	if len(r.Addrs()) != 0 {
		t.Errorf("after stopAll: %v", r.Addrs())
	}
}

// TestNFSVerifier: the write verifier differs between epochs and between
// process starts (roles), and stays for one role and epoch.
func TestNFSVerifier(t *testing.T) {
	a, b := testRole(t, &fakeGateway{}), testRole(t, &fakeGateway{})
	seen := map[uint64]string{}
	for _, tc := range []struct {
		name string
		r    *NFSRole
		ep   uint64
	}{{"a/0", a, 0}, {"a/1", a, 1}, {"a/1000", a, 1000}, {"b/0", b, 0}, {"b/1", b, 1}} {
		v := tc.r.Verifier(tc.ep)
		if other, dup := seen[v]; dup {
			t.Errorf("verifier of %s = that of %s (%x)", tc.name, other, v)
		}
		seen[v] = tc.name
		if tc.r.Verifier(tc.ep) != v {
			t.Errorf("verifier of %s changes between calls", tc.name)
		}
	}
}

// TestNFSRates: the rate of a procedure is its count's growth between the
// oldest and newest sample kept; a count that went down counts from 0.
func TestNFSRates(t *testing.T) {
	r := newNFSRates(3)
	t0 := time.Unix(1000, 0)
	if got := r.perSecond(); len(got) != 0 {
		t.Fatalf("no samples: %v", got)
	}
	for i, n := range []uint64{0, 10, 20, 40, 100} {
		r.add(t0.Add(time.Duration(i)*time.Second), map[string]nfs.OpStat{"READ": {Count: n}, "WRITE": {Count: 5}})
	}
	// Kept: the last 4 samples (3 intervals): 10 → 100 over 3 s.
	got := r.perSecond()
	if got["READ"] != 30 || got["WRITE"] != 0 {
		t.Errorf("rates %v; want READ 30, WRITE 0", got)
	}
	r.add(t0.Add(5*time.Second), map[string]nfs.OpStat{"READ": {Count: 6}, "GETATTR": {Count: 9}})
	got = r.perSecond() // 20 → 6 (a restart: 6 since), GETATTR 0 → 9, over 3 s
	if got["READ"] != 2 || got["GETATTR"] != 3 {
		t.Errorf("after a restart: %v; want READ 2, GETATTR 3", got)
	}
}

// TestNFSStatusAndMetrics: the node's status and its metrics come from
// the gateway's statistics: clients most recent first, procedures by
// name with their rates, the addresses served, the exports applied.
func TestNFSStatusAndMetrics(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	gw := &fakeGateway{stats: nfs.Stats{
		Clients:      []nfs.ClientStat{{Addr: "10.0.0.1:800", Listener: "x", Ops: 3, LastSeen: now.Add(-time.Minute)}, {Addr: "10.0.0.2:801", Listener: "x", Ops: 9, LastSeen: now}},
		Ops:          map[string]nfs.OpStat{"WRITE": {Count: 4, Errors: 1, Seconds: 0.5}, "READ": {Count: 10, Seconds: 0.25}},
		RefusedConns: 3,
	}}
	r := testRole(t, gw)
	if err := r.Serve("127.0.0.1:0", 0); err != nil {
		t.Fatal(err)
	}
	r.applyExports(cluster.NFSExports{Version: 5, Exports: []cluster.NFSExport{{Path: "/a"}}})
	r.rates.add(now.Add(-2*time.Second), map[string]nfs.OpStat{"READ": {Count: 4}, "WRITE": {Count: 4}})
	r.rates.add(now, gw.stats.Ops)
	st := r.NFSStatus()
	if !st.Gateway || len(st.Listeners) != 1 || st.ExportsVersion != 5 || st.RefusedConns != 3 {
		t.Fatalf("status: %+v", st)
	}
	if len(st.Clients) != 2 || st.Clients[0].Addr != "10.0.0.2:801" || st.Clients[1].Ops != 3 {
		t.Errorf("clients: %+v", st.Clients)
	}
	want := []admin.NFSOp{{Procedure: "READ", Count: 10, Seconds: 0.25, PerSecond: 3}, {Procedure: "WRITE", Count: 4, Errors: 1, Seconds: 0.5}}
	if len(st.Ops) != 2 || st.Ops[0] != want[0] || st.Ops[1] != want[1] {
		t.Errorf("ops %+v; want %+v", st.Ops, want)
	}
	want2 := []string{
		"weft_nfs_addresses 1",
		"weft_nfs_clients 2",
		"weft_nfs_connections_refused_total 3",
		`weft_nfs_errors_total{procedure="READ"} 0`,
		`weft_nfs_errors_total{procedure="WRITE"} 1`,
		"weft_nfs_exports_version 5",
		`weft_nfs_request_seconds{procedure="READ"} count 10 sum 0.25`,
		`weft_nfs_request_seconds{procedure="WRITE"} count 4 sum 0.5`,
		`weft_nfs_requests_total{procedure="READ"} 10`,
		`weft_nfs_requests_total{procedure="WRITE"} 4`,
	}
	if got := gatherLines(t, newNFSCollector(r)); strings.Join(got, "\n") != strings.Join(want2, "\n") {
		t.Errorf("metrics:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want2, "\n"))
	}
}

// gatherLines returns c's metrics, one line each, sorted: name{labels}
// value, a summary as count and sum.
func gatherLines(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out = append(out, fmt.Sprintf("%s %v", name, m.GetCounter().GetValue()))
			case m.Gauge != nil:
				out = append(out, fmt.Sprintf("%s %v", name, m.GetGauge().GetValue()))
			case m.Summary != nil:
				out = append(out, fmt.Sprintf("%s count %d sum %v", name, m.GetSummary().GetSampleCount(), m.GetSummary().GetSampleSum()))
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestNFSApplyExports: the configured exports reach the gateway with every
// field; none configured is the default export of "/"; exports the
// gateway refuses leave the version applied as it was.
func TestNFSApplyExports(t *testing.T) {
	gw := &fakeGateway{}
	r := testRole(t, gw)
	e := cluster.NFSExport{Path: "/p", Clients: []string{"10.0.0.0/8"}, ReadOnly: true, AnonUID: 7, AnonGID: 8}
	r.applyExports(cluster.NFSExports{Version: 2, Exports: []cluster.NFSExport{e, {Path: "/q", NoRootSquash: true}}})
	r.applyExports(cluster.NFSExports{Version: 3, Exports: []cluster.NFSExport{}})
	gw.refuse = errors.New("nfs: no")
	r.applyExports(cluster.NFSExports{Version: 4, Exports: []cluster.NFSExport{{Path: "/r"}}})
	if len(gw.exports) != 2 {
		t.Fatalf("exports given: %+v", gw.exports)
	}
	got := gw.exports[0]
	if len(got) != 2 || got[0].Path != "/p" || got[0].Clients[0] != "10.0.0.0/8" || !got[0].ReadOnly || got[0].AnonUID != 7 || got[0].AnonGID != 8 ||
		got[0].NoRootSquash || !got[1].NoRootSquash {
		t.Errorf("version 2 given as %+v", got)
	}
	if d := gw.exports[1]; len(d) != 1 || d[0].Path != "/" || d[0].ReadOnly || d[0].NoRootSquash || len(d[0].Clients) != 0 {
		t.Errorf("no exports given as %+v; want the default export of /", d)
	}
	if v := r.applied.Load(); v != 3 {
		t.Errorf("applied version %d after a refused change; want 3", v)
	}
}

// TestNFSNode: a node started with an NFS address serves it from the
// start, reports it through the admin API and its metrics, applies a
// change of the exports, serves and stops another address through the
// HA hook (NFS().Serve, Stop), and closes its listeners when it stops.
func TestNFSNode(t *testing.T) {
	ctx := context.Background()
	etcd := etcdtest.NewTLSCluster(t, 1)
	cfg := nodeConfig(t, "n1", etcd, t.TempDir())
	cfg.NFS.Listen = []string{"127.0.0.1:0"}
	n := startTestNode(t, cfg)
	st, err := n.api.NFSStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 1 || !st.Nodes[0].Gateway || len(st.Nodes[0].Listeners) != 1 || st.Nodes[0].ExportsVersion != 0 {
		t.Fatalf("status: %+v", st)
	}
	addr := st.Nodes[0].Listeners[0]
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("the --nfs address: %v", err)
	}
	c.Close()
	if _, err := n.api.AddNFSExport(ctx, cluster.NFSExport{Path: "/a", ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for n.s.NFS().NFSStatus().ExportsVersion != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the node did not apply exports version 1 in 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	role := n.s.NFS()
	if err := role.Serve("127.0.0.2:0", 42); err != nil {
		t.Fatal(err)
	}
	if st, err = n.api.NFSStatus(ctx); err != nil || len(st.Nodes[0].Listeners) != 2 || st.Nodes[0].ExportsVersion != 1 {
		t.Fatalf("status with two addresses: %+v %v", st, err)
	}
	resp, err := n.api.HTTP().Get(n.api.Base() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"weft_nfs_addresses 2", "weft_nfs_exports_version 1", `weft_worker_state{state="running",worker="nfs 127.0.0.2:0"} 1`,
		`weft_worker_state{state="running",worker="nfs-exports"} 1`} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if err := role.Stop(ctx, "127.0.0.2:0"); err != nil {
		t.Fatal(err)
	}
	if got := role.Addrs(); len(got) != 1 || got[0] != "127.0.0.1:0" {
		t.Errorf("after Stop: %v", got)
	}
	n.stop()
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("a stopped node still accepts NFS connections")
	}
}

// TestNFSConfig: --nfs addresses are HOST:PORT with an IP host.
func TestNFSConfig(t *testing.T) {
	for _, tc := range []struct {
		listen []string
		want   string
	}{
		{[]string{"127.0.0.1:2049", "[::1]:2049", ":2049", "localhost:0"}, ""},
		{[]string{"127.0.0.1"}, `--nfs "127.0.0.1": want HOST:PORT`},
		{[]string{"127.0.0.1:nfs"}, `--nfs "127.0.0.1:nfs"`},
		{[]string{"127.0.0.1:70000"}, `--nfs "127.0.0.1:70000"`},
		{[]string{"a:1", "a:1"}, `--nfs "a:1"`},
		{[]string{"10.0.0.1:1", "10.0.0.1:1"}, "listed twice"},
	} {
		c := NFSConfig{Listen: tc.listen}
		err := c.validate()
		if (tc.want == "") != (err == nil) || (err != nil && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("%v: %v; want %q", tc.listen, err, tc.want)
		}
	}
}

// TestNFSAddressConfig: service addresses are checked (addresses, port,
// TTL, hooks, link checks), the defaults filled in, and the hook and link
// check built as the flags say.
func TestNFSAddressConfig(t *testing.T) {
	for _, tc := range []struct {
		c    NFSConfig
		want string
	}{
		{NFSConfig{Addresses: []string{"127.0.0.50", "::1"}}, ""},
		{NFSConfig{Addresses: []string{"10.0.0.50"}, Iface: "eth0", Prefix: 24}, ""},
		{NFSConfig{Addresses: []string{"10.0.0.50"}, HookAdd: "ip addr add {addr}/32 dev d0", HookDel: "ip addr del {addr}/32 dev d0", LinkIface: "d0"}, ""},
		{NFSConfig{Addresses: []string{"10.0.0.50"}}, "not a loopback address"},
		{NFSConfig{Addresses: []string{"10.0.0"}}, `--nfs-address "10.0.0"`},
		{NFSConfig{Addresses: []string{"127.0.0.50", "127.0.0.50"}}, "listed twice"},
		{NFSConfig{Addresses: []string{"127.0.0.50"}, Port: 70000}, "--nfs-port 70000"},
		{NFSConfig{Listen: []string{"127.0.0.1:2049"}, MaxConnections: -1}, "--nfs-max-connections -1"},
		{NFSConfig{Addresses: []string{"127.0.0.50"}, AddressTTL: 1500 * time.Millisecond}, "--nfs-address-ttl"},
		{NFSConfig{Addresses: []string{"127.0.0.50"}, HookAdd: "ip addr add {addr} dev lo"}, "go together"},
		{NFSConfig{Addresses: []string{"127.0.0.50"}, LinkIface: "a", LinkCheck: "true"}, "not both"},
		{NFSConfig{Addresses: []string{"127.0.0.50"}, Listen: []string{"127.0.0.50:2049"}}, "drop it from --nfs"},
	} {
		c := tc.c
		err := c.validate()
		if (tc.want == "") != (err == nil) || (err != nil && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("%+v: %v; want %q", tc.c, err, tc.want)
		}
		if err == nil && (c.Port != DefaultNFSPort && tc.c.Port == 0 || !c.Enabled()) {
			t.Errorf("%+v: port %d enabled %v after validate", tc.c, c.Port, c.Enabled())
		}
	}
	if h, err := nfsAddressHook(NFSConfig{}); err != nil || h != (vip.NoHook{}) {
		t.Errorf("no hook flags: %v %v; want vip.NoHook", h, err)
	}
	h, err := nfsAddressHook(NFSConfig{Iface: "eth1", Prefix: 24})
	ch, ok := h.(*vip.CommandHook)
	if err != nil || !ok || ch.Iface != "eth1" || ch.Prefix != 24 || len(ch.AnnounceArgs) == 0 {
		t.Errorf("--nfs-iface eth1: %+v %v; want the machine hook of eth1/24", h, err)
	}
	if _, err := nfsAddressHook(NFSConfig{HookAdd: "ip {bogus}", HookDel: "x"}); !errors.Is(err, ErrConfig) {
		t.Errorf("a bad hook template: %v; want ErrConfig", err)
	}
	if c, err := nfsLinkCheck(NFSConfig{LinkCheck: "false"}); err != nil || c == nil || c(context.Background()) == nil {
		t.Errorf("--nfs-link-check false: %v; want a check that fails", err)
	}
	if c, err := nfsLinkCheck(NFSConfig{LinkIface: "weft-no-such-iface"}); err != nil || c == nil || c(context.Background()) == nil {
		t.Errorf("--nfs-link-iface of a missing interface: %v; want a check that fails", err)
	}
	if c, err := nfsLinkCheck(NFSConfig{}); err != nil || c != nil {
		t.Errorf("no link check flags: %v; want none", err)
	}
}

// TestNFSIdleWorker: the nfs-idle worker has the gateway close its idle
// files at each step.
func TestNFSIdleWorker(t *testing.T) {
	gw := &fakeGateway{}
	r := testRole(t, gw)
	if _, err := r.run.Go("nfs-idle", nfsIdleWorker{r}, runner.Options{Idle: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		gw.mu.Lock()
		n := gw.idle
		gw.mu.Unlock()
		if n >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CloseIdle called %d times in 10 s; want steps calling it", n)
		}
		time.Sleep(time.Millisecond)
	}
}
