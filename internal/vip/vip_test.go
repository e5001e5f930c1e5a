package vip

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// The tests run managers against embedded etcd members with real time
// and short leases: the lease mechanics are etcd's, and cannot be faked.
// A tracker, shared by the managers of a test, records every OnAcquire
// and OnRelease and fails the test the moment two nodes serve one
// address at once (all managers run in this process, so the order of
// the callbacks is the real order).

const testTTL = 2 * time.Second

var addr1 = netip.MustParseAddr("127.0.0.50")

type event struct {
	at    time.Time
	node  string
	addr  netip.Addr
	kind  string // acquire, release
	epoch int64
}

type tracker struct {
	t       *testing.T
	mu      sync.Mutex
	serving map[netip.Addr]string
	onHost  map[string]map[netip.Addr]bool // what the hook put on each node's machine
	dead    map[string]bool                // crashed: their callbacks are ignored
	events  []event
}

func newTracker(t *testing.T) *tracker {
	return &tracker{t: t, serving: map[netip.Addr]string{}, onHost: map[string]map[netip.Addr]bool{}, dead: map[string]bool{}}
}

func (tr *tracker) acquire(node string, a netip.Addr, epoch int64) error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.dead[node] {
		return errors.New("crashed")
	}
	if cur, ok := tr.serving[a]; ok && cur != node {
		tr.t.Errorf("two holders: %s acquired %s (epoch %d) while %s serves it", node, a, epoch, cur)
	}
	if !tr.onHost[node][a] {
		tr.t.Errorf("%s: OnAcquire(%s) before the hook added the address", node, a)
	}
	tr.serving[a] = node
	tr.events = append(tr.events, event{time.Now(), node, a, "acquire", epoch})
	return nil
}

func (tr *tracker) release(node string, a netip.Addr) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.dead[node] {
		return
	}
	if tr.serving[a] != node {
		tr.t.Errorf("%s: OnRelease(%s) of an address it does not serve (served by %q)", node, a, tr.serving[a])
	}
	delete(tr.serving, a)
	tr.events = append(tr.events, event{at: time.Now(), node: node, addr: a, kind: "release"})
}

// crash makes node's serving stop now, as a kill would, and ignores its
// callbacks from now on.
func (tr *tracker) crash(node string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.dead[node] = true
	for a, n := range tr.serving {
		if n == node {
			delete(tr.serving, a)
		}
	}
}

func (tr *tracker) holder(a netip.Addr) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.serving[a]
}

// last returns the last event of kind for node and a.
func (tr *tracker) last(node string, a netip.Addr, kind string) (event, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for i := len(tr.events) - 1; i >= 0; i-- {
		if e := tr.events[i]; e.node == node && e.addr == a && e.kind == kind {
			return e, true
		}
	}
	return event{}, false
}

// trackHook is a node's hook: it records the address on the node's
// machine, checks that Del comes after OnRelease.
type trackHook struct {
	tr   *tracker
	node string
}

func (h trackHook) Add(_ context.Context, a netip.Addr) error {
	h.tr.mu.Lock()
	defer h.tr.mu.Unlock()
	if h.tr.onHost[h.node] == nil {
		h.tr.onHost[h.node] = map[netip.Addr]bool{}
	}
	h.tr.onHost[h.node][a] = true
	return nil
}

func (h trackHook) Del(_ context.Context, a netip.Addr) error {
	h.tr.mu.Lock()
	defer h.tr.mu.Unlock()
	if h.tr.serving[a] == h.node && !h.tr.dead[h.node] {
		h.tr.t.Errorf("%s: hook Del(%s) while still serving it", h.node, a)
	}
	delete(h.tr.onHost[h.node], a)
	return nil
}

type node struct {
	name string
	cli  *clientv3.Client
	m    *Manager
	link atomic.Bool  // true: the link check fails
	fail atomic.Int32 // OnAcquire fails this many more times
}

type opts struct {
	addrs     []netip.Addr
	ttl       time.Duration
	rebalance time.Duration
	fail      int // OnAcquire fails this many times
	onRelease func(a netip.Addr)
}

