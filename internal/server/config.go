package server

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/events"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("server: bad configuration")

// Config is a node's configuration, from flags or a YAML file (the yaml
// names are the file's keys).
type Config struct {
	// Name is the node name, unique in the cluster.
	Name string `yaml:"name"`
	// DataDir holds the node's own state (the embedded etcd member).
	DataDir string `yaml:"data_dir"`
	// GRPCAddr is the block service's listen address (host:port).
	GRPCAddr string `yaml:"grpc_addr"`
	// AdminAddr is the admin HTTP API's listen address (host:port).
	AdminAddr string `yaml:"admin_addr"`
	// Drives are the node's drives.
	Drives []DriveSpec `yaml:"drives"`
	// Etcd says where the control plane is.
	Etcd EtcdConfig `yaml:"etcd"`
	// LeaseTTL is how long after its last renewal a silent node shows down.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// DefaultProtection is the protection of pools created implicitly by a
	// drive naming a pool that does not exist yet.
	DefaultProtection string `yaml:"default_protection"`
	// UsageInterval is how often drive usage and health are published.
	UsageInterval time.Duration `yaml:"usage_interval"`
	// Pprof serves Go profiles under /debug/pprof/ on the admin address.
	Pprof bool `yaml:"pprof"`
	// RepairGrace is how long a drive may be down before a repair job
	// starts by itself (events.DefaultRepairGrace).
	RepairGrace time.Duration `yaml:"repair_grace"`
	// PKIDir holds the cluster's trust bundle (ca.crt) and this node's
	// certificate and key (node-NAME.crt, node-NAME.key): weft cluster
	// init or weft cert issue --node NAME make them, weft local up makes
	// them by itself. Every connection of the node is then mutual TLS
	// and every request authenticated (docs/admin-guide.md,
	// "Certificates").
	PKIDir string `yaml:"pki_dir,omitempty"`
	// Insecure serves everything in plain text and authenticates nobody:
	// anyone who reaches the node's ports, a local user included, can
	// read and change everything. Only for experiments and benchmarks;
	// it is logged loudly at every start.
	Insecure bool `yaml:"insecure,omitempty"`
	// NFS configures the node's NFS gateway; the node runs none without
	// an address to serve.
	NFS NFSConfig `yaml:"nfs,omitempty"`
}

// NFSConfig configures a node's NFS gateway (NFSRole).
type NFSConfig struct {
	// Listen are the addresses (host:port) the gateway serves from the
	// node's start, MOUNT and NFSv3 on each (--nfs).
	Listen []string `yaml:"listen,omitempty"`
	// Addresses are service addresses (IPs, --nfs-address): every node
	// configured with one is a candidate for it, and the one holding it
	// (internal/vip) serves NFS on it at Port. A node with only service
	// addresses runs a gateway too.
	Addresses []string `yaml:"addresses,omitempty"`
	// Port is the service addresses' port (--nfs-port); 0 means 2049.
	Port int `yaml:"port,omitempty"`
	// AddressTTL is the service addresses' lease TTL (--nfs-address-ttl),
	// whole seconds; 0 means vip.DefaultTTL (3 s). A dead holder's
	// addresses move about this long after its last renewal.
	AddressTTL time.Duration `yaml:"address_ttl,omitempty"`
	// Iface and Prefix put a service address on the machine's interface
	// Iface with prefix length Prefix (0: /32 or /128) and announce it by
	// a gratuitous ARP (vip.MachineHook; --nfs-iface, --nfs-prefix). With
	// HookAdd and HookDel, they fill the commands' {iface} and {prefix}.
	Iface  string `yaml:"iface,omitempty"`
	Prefix int    `yaml:"prefix,omitempty"`
	// HookAdd, HookDel and HookAnnounce are explicit commands (templates
	// with {addr}, {prefix}, {iface}; no shell) that put an address on
	// the machine, take it off and announce it (vip.NewCommandHook;
	// --nfs-hook-add, --nfs-hook-del, --nfs-hook-announce). Without them
	// or Iface, 127.0.0.0/8 addresses need no hook; others are refused.
	HookAdd      string `yaml:"hook_add,omitempty"`
	HookDel      string `yaml:"hook_del,omitempty"`
	HookAnnounce string `yaml:"hook_announce,omitempty"`
	// LinkIface is the interface whose link must be up (IFF_UP and a
	// carrier) for the node to hold service addresses (--nfs-link-iface);
	// "" means Iface. LinkCheck is a command that must exit 0 instead
	// (--nfs-link-check, e.g. "ping -c 1 -W 1 10.0.0.1"). Neither: the
	// link is taken to be up.
	LinkIface string `yaml:"link_iface,omitempty"`
	LinkCheck string `yaml:"link_check,omitempty"`
	// MaxConnections bounds the client connections each address holds
	// open (--nfs-max-connections); 0 means nfs.DefaultMaxConns (1024).
	MaxConnections int `yaml:"max_connections,omitempty"`
}

