package vip

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestConfigErrors(t *testing.T) {
	cli := &clientv3.Client{}
	ok := Config{Client: cli, Node: "n1", Addrs: []string{"10.0.0.50"}}
	for _, tc := range []struct {
		f    func(*Config)
		want string
	}{
		{func(c *Config) { c.Client = nil }, "no etcd client"},
		{func(c *Config) { c.Node = "" }, "no node name"},
		{func(c *Config) { c.Addrs = nil }, "no service address"},
		{func(c *Config) { c.Addrs = []string{"10.0.0.300"} }, `service address "10.0.0.300": want an IPv4 or IPv6 address`},
		{func(c *Config) { c.Addrs = []string{"0.0.0.0"} }, `service address "0.0.0.0"`},
		{func(c *Config) { c.Addrs = []string{"10.0.0.50", "10.0.0.50"} }, "given twice"},
		{func(c *Config) { c.TTL = 500 * time.Millisecond }, "lease TTL 500ms is below 1s"},
		{func(c *Config) { c.Margin = 2 * time.Second }, "fencing margin 2s"},
		{func(c *Config) { c.Rebalance = -time.Second }, "rebalance period -1s"},
	} {
		c := ok
		tc.f(&c)
		_, err := New(c)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want ErrConfig with %q", err, tc.want)
		}
	}
	m, err := New(Config{Client: cli, Node: "n1", Addrs: []string{"10.0.0.50", "fd00::50"}, TTL: 2500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if m.ttl != 3*time.Second || m.margin != 750*time.Millisecond || m.check != time.Second || len(m.addrs) != 2 {
		t.Errorf("defaults: ttl %s margin %s check %s addrs %v", m.ttl, m.margin, m.check, m.addrs)
	}
	if _, ok := m.hook.(*CommandHook); !ok {
		t.Errorf("default hook %T", m.hook)
	}
}

func TestCommandHook(t *testing.T) {
	a := netip.MustParseAddr("10.0.0.50")
	h := MachineHook("eth0", 24)
	if got, want := h.Expand(h.AddArgs, a), []string{"ip", "addr", "add", "10.0.0.50/24", "dev", "eth0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("add %v, want %v", got, want)
	}
	if got, want := h.Expand(h.AnnounceArgs, a), []string{"arping", "-U", "-c", "2", "-I", "eth0", "10.0.0.50"}; !reflect.DeepEqual(got, want) {
		t.Errorf("announce %v, want %v", got, want)
	}
	l := LoopbackHook()
	if got, want := l.Expand(l.DelArgs, netip.MustParseAddr("fd00::1")), []string{"ip", "addr", "del", "fd00::1/128", "dev", "lo"}; !reflect.DeepEqual(got, want) {
		t.Errorf("del %v, want %v", got, want)
	}

	// The commands run, without a shell, and a failure names the command
	// and carries its output.
	log := filepath.Join(t.TempDir(), "log")
	add := []string{"sh", "-c", "echo add {addr}/{prefix} {iface} >>" + log}
	h = &CommandHook{AddArgs: add, DelArgs: []string{"sh", "-c", "echo del {addr} >>" + log + "; echo no such address >&2; exit 3"}, Iface: "eth1"}
	if err := h.Add(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	err := h.Del(context.Background(), a)
	if !errors.Is(err, ErrHook) || !strings.Contains(err.Error(), "exit status 3: no such address") || !strings.Contains(err.Error(), "echo del 10.0.0.50") {
		t.Errorf("del: %v", err)
	}
	b, _ := os.ReadFile(log)
	if string(b) != "add 10.0.0.50/32 eth1\ndel 10.0.0.50\n" {
		t.Errorf("commands ran as %q", b)
	}

	for s, want := range map[string]string{
		"ip addr add {addr}/{bits} dev lo": "unknown placeholder {bits}",
		"ip addr add {addr/32":             "unclosed",
	} {
		if _, err := ParseCommand(s); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", s, err, want)
		}
	}
	if args, err := ParseCommand("  ip addr add {addr}/{prefix} dev {iface} "); err != nil || len(args) != 6 {
		t.Errorf("%v %v", args, err)
	}
	nh, err := NewCommandHook("ip addr add {addr}/{prefix} dev {iface}", "ip addr del {addr}/{prefix} dev {iface}", "arping -U -c 1 -I {iface} {addr}", "eth0", 24)
	if err != nil || !reflect.DeepEqual(nh.Expand(nh.AnnounceArgs, a), []string{"arping", "-U", "-c", "1", "-I", "eth0", "10.0.0.50"}) {
		t.Errorf("NewCommandHook: %+v %v", nh, err)
	}
	for _, bad := range [][2]string{{"", "ip addr del {addr}"}, {"ip addr add {addr}", ""}, {"ip addr add {nope}", "ip addr del {addr}"}} {
		if _, err := NewCommandHook(bad[0], bad[1], "", "", 0); !errors.Is(err, ErrConfig) {
			t.Errorf("NewCommandHook(%q, %q): %v", bad[0], bad[1], err)
		}
	}
}

func TestRecords(t *testing.T) {
	var h Holder
	if err := decode("k", []byte(`{"v":1,"node":"n1","addr":"10.0.0.50"}`), &h); err != nil || h.Node != "n1" {
		t.Errorf("%+v %v", h, err)
	}
	for _, b := range []string{`{"v":2,"node":"n1"}`, `{"node":"n1"}`, `not json`} {
		if err := decode("k", []byte(b), &h); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: %v", b, err)
		}
	}
	for key, want := range map[string][2]string{
		KeyPrefix + "addr/10.0.0.50": {addrDir, "10.0.0.50"},
		KeyPrefix + "node/n1":        {nodeDir, "n1"},
	} {
		if d, n, ok := splitKey(KeyPrefix, key); !ok || d != want[0] || n != want[1] {
			t.Errorf("%s: %s %s %v", key, d, n, ok)
		}
	}
	for _, key := range []string{KeyPrefix + "addr/", KeyPrefix + "other/x", "/weft/vip/v2/addr/1.2.3.4"} {
		if _, _, ok := splitKey(KeyPrefix, key); ok {
			t.Errorf("%s split", key)
		}
	}
}

// TestLoopbackHook runs the default hook for real where it can (root,
// with ip(8)): the address appears on lo and goes again.
func TestLoopbackHook(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs CAP_NET_ADMIN (root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip(8)")
	}
	a := netip.MustParseAddr("127.0.0.213")
	h := LoopbackHook()
	on := func() bool {
		out, err := exec.Command("ip", "-o", "addr", "show", "dev", "lo").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(out), " 127.0.0.213/32 ")
	}
	if on() {
		t.Skip("127.0.0.213 is on lo already")
	}
	ctx := context.Background()
	if err := h.Add(ctx, a); err != nil {
		t.Skipf("cannot add an address here: %v", err)
	}
	t.Cleanup(func() { _ = h.Del(ctx, a) })
	if !on() {
		t.Error("the address is not on lo after Add")
	}
	if err := h.Del(ctx, a); err != nil {
		t.Fatal(err)
	}
	if on() {
		t.Error("the address is on lo after Del")
	}
	if err := h.Del(ctx, a); !errors.Is(err, ErrHook) {
		t.Errorf("Del of an absent address: %v", err)
	}
}