// start starts a manager for name with its own client to endpoints.
func start(t *testing.T, tr *tracker, name string, endpoints []string, o opts) *node {
	t.Helper()
	// As etcdx.NewClient dials (its keep-alive pings find a dead member in
	// 2 s), without importing it.
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}})}})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, cli: cli}
	n.fail.Store(int32(o.fail))
	if o.ttl == 0 {
		o.ttl = testTTL
	}
	if len(o.addrs) == 0 {
		o.addrs = []netip.Addr{addr1}
	}
	var addrs []string
	for _, a := range o.addrs {
		addrs = append(addrs, a.String())
	}
	m, err := New(Config{
		Client: cli, Node: name, Addrs: addrs, TTL: o.ttl, Rebalance: o.rebalance,
		Hook: trackHook{tr, name},
		LinkCheck: func(context.Context) error {
			if n.link.Load() {
				return errors.New("link down (test)")
			}
			return nil
		},
		OnAcquire: func(a netip.Addr, epoch int64) error {
			if n.fail.Add(-1) >= 0 {
				return errors.New("cannot listen (test)")
			}
			return tr.acquire(name, a, epoch)
		},
		OnRelease: func(a netip.Addr) {
			if o.onRelease != nil {
				o.onRelease(a)
			}
			tr.release(name, a)
		},
		Log: testLog(t, name),
	})
	if err != nil {
		t.Fatal(err)
	}
	n.m = m
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.stop() })
	return n
}

// stop closes the manager (releasing what it holds) and its client.
func (n *node) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.m.Close(ctx)
	n.cli.Close()
}

// crash stops the node as a kill would: its serving ends now, its
// client goes (so nothing is released in etcd: its lease runs out).
func (n *node) crash(tr *tracker) {
	tr.crash(n.name)
	n.cli.Close()
	n.stop()
}

func testLog(t *testing.T, name string) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func waitFor(t *testing.T, d time.Duration, what string, f func() bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Now()
}

// untilCandidates returns once n nodes are candidates (each started node
// has published its candidacy).
func untilCandidates(t *testing.T, cli *clientv3.Client, n int) {
	t.Helper()
	waitFor(t, 5*time.Second, fmt.Sprintf("%d candidates", n), func() bool {
		st, err := ReadStatus(context.Background(), cli, "")
		return err == nil && len(st.Candidates) == n
	})
}

// TestCrashedHolderIsReplaced: a holder killed (no release) is replaced
// within TTL + 1 s with a higher epoch, and when it comes back it does
// not take the address from the node that now serves it.
func TestCrashedHolderIsReplaced(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, 1)
	tr := newTracker(t)
	n1 := start(t, tr, "n1", c.Endpoints, opts{})
	waitFor(t, 5*time.Second, "n1 holds the address", func() bool { return tr.holder(addr1) == "n1" })
	n2 := start(t, tr, "n2", c.Endpoints, opts{})
	time.Sleep(testTTL) // n2 is a standby: it must not take a held address
	if h := tr.holder(addr1); h != "n1" {
		t.Fatalf("with n2 up the address is served by %q", h)
	}
	if held := n2.m.Held(); len(held) != 0 {
		t.Fatalf("the standby holds %v", held)
	}
	e1, _ := tr.last("n1", addr1, "acquire")

	crashed := time.Now()
	n1.crash(tr)
	took := waitFor(t, testTTL+time.Second+500*time.Millisecond, "n2 takes the address over", func() bool { return tr.holder(addr1) == "n2" })
	e2, _ := tr.last("n2", addr1, "acquire")
	t.Logf("n2 took the address %s after n1 was killed (lease TTL %s)", took.Sub(crashed).Round(time.Millisecond), testTTL)
	if took.Sub(crashed) > testTTL+time.Second {
		t.Errorf("takeover took %s, more than TTL + 1 s", took.Sub(crashed))
	}
	if e2.epoch <= e1.epoch {
		t.Errorf("epochs: n1 had %d, n2 has %d: want a higher one", e1.epoch, e2.epoch)
	}

	// n1 restarts: it must leave the address to n2.
	n1b := start(t, tr, "n1", c.Endpoints, opts{})
	tr.mu.Lock()
	delete(tr.dead, "n1")
	tr.mu.Unlock()
	waitFor(t, 5*time.Second, "n1 is a candidate again", func() bool {
		st, err := ReadStatus(context.Background(), n2.cli, "")
		return err == nil && len(st.Candidates) == 2
	})
	time.Sleep(testTTL)
	if h := tr.holder(addr1); h != "n2" {
		t.Errorf("after n1's restart the address is served by %q", h)
	}
	if held := n1b.m.Held(); len(held) != 0 {
		t.Errorf("restarted n1 holds %v", held)
	}
	st, err := n1b.m.Status(context.Background())
	if err != nil || len(st.Addresses) != 1 || st.Addresses[0].Node != "n2" || st.Addresses[0].Epoch != e2.epoch {
		t.Errorf("status %+v, %v: want %s held by n2 at epoch %d", st, err, addr1, e2.epoch)
	}
}