// DefaultNFSPort is the service addresses' port when none is given.
const DefaultNFSPort = 2049

// Enabled reports whether the node runs an NFS gateway.
func (c NFSConfig) Enabled() bool { return len(c.Listen) > 0 || len(c.Addresses) > 0 }

// validate checks every address, naming it and the form wanted, and fills
// the defaults.
func (c *NFSConfig) validate() error {
	if c.MaxConnections < 0 {
		return fmt.Errorf("%w: --nfs-max-connections %d: want a positive number, or 0 for the default (1024)", ErrConfig, c.MaxConnections)
	}
	seen := map[string]bool{}
	for _, a := range c.Listen {
		host, port, err := net.SplitHostPort(a)
		if err == nil {
			_, err = strconv.ParseUint(port, 10, 16)
		}
		if err != nil || (host != "" && host != "localhost" && net.ParseIP(host) == nil) {
			return fmt.Errorf("%w: --nfs %q: want HOST:PORT with an IP address, such as 127.0.0.1:2049 or 10.0.0.4:2049", ErrConfig, a)
		}
		if seen[a] {
			return fmt.Errorf("%w: --nfs %s is listed twice", ErrConfig, a)
		}
		seen[a] = true
	}
	if len(c.Addresses) == 0 {
		return nil
	}
	if c.Port == 0 {
		c.Port = DefaultNFSPort
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("%w: --nfs-port %d: want a TCP port, 1-65535", ErrConfig, c.Port)
	}
	if c.AddressTTL < 0 || c.AddressTTL%time.Second != 0 || (c.AddressTTL > 0 && c.AddressTTL < 2*time.Second) {
		return fmt.Errorf("%w: --nfs-address-ttl %s: use whole seconds, at least 2s (the default is 3s)", ErrConfig, c.AddressTTL)
	}
	if c.Prefix < 0 || c.Prefix > 128 {
		return fmt.Errorf("%w: --nfs-prefix %d: want a prefix length, 0 (the full length) to 128", ErrConfig, c.Prefix)
	}
	if (c.HookAdd == "") != (c.HookDel == "") {
		return fmt.Errorf("%w: --nfs-hook-add and --nfs-hook-del go together: give both, e.g. %q and %q", ErrConfig,
			"ip addr add {addr}/{prefix} dev {iface}", "ip addr del {addr}/{prefix} dev {iface}")
	}
	if c.LinkIface != "" && c.LinkCheck != "" {
		return fmt.Errorf("%w: --nfs-link-iface and --nfs-link-check: give one public link check, not both", ErrConfig)
	}
	hooked := c.Iface != "" || c.HookAdd != ""
	seenIP := map[string]bool{}
	for _, a := range c.Addresses {
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.Zone() != "" || ip.IsUnspecified() {
			return fmt.Errorf("%w: --nfs-address %q: want an IP address such as 10.0.0.50 or 127.0.0.50", ErrConfig, a)
		}
		if seenIP[ip.Unmap().String()] {
			return fmt.Errorf("%w: --nfs-address %s is listed twice", ErrConfig, a)
		}
		seenIP[ip.Unmap().String()] = true
		if !hooked && !ip.Unmap().IsLoopback() {
			return fmt.Errorf("%w: --nfs-address %s is not a loopback address: say how to put it on this machine, with --nfs-iface IFACE [--nfs-prefix N] or --nfs-hook-add and --nfs-hook-del", ErrConfig, a)
		}
		for _, l := range c.Listen {
			if host, port, _ := net.SplitHostPort(l); host == ip.String() && port == strconv.Itoa(c.Port) {
				return fmt.Errorf("%w: --nfs %s is also the service address %s at --nfs-port %d: a service address is served only by its holder; drop it from --nfs", ErrConfig, l, a, c.Port)
			}
		}
	}
	return nil
}

