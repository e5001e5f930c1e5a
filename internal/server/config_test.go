package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestParseDriveSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want DriveSpec
		bad  string // substring of the error
	}{
		{in: "/d", want: DriveSpec{Path: "/d"}},
		{in: "/d:hdd", want: DriveSpec{Path: "/d", Class: "hdd"}},
		{in: "/d:hdd:slow", want: DriveSpec{Path: "/d", Class: "hdd", Pool: "slow"}},
		{in: "/d:hdd:slow:64MiB", want: DriveSpec{Path: "/d", Class: "hdd", Pool: "slow", Capacity: 64 << 20}},
		{in: "/d:::10G", want: DriveSpec{Path: "/d", Capacity: 10 << 30}},
		{in: "/d:ssd:p:", want: DriveSpec{Path: "/d", Class: "ssd", Pool: "p"}},
		{in: "/d:ssd:p:lots", bad: `"lots"`},
		{in: "/d:ssd:p:1G:x", bad: "PATH[:CLASS[:POOL[:SIZE]]]"},
		{in: ":ssd", bad: "PATH[:CLASS[:POOL[:SIZE]]]"},
	} {
		got, err := ParseDriveSpec(tc.in)
		if tc.bad != "" {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.bad) || !strings.Contains(err.Error(), tc.in) {
				t.Errorf("ParseDriveSpec(%q) = %+v, %v; want ErrConfig naming %q and the input", tc.in, got, err, tc.bad)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseDriveSpec(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestConfigCapacityYAML(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("name: n1\ndrives:\n  - {path: /a, capacity: 64MiB}\n  - {path: /b, capacity: 1.5TiB}\n  - {path: /c, capacity: 4096}\n  - {path: /d}\n")
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Size{64 << 20, 3 << 39, 4096, 0}
	for i, d := range c.Drives {
		if d.Capacity != want[i] {
			t.Errorf("drive %s: capacity %d, want %d", d.Path, d.Capacity, want[i])
		}
	}
	// The supervisor of a local cluster writes configs with yaml.Marshal:
	// they must read back the same.
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "capacity: 64MiB") {
		t.Errorf("marshalled config does not show the capacity as a size:\n%s", b)
	}
	write(string(b))
	c2, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Drives {
		if c2.Drives[i] != c.Drives[i] {
			t.Errorf("drive %d after a round trip: %+v, want %+v", i, c2.Drives[i], c.Drives[i])
		}
	}

	write("name: n1\ndrives:\n  - {path: /a, capacity: 12 parsecs}\n")
	_, err = LoadConfig(path)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "12 parsecs") || !strings.Contains(err.Error(), "64MiB") {
		t.Fatalf("LoadConfig with a bad capacity = %v; want ErrConfig naming the value and the form", err)
	}
}

// A node serves with TLS or, said explicitly, without; never by default
// in plain text, and never with URLs of the other kind.
func TestConfigSecurity(t *testing.T) {
	base := func() Config {
		return Config{Name: "n1", DataDir: "/var/lib/weft", Etcd: EtcdConfig{Embed: true}}
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		bad    []string // substrings of the error; none: valid
	}{
		{"no TLS material", func(c *Config) {}, []string{"no TLS material", "local users", "weft cluster init", "weft cert issue --node n1", "--pki", "--insecure"}},
		{"no TLS material, open address", func(c *Config) { c.AdminAddr = "0.0.0.0:7080"; c.Etcd.PeerURL = "https://10.0.0.1:2380" },
			[]string{"--admin-addr 0.0.0.0:7080", "--etcd-peer-url 10.0.0.1:2380", "open to the network"}},
		{"TLS", func(c *Config) { c.PKIDir = "/etc/weft/pki" }, nil},
		{"TLS on the network", func(c *Config) { c.PKIDir = "/etc/weft/pki"; c.GRPCAddr = "10.0.0.1:7070" }, nil},
		{"insecure", func(c *Config) { c.Insecure = true }, nil},
		{"insecure on the network", func(c *Config) { c.Insecure = true; c.GRPCAddr = "10.0.0.1:7070" }, nil},
		{"both", func(c *Config) { c.Insecure = true; c.PKIDir = "/p" }, []string{"--insecure and --pki /p"}},
		{"TLS with http", func(c *Config) { c.PKIDir = "/p"; c.Etcd.ClientURL = "http://127.0.0.1:2379" }, []string{"--etcd-client-url http://127.0.0.1:2379", "https://"}},
		{"insecure with https", func(c *Config) { c.Insecure = true; c.Etcd.Endpoints = []string{"https://10.0.0.2:2379"} }, []string{"--etcd-endpoints (#1) https://10.0.0.2:2379", "http://"}},
	} {
		c := base()
		tc.change(&c)
		err := c.Validate()
		if tc.bad == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		for _, want := range tc.bad {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v; want ErrConfig mentioning %q", tc.name, err, want)
			}
		}
	}
	c := base()
	c.PKIDir = "/p"
	if err := c.Validate(); err != nil || c.Etcd.ClientURL != "https://127.0.0.1:2379" || c.Etcd.PeerURL != "https://127.0.0.1:2380" {
		t.Fatalf("TLS defaults: %v, %+v", err, c.Etcd)
	}
	c = base()
	c.Insecure = true
	if err := c.Validate(); err != nil || c.Etcd.ClientURL != "http://127.0.0.1:2379" {
		t.Fatalf("insecure defaults: %v, %+v", err, c.Etcd)
	}
}

// An embedded member's quota is a size in YAML, within etcdx's bounds,
// and only for an embedded member.
func TestConfigEtcdQuota(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(path, []byte("name: n1\ndata_dir: /var/lib/weft\ninsecure: true\netcd: {embed: true, quota: 16GiB}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.Etcd.Quota != 16<<30 {
		t.Fatalf("quota 16GiB: %v, %d", err, c.Etcd.Quota)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"too small", Config{Name: "n1", DataDir: "/d", Insecure: true, Etcd: EtcdConfig{Embed: true, Quota: 1 << 20}}, []string{"--etcd-quota 1MiB", "64MiB to 64GiB", "default 8GiB"}},
		{"too large", Config{Name: "n1", DataDir: "/d", Insecure: true, Etcd: EtcdConfig{Embed: true, Quota: 1 << 40}}, []string{"--etcd-quota 1TiB", "64MiB to 64GiB"}},
		{"external", Config{Name: "n1", Insecure: true, Etcd: EtcdConfig{Endpoints: []string{"http://10.0.0.1:2379"}, Quota: 16 << 30}}, []string{"--etcd-quota 16GiB", "--etcd-embed", "--quota-backend-bytes"}},
	} {
		err := tc.cfg.Validate()
		for _, want := range tc.want {
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v; want ErrConfig mentioning %q", tc.name, err, want)
			}
		}
	}
}