// proxy is a TCP proxy to an etcd member that a test can sever: every
// connection through it ends, and new ones are closed as they arrive.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.sever() })
	return p
}

func (p *proxy) endpoint() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		d, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns = append(p.conns, c, d)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(d, c); d.Close(); c.Close() }()
		go func() { _, _ = io.Copy(c, d); d.Close(); c.Close() }()
	}
}

// heal lets new connections through again.
func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *proxy) sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestCutFromEtcdFencesFirst: a holder cut off from etcd stops serving
// before its lease expires — its key is still in etcd when OnRelease
// runs — and the other node serves the address only after; when the cut
// heals it does not take the address back.
func TestCutFromEtcdFencesFirst(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, 1)
	tr := newTracker(t)
	watcher := c.Client(t)
	p := newProxy(t, c.Endpoints[0][len("http://"):])
	var keyAtFence atomic.Value
	n1 := start(t, tr, "n1", []string{p.endpoint()}, opts{onRelease: func(a netip.Addr) {
		// Through a client of its own, not the severed one: is n1's
		// holding still in etcd as it stops serving?
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		r, err := watcher.Get(ctx, addrKey(KeyPrefix, a))
		keyAtFence.Store(fmt.Sprintf("%v/%d", err, len(r.Kvs)))
	}})
	waitFor(t, 5*time.Second, "n1 holds the address", func() bool { return tr.holder(addr1) == "n1" })
	start(t, tr, "n2", c.Endpoints, opts{})
	untilCandidates(t, watcher, 2)

	cut := time.Now()
	p.sever()
	fenced := waitFor(t, testTTL+time.Second, "n1 fences itself", func() bool { _, ok := tr.last("n1", addr1, "release"); return ok })
	took := waitFor(t, testTTL+2*time.Second, "n2 takes the address over", func() bool { return tr.holder(addr1) == "n2" })
	rel, _ := tr.last("n1", addr1, "release")
	acq, _ := tr.last("n2", addr1, "acquire")
	t.Logf("cut at 0, n1 fenced at %s, n2 took over at %s (lease TTL %s)", fenced.Sub(cut).Round(time.Millisecond), took.Sub(cut).Round(time.Millisecond), testTTL)
	if got := keyAtFence.Load(); got != "<nil>/1" {
		t.Errorf("when n1 stopped serving, etcd had its key: %v (want <nil>/1: its lease had not expired)", got)
	}
	if !rel.at.Before(acq.at) {
		t.Errorf("n1 released at %s, n2 acquired at %s", rel.at, acq.at)
	}
	if rel.at.Sub(cut) > testTTL {
		t.Errorf("n1 fenced %s after the cut: later than its lease could last", rel.at.Sub(cut))
	}
	if st := n1.m.snapshot(); st.fences == 0 {
		t.Errorf("n1 counted no fence")
	}

	// The cut heals: n1 takes a new lease and is a candidate again, but
	// leaves the address to n2.
	p.heal()
	waitFor(t, 5*time.Second, "n1 is a candidate again", func() bool {
		st, err := ReadStatus(context.Background(), watcher, "")
		return err == nil && len(st.Candidates) == 2
	})
	time.Sleep(testTTL / 2)
	if h := tr.holder(addr1); h != "n2" {
		t.Errorf("after the cut healed the address is served by %q", h)
	}
}