// DriveSpec is one drive: a directory, its class, its pool and optionally
// its capacity.
type DriveSpec struct {
	Path  string `yaml:"path"`
	Class string `yaml:"class"`
	Pool  string `yaml:"pool"`
	// Capacity caps the bytes the drive holds (drive.Options.Capacity);
	// 0 means the whole file system. In YAML a human size: 64MiB, 10G.
	Capacity Size `yaml:"capacity,omitempty"`
}

// Size is a number of bytes written as a human size in YAML and text
// ("64MiB", "10G", "1.5TiB"; see drive.ParseSize).
type Size int64

// UnmarshalText parses a human size; the error names the value and the
// expected form.
func (s *Size) UnmarshalText(b []byte) error {
	n, err := drive.ParseSize(string(b))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	*s = Size(n)
	return nil
}

// MarshalText formats the size so that UnmarshalText reads it back exactly.
func (s Size) MarshalText() ([]byte, error) { return []byte(drive.FormatSize(int64(s))), nil }

// EtcdConfig selects an external etcd (Endpoints only) or an embedded
// member (Embed, plus Endpoints of the other members if any).
type EtcdConfig struct {
	Endpoints      []string `yaml:"endpoints"`
	Embed          bool     `yaml:"embed"`
	ClientURL      string   `yaml:"client_url"`
	PeerURL        string   `yaml:"peer_url"`
	InitialCluster string   `yaml:"initial_cluster"`
	Token          string   `yaml:"token"`
	// Quota is an embedded member's database quota (--etcd-quota; 0:
	// etcdx.DefaultQuota). Past it etcd refuses every write until
	// compacted and defragmented; inline small files stop at half of it
	// (docs/admin-guide.md, "Small files inline"). An external etcd's is
	// its own --quota-backend-bytes.
	Quota Size `yaml:"quota,omitempty"`
}

// Defaults for unset fields.
const (
	DefaultGRPCAddr   = "127.0.0.1:7070"
	DefaultAdminAddr  = "127.0.0.1:7080"
	DefaultClientURL  = "https://127.0.0.1:2379"
	DefaultPeerURL    = "https://127.0.0.1:2380"
	DefaultLeaseTTL   = 5 * time.Second
	DefaultProtection = "ec:4+2"
	DefaultPool       = "default"
)

// LoadConfig reads a YAML config file. Unknown keys are an error, so a typo
// does not silently fall back to a default.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	return c, nil
}

// ParseDriveSpec parses PATH[:CLASS[:POOL[:SIZE]]] (class defaults to
// ssd, pool to "default", size — the drive's capacity, a human size such as
// 64MiB or 10G — to the whole file system). Empty fields take their
// default, so /mnt/d1:::10G sets only the size.
func ParseDriveSpec(s string) (DriveSpec, error) {
	parts := strings.Split(s, ":")
	if len(parts) > 4 || parts[0] == "" {
		return DriveSpec{}, fmt.Errorf("%w: --drive %q: want PATH[:CLASS[:POOL[:SIZE]]], e.g. /mnt/d1:ssd:fast or /mnt/d1:ssd:fast:500GiB", ErrConfig, s)
	}
	d := DriveSpec{Path: parts[0]}
	if len(parts) > 1 {
		d.Class = parts[1]
	}
	if len(parts) > 2 {
		d.Pool = parts[2]
	}
	if len(parts) > 3 && parts[3] != "" {
		n, err := drive.ParseSize(parts[3])
		if err != nil {
			return DriveSpec{}, fmt.Errorf("%w: --drive %q: SIZE: %w", ErrConfig, s, err)
		}
		d.Capacity = Size(n)
	}
	return d, nil
}