// TestLinkDownGivesUp: a holder whose public link check fails releases
// the address at once and the other takes it; with its link back it
// takes nothing from the node serving; with its link down it takes
// nothing at all, even a free address; with its link up again it does.
func TestLinkDownGivesUp(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, 1)
	tr := newTracker(t)
	n1 := start(t, tr, "n1", c.Endpoints, opts{})
	waitFor(t, 5*time.Second, "n1 holds the address", func() bool { return tr.holder(addr1) == "n1" })
	n2 := start(t, tr, "n2", c.Endpoints, opts{})
	untilCandidates(t, n2.cli, 2)
	down := time.Now()
	n1.link.Store(true)
	took := waitFor(t, testTTL, "n2 takes the address over", func() bool { return tr.holder(addr1) == "n2" })
	t.Logf("n2 took over %s after n1's link went down", took.Sub(down).Round(time.Millisecond))
	if st := n1.m.snapshot(); st.releases["link down"] != 1 || st.linkFailures != 1 {
		t.Errorf("n1's stats: %+v", st)
	}

	n1.link.Store(false)
	waitFor(t, 5*time.Second, "n1 is a candidate again", func() bool {
		st, err := ReadStatus(context.Background(), n2.cli, "")
		return err == nil && len(st.Candidates) == 2
	})
	time.Sleep(testTTL / 2)
	if h := tr.holder(addr1); h != "n2" {
		t.Errorf("after n1's link is back the address is served by %q", h)
	}

	n1.link.Store(true)
	time.Sleep(testTTL / 2) // a check or two
	n2.crash(tr)
	time.Sleep(testTTL + 1500*time.Millisecond) // n2's lease is gone
	if h := tr.holder(addr1); h != "" {
		t.Fatalf("with n1's link down and n2 dead the address is served by %q", h)
	}
	up := time.Now()
	n1.link.Store(false)
	back := waitFor(t, testTTL, "n1 takes the address with its link up", func() bool { return tr.holder(addr1) == "n1" })
	t.Logf("n1 took the free address %s after its link came up", back.Sub(up).Round(time.Millisecond))
}

// TestEtcdLeaderKilled: with the etcd leader of three members killed,
// the address stays served (or is served again) and never by two.
func TestEtcdLeaderKilled(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, 3)
	tr := newTracker(t)
	n1 := start(t, tr, "n1", c.Endpoints, opts{})
	waitFor(t, 5*time.Second, "n1 holds the address", func() bool { return tr.holder(addr1) == "n1" })
	start(t, tr, "n2", c.Endpoints, opts{})
	untilCandidates(t, n1.cli, 2)

	leader := -1
	for i, ep := range c.Endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := n1.cli.Status(ctx, ep)
		cancel()
		if err == nil && s.Leader == s.Header.MemberId {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no etcd leader found")
	}
	killed := time.Now()
	c.Members[leader].Crash()
	t.Logf("killed etcd member %d, the leader", leader+1)
	// Served again (or still) within the TTL and an election or two,
	// and for good: watched for another two TTLs.
	back := waitFor(t, 3*testTTL+2*time.Second, "the address is served", func() bool { return tr.holder(addr1) != "" })
	t.Logf("served by %s %s after the leader was killed", tr.holder(addr1), back.Sub(killed).Round(time.Millisecond))
	deadline := time.Now().Add(2 * testTTL)
	gaps := 0
	for time.Now().Before(deadline) {
		if tr.holder(addr1) == "" {
			gaps++
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h := tr.holder(addr1); h == "" {
		t.Errorf("the address is not served %s after the leader was killed", time.Since(killed))
	}
	tr.mu.Lock()
	for _, e := range tr.events {
		t.Logf("%+8s %s %s %s epoch %d", e.at.Sub(killed).Round(time.Millisecond), e.node, e.kind, e.addr, e.epoch)
	}
	tr.mu.Unlock()
	if gaps > 0 {
		t.Logf("unserved for about %s after the first check", time.Duration(gaps)*20*time.Millisecond)
	}
}

// TestSpread: when a node holding three addresses dies, the two that
// remain share them rather than one taking all.
func TestSpread(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, 1)
	tr := newTracker(t)
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.51"), netip.MustParseAddr("127.0.0.52"), netip.MustParseAddr("127.0.0.53")}
	o := opts{addrs: addrs, ttl: 3 * time.Second}
	n1 := start(t, tr, "n1", c.Endpoints, o)
	waitFor(t, 5*time.Second, "n1 holds every address", func() bool { return len(n1.m.Held()) == 3 })
	n2 := start(t, tr, "n2", c.Endpoints, o)
	n3 := start(t, tr, "n3", c.Endpoints, o)
	waitFor(t, 5*time.Second, "three candidates", func() bool {
		st, err := ReadStatus(context.Background(), n2.cli, "")
		return err == nil && len(st.Candidates) == 3
	})
	n1.crash(tr)
	waitFor(t, 6*time.Second, "every address served again", func() bool {
		return tr.holder(addrs[0]) != "" && tr.holder(addrs[1]) != "" && tr.holder(addrs[2]) != ""
	})
	h2, h3 := len(n2.m.Held()), len(n3.m.Held())
	if h2 == 0 || h3 == 0 || h2+h3 != 3 {
		t.Errorf("n2 holds %d, n3 holds %d: want 2 and 1", h2, h3)
	}
}

// TestUnreadableRecordIsNotTaken: an address whose key holds a record of
// a newer version is left alone; the others are taken.
func TestUnreadableRecordIsNotTaken(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, 1)
	cli := c.Client(t)
	a2 := netip.MustParseAddr("127.0.0.60")
	if _, err := cli.Put(context.Background(), addrKey(KeyPrefix, a2), `{"v":2,"node":"future"}`); err != nil {
		t.Fatal(err)
	}
	tr := newTracker(t)
	n1 := start(t, tr, "n1", c.Endpoints, opts{addrs: []netip.Addr{addr1, a2}})
	waitFor(t, 5*time.Second, "n1 holds the readable address", func() bool { return tr.holder(addr1) == "n1" })
	time.Sleep(testTTL / 2)
	if held := n1.m.Held(); len(held) != 1 {
		t.Errorf("n1 holds %v", held)
	}
	st, err := ReadStatus(context.Background(), cli, "")
	if err != nil || len(st.Addresses) != 2 || !st.Addresses[1].Unreadable {
		t.Errorf("status %+v, %v", st, err)
	}
}

// TestCloseHandsOver: a node stopped cleanly releases at once: the other
// serves within a fraction of the TTL.
func TestCloseHandsOver(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, 1)
	tr := newTracker(t)
	n1 := start(t, tr, "n1", c.Endpoints, opts{addrs: []netip.Addr{addr1}, ttl: 5 * time.Second})
	waitFor(t, 5*time.Second, "n1 holds the address", func() bool { return tr.holder(addr1) == "n1" })
	start(t, tr, "n2", c.Endpoints, opts{ttl: 5 * time.Second})
	untilCandidates(t, n1.cli, 2)
	stopped := time.Now()
	n1.stop()
	took := waitFor(t, 2*time.Second, "n2 takes the address over", func() bool { return tr.holder(addr1) == "n2" })
	t.Logf("n2 took over %s after n1 stopped (TTL 5 s)", took.Sub(stopped).Round(time.Millisecond))
	if !slices.ContainsFunc(tr.events, func(e event) bool { return e.node == "n1" && e.kind == "release" }) {
		t.Error("n1 never released")
	}
}