// Validate fills defaults and checks the configuration, naming the field and
// the fix in each error.
func (c *Config) Validate() error {
	if c.Name == "" {
		h, _ := os.Hostname()
		c.Name = strings.ToLower(strings.Split(h, ".")[0])
	}
	if !cluster.ValidName(c.Name) {
		return fmt.Errorf("%w: node name %q: use 1-63 characters of a-z, 0-9, '-', '_', '.' (--name)", ErrConfig, c.Name)
	}
	if c.GRPCAddr == "" {
		c.GRPCAddr = DefaultGRPCAddr
	}
	if c.AdminAddr == "" {
		c.AdminAddr = DefaultAdminAddr
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseTTL < 2*time.Second || c.LeaseTTL%time.Second != 0 {
		return fmt.Errorf("%w: lease TTL %s: use whole seconds, at least 2s (--lease-ttl)", ErrConfig, c.LeaseTTL)
	}
	if c.RepairGrace == 0 {
		c.RepairGrace = events.DefaultRepairGrace
	}
	if c.RepairGrace < time.Second {
		return fmt.Errorf("%w: repair grace %s: at least 1s (--repair-grace)", ErrConfig, c.RepairGrace)
	}
	if c.UsageInterval == 0 {
		c.UsageInterval = 5 * time.Second
	}
	if c.DefaultProtection == "" {
		c.DefaultProtection = DefaultProtection
	}
	if _, err := erasure.ParseProtection(c.DefaultProtection); err != nil {
		return fmt.Errorf("%w: --default-protection: %w", ErrConfig, err)
	}
	if err := c.NFS.validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range c.Drives {
		d := &c.Drives[i]
		if d.Path == "" {
			return fmt.Errorf("%w: drive %d has no path", ErrConfig, i+1)
		}
		if err := d.normalize(); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if seen[d.Path] {
			return fmt.Errorf("%w: drive %s is listed twice", ErrConfig, d.Path)
		}
		seen[d.Path] = true
	}
	if c.Etcd.Embed {
		if c.DataDir == "" {
			return fmt.Errorf("%w: an embedded etcd member needs --data-dir", ErrConfig)
		}
		if c.Etcd.ClientURL == "" {
			c.Etcd.ClientURL = c.scheme() + strings.TrimPrefix(DefaultClientURL, "https://")
		}
		if c.Etcd.PeerURL == "" {
			c.Etcd.PeerURL = c.scheme() + strings.TrimPrefix(DefaultPeerURL, "https://")
		}
	} else if len(c.Etcd.Endpoints) == 0 {
		return fmt.Errorf("%w: no control plane: pass --etcd-endpoints URL,... for an external etcd, or --etcd-embed to run a member here", ErrConfig)
	}
	if q := int64(c.Etcd.Quota); q != 0 {
		if !c.Etcd.Embed {
			return fmt.Errorf("%w: --etcd-quota %s sizes the database of an embedded member (--etcd-embed); an external etcd's is its own --quota-backend-bytes", ErrConfig, drive.FormatSize(q))
		}
		if err := CheckEtcdQuota(q); err != nil {
			return err
		}
	}
	return c.validateSecurity()
}

// CheckEtcdQuota refuses (ErrConfig) an embedded member's quota outside
// etcdx.MinQuota to etcdx.MaxQuota, naming the range and the default.
func CheckEtcdQuota(q int64) error {
	if q < etcdx.MinQuota || q > etcdx.MaxQuota {
		return fmt.Errorf("%w: --etcd-quota %s: want %s to %s (default %s); give every member the same",
			ErrConfig, drive.FormatSize(q), drive.FormatSize(etcdx.MinQuota), drive.FormatSize(etcdx.MaxQuota), drive.FormatSize(etcdx.DefaultQuota))
	}
	return nil
}

// scheme is the scheme of the etcd URLs: https with TLS, http without.
func (c *Config) scheme() string {
	if c.Insecure {
		return "http://"
	}
	return "https://"
}

// validateSecurity refuses a node without TLS material unless it is
// explicitly insecure, and URLs whose scheme does not match. Without
// --insecure a node never serves in plain text: not on a loopback
// address either, where every local user could reach it.
func (c *Config) validateSecurity() error {
	if c.Insecure && c.PKIDir != "" {
		return fmt.Errorf("%w: --insecure and --pki %s: choose one (--pki serves with TLS)", ErrConfig, c.PKIDir)
	}
	if !c.Insecure && c.PKIDir == "" {
		where := "local users of this machine could read and change everything"
		if open := c.NonLoopback(); len(open) > 0 {
			where = fmt.Sprintf("%s would be open to the network", strings.Join(open, ", "))
		}
		return fmt.Errorf("%w: node %s has no TLS material, and without it %s: "+
			"give it a certificate: weft cluster init --pki DIR --name %s --host HOST (a new cluster) or, where the cluster's CA is, weft cert issue --node %s --host HOST --out DIR; "+
			"then --pki DIR (pki_dir: in the config file). For an experiment on a machine you trust, --insecure",
			ErrConfig, c.Name, where, c.Name, c.Name)
	}
	urls := map[string]string{"--etcd-client-url": c.Etcd.ClientURL, "--etcd-peer-url": c.Etcd.PeerURL}
	for i, e := range c.Etcd.Endpoints {
		urls[fmt.Sprintf("--etcd-endpoints (#%d)", i+1)] = e
	}
	for flag, u := range urls {
		if u != "" && !strings.HasPrefix(u, c.scheme()) {
			how := "the control plane speaks https:// with TLS (or run everything --insecure)"
			if c.Insecure {
				how = "an --insecure node speaks plain http:// to the control plane"
			}
			return fmt.Errorf("%w: %s %s: want %sHOST:PORT: %s", ErrConfig, flag, u, c.scheme(), how)
		}
	}
	return nil
}

// NonLoopback returns the node's listen addresses that are not on a
// loopback interface, as "flag address".
func (c *Config) NonLoopback() []string {
	var out []string
	check := func(flag, hostport string) {
		if hostport == "" {
			return
		}
		host, _, err := net.SplitHostPort(hostport)
		if err != nil {
			host = hostport
		}
		if host == "localhost" {
			return
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			out = append(out, flag+" "+hostport)
		}
	}
	check("--grpc-addr", c.GRPCAddr)
	check("--admin-addr", c.AdminAddr)
	if c.Etcd.Embed {
		for flag, u := range map[string]string{"--etcd-client-url": c.Etcd.ClientURL, "--etcd-peer-url": c.Etcd.PeerURL} {
			if pu, err := url.Parse(u); err == nil {
				check(flag, pu.Host)
			}
		}
	}
	sort.Strings(out)
	return out
}

// foundingMembers returns the names of the embedded etcd cluster's
// founding members (Etcd.InitialCluster, or this node alone).
func (c *Config) foundingMembers() []string {
	if c.Etcd.InitialCluster == "" {
		return []string{c.Name}
	}
	var names []string
	for _, m := range strings.Split(c.Etcd.InitialCluster, ",") {
		if name, _, ok := strings.Cut(strings.TrimSpace(m), "="); ok && name != "" {
			names = append(names, name)
		}
	}
	return names
}

// normalize makes the path absolute and clean, fills the default class and
// pool, and checks class, pool name and capacity, naming the drive and the
// fix in its errors.
func (d *DriveSpec) normalize() error {
	abs, err := filepath.Abs(d.Path)
	if err != nil {
		return fmt.Errorf("drive %q: %w", d.Path, err)
	}
	d.Path = abs
	if d.Class == "" {
		d.Class = string(drive.ClassSSD)
	}
	if _, err := drive.ParseClass(d.Class); err != nil {
		return fmt.Errorf("drive %s: %w", abs, err)
	}
	if d.Pool == "" {
		d.Pool = DefaultPool
	}
	if !cluster.ValidName(d.Pool) {
		return fmt.Errorf("drive %s: pool name %q: use 1-63 characters of a-z, 0-9, '-', '_', '.'", abs, d.Pool)
	}
	if d.Capacity < 0 {
		return fmt.Errorf("drive %s: negative capacity %d; omit it for the whole file system", abs, d.Capacity)
	}
	return nil
}

// endpoints returns the etcd endpoints a node's client uses: its own member
// first, then the others.
func (c *Config) endpoints() []string {
	var eps []string
	if c.Etcd.Embed {
		eps = append(eps, c.Etcd.ClientURL)
	}
	for _, e := range c.Etcd.Endpoints {
		if e != c.Etcd.ClientURL {
			eps = append(eps, e)
		}
	}
	return eps
}