// TestRebalance: with Rebalance set, a node holding both addresses hands
// one to a candidate that joins, once, and never are two holders.
func TestRebalance(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, 1)
	tr := newTracker(t)
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.61"), netip.MustParseAddr("127.0.0.62")}
	o := opts{addrs: addrs, rebalance: time.Second}
	n1 := start(t, tr, "n1", c.Endpoints, o)
	waitFor(t, 5*time.Second, "n1 holds both addresses", func() bool { return len(n1.m.Held()) == 2 })
	joined := time.Now()
	n2 := start(t, tr, "n2", c.Endpoints, o)
	moved := waitFor(t, 5*time.Second, "n2 is handed an address", func() bool { return len(n2.m.Held()) == 1 })
	t.Logf("n2 got an address %s after it started (Rebalance 1 s)", moved.Sub(joined).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	if len(n1.m.Held()) != 1 || len(n2.m.Held()) != 1 {
		t.Errorf("n1 holds %v, n2 %v: want one each", n1.m.Held(), n2.m.Held())
	}
	if st := n1.m.snapshot(); st.releases["rebalance"] != 1 {
		t.Errorf("n1's releases %v: want one rebalance", st.releases)
	}
}

// TestRandomFaults runs three managers over two addresses through
// proxies to one etcd member and, for ten seconds, cuts and heals their
// etcd connections, fails and restores their links, and kills and
// restarts them, at random: the tracker fails the test if two ever serve
// one address. With the faults over, both addresses are served again.
func TestRandomFaults(t *testing.T) {
	t.Parallel()
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	c := etcdtest.NewCluster(t, 1)
	tr := newTracker(t)
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.71"), netip.MustParseAddr("127.0.0.72")}
	target := c.Endpoints[0][len("http://"):]
	type member struct {
		n *node
		p *proxy
	}
	ms := make([]*member, 3)
	startMember := func(i int) {
		name := fmt.Sprintf("n%d", i+1)
		tr.mu.Lock()
		delete(tr.dead, name)
		tr.mu.Unlock()
		p := newProxy(t, target)
		ms[i] = &member{n: start(t, tr, name, []string{p.endpoint()}, opts{addrs: addrs}), p: p}
	}
	for i := range ms {
		startMember(i)
	}
	counts := map[string]int{}
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		time.Sleep(time.Duration(200+rng.IntN(500)) * time.Millisecond)
		i := rng.IntN(len(ms))
		m := ms[i]
		switch k := rng.IntN(10); {
		case k < 3:
			m.p.sever()
			counts["cut"]++
		case k < 5:
			m.p.heal()
			counts["heal"]++
		case k < 7:
			m.n.link.Store(!m.n.link.Load())
			counts["link flip"]++
		case k < 8:
			m.n.crash(tr)
			m.p.sever()
			startMember(i)
			counts["kill and restart"]++
		default:
			counts["nothing"]++
		}
	}
	for _, m := range ms {
		m.p.heal()
		m.n.link.Store(false)
	}
	t.Logf("faults: %v", counts)
	healed := time.Now()
	waitFor(t, 3*testTTL+3*time.Second, "both addresses served after the faults", func() bool {
		return tr.holder(addrs[0]) != "" && tr.holder(addrs[1]) != ""
	})
	tr.mu.Lock()
	t.Logf("%d acquisitions and releases; served again %s after the faults ended", len(tr.events), time.Since(healed).Round(time.Millisecond))
	tr.mu.Unlock()
}

// TestAcquireFailureLeavesAddress: a node whose OnAcquire fails gives the
// address up (key deleted, address off the machine) and leaves it to
// the others for a while.
func TestAcquireFailureLeavesAddress(t *testing.T) {
	t.Parallel()
	c := etcdtest.NewCluster(t, 1)
	tr := newTracker(t)
	n1 := start(t, tr, "n1", c.Endpoints, opts{fail: 1})
	waitFor(t, 5*time.Second, "n1 tried", func() bool { return n1.fail.Load() == 0 })
	waitFor(t, testTTL/2, "n1 deletes the key", func() bool {
		st, err := ReadStatus(context.Background(), n1.cli, "")
		return err == nil && len(st.Addresses) == 0
	})
	tr.mu.Lock()
	on := tr.onHost["n1"][addr1]
	tr.mu.Unlock()
	if on {
		t.Error("the address stayed on n1's machine")
	}
	start(t, tr, "n2", c.Endpoints, opts{})
	waitFor(t, 2*testTTL, "n2 takes the address", func() bool { return tr.holder(addr1) == "n2" })
}
