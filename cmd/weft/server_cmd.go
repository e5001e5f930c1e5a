package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/events"
	"github.com/weftfs/weft/internal/server"
)

func newServerCmd(g *globals) *cobra.Command {
	var (
		configPath string
		drives     []string
		endpoints  string
		etcdQuota  string
		logLevel   string
		nfsAddrs   []string
		svcAddrs   []string
		flagCfg    server.Config
	)
	cmd := &cobra.Command{
		Use:   "server [flags]",
		Short: "Run a weft node: drives, block service, admin API, optional etcd member",
		Long: `Run one weft node. It registers in the control plane (etcd) under a lease
— a node whose lease expires shows down — opens its drives, serves their
blocks over gRPC and serves the admin API over HTTP. SIGTERM or SIGINT stops
it gracefully: it stops serving, leaves the cluster (the lease is revoked,
so it shows down at once) and closes its drives.

The control plane is either an external etcd cluster (--etcd-endpoints) or
an etcd member embedded in this node (--etcd-embed, with --data-dir and the
member's URLs; --etcd-initial-cluster lists all founding members).

Security: --pki DIR holds the cluster's CA bundle (ca.crt) and this node's
certificate and key (node-NAME.crt, node-NAME.key): every connection the
node serves or makes is then mutual TLS, the etcd URLs are https://, and
etcd's authentication admits only the cluster's identities. Make the
files with weft cluster init (the first node) or weft cert issue --node
NAME --host ADDR (every other). Without --pki the node refuses to start,
unless --insecure: plain text, nobody authenticated, loudly logged; for
experiments only. See docs/admin-guide.md, "Certificates".

A drive is a directory: PATH[:CLASS[:POOL[:SIZE]]], class nvme, ssd
(default) or hdd, pool "default" unless named. SIZE caps the bytes the drive
holds (64MiB, 10G, 1.5TiB; K/M/G/T and KiB… are powers of 1024, KB… of 1000);
without it the drive has its whole file system. Give a SIZE when several
drives share one file system, whose free space would otherwise count once
per drive. On first use an empty directory is formatted with an identity
file; a directory of another cluster, of another node, or of a newer format
is refused. Drives added while the node runs ("weft drive add") are
remembered in --data-dir/added-drives.json and opened at startup after the
--drive ones (a drive in both is opened once, as --drive says).

Settings may come from a YAML file (--config); flags given on the command
line override it. Keys: name, data_dir, grpc_addr, admin_addr, lease_ttl,
default_protection, usage_interval, drives (list of {path, class, pool,
capacity}),
etcd {endpoints, embed, client_url, peer_url, initial_cluster, token},
pki_dir, insecure, nfs {listen, addresses, port, address_ttl, iface,
prefix, hook_add, hook_del, hook_announce, link_iface, link_check}.

NFS: --nfs HOST:PORT (repeatable, or comma-separated) makes the node an
NFSv3 gateway on each address: MOUNT and NFS on the one port, for every
client that reaches it (clients name both ports, e.g. libnfs's
nfs://HOST/?nfsport=PORT&mountport=PORT&version=3&auto-traverse-mounts=0).
It serves the exports of weft nfs export (the whole namespace, "/", while
none is configured), with the permission checks of a mount and root
squashed unless an export says otherwise; NFS itself is not encrypted, so
serve it on networks you trust. weft nfs status shows what every node serves. See
docs/admin-guide.md, "NFS gateway".

NFS service addresses: --nfs-address IP[,IP] makes the node a candidate for
each address; every node given the same addresses is one. The holder of an
address (an etcd lease of --nfs-address-ttl, 3s) puts it on the machine and
serves NFS on it at --nfs-port (2049); it stops serving before its lease can
expire when it cannot renew it (self-fencing), gives it up when its public
link check fails, and hands it over at once when it stops. Another node
takes it over within about the TTL; a node that comes back does not take an
address back while another serves it. How the address moves:
  --nfs-iface IFACE [--nfs-prefix N]   ip addr add ADDR/N dev IFACE, then a
                                       gratuitous ARP (arping -U), and the
                                       link check of IFACE (up, carrier)
  --nfs-hook-add CMD --nfs-hook-del CMD [--nfs-hook-announce CMD]
                                       commands of your own, no shell, with
                                       {addr}, {prefix} and {iface} filled in
  (neither)                            127.0.0.0/8 addresses only: local
                                       already, nothing to move
--nfs-link-iface IFACE or --nfs-link-check CMD (exit 0: up) sets the public
link check apart from the hook. A node with service addresses and no --nfs
is a gateway too. See docs/admin-guide.md, "NFS service addresses and
failover".`,
		Example: `  # a one-node cluster with its own etcd member
  weft cluster init --pki /etc/weft/pki --name n1 --host 10.0.0.1
  weft server --name n1 --pki /etc/weft/pki --data-dir /var/lib/weft --etcd-embed \
      --drive /mnt/nvme0:nvme:fast --drive /mnt/sdb:hdd:capacity

  # two drives sharing one file system, 500 GiB each
  weft server --name n2 --pki /etc/weft/pki --etcd-endpoints https://10.0.0.1:2379 \
      --drive /srv/weft/d0:hdd:default:500GiB --drive /srv/weft/d1:hdd:default:500GiB

  # a node of a cluster with an external etcd
  weft server --name n4 --pki /etc/weft/pki --etcd-endpoints https://10.0.0.1:2379,https://10.0.0.2:2379 \
      --grpc-addr 10.0.0.4:7070 --admin-addr 10.0.0.4:7080 --drive /mnt/d0

  # a node that is also an NFS gateway on its public address
  weft server --name n5 --pki /etc/weft/pki --etcd-endpoints https://10.0.0.1:2379 \
      --grpc-addr 10.0.0.5:7070 --admin-addr 10.0.0.5:7080 --drive /mnt/d0 --nfs 10.0.0.5:2049

  # one of several gateways sharing the service address 10.0.0.50 on eth0
  weft server --name n6 --pki /etc/weft/pki --etcd-endpoints https://10.0.0.1:2379 \
      --grpc-addr 10.0.0.6:7070 --admin-addr 10.0.0.6:7080 --drive /mnt/d0 \
      --nfs-address 10.0.0.50 --nfs-iface eth0 --nfs-prefix 24

  weft server --config /etc/weft/node.yaml`,
		Args: exactArgs(0, "no arguments (drives are given with --drive)"),
		RunE: func(c *cobra.Command, _ []string) error {
			cfg := server.Config{}
			if configPath != "" {
				var err error
				if cfg, err = server.LoadConfig(configPath); err != nil {
					return err
				}
			}
			f := c.Flags()
			set := func(name string, apply func()) {
				if f.Changed(name) {
					apply()
				}
			}
			set("name", func() { cfg.Name = flagCfg.Name })
			set("data-dir", func() { cfg.DataDir = flagCfg.DataDir })
			set("grpc-addr", func() { cfg.GRPCAddr = flagCfg.GRPCAddr })
			set("admin-addr", func() { cfg.AdminAddr = flagCfg.AdminAddr })
			set("lease-ttl", func() { cfg.LeaseTTL = flagCfg.LeaseTTL })
			set("default-protection", func() { cfg.DefaultProtection = flagCfg.DefaultProtection })
			set("pprof", func() { cfg.Pprof = flagCfg.Pprof })
			set("repair-grace", func() { cfg.RepairGrace = flagCfg.RepairGrace })
			set("etcd-embed", func() { cfg.Etcd.Embed = flagCfg.Etcd.Embed })
			set("etcd-client-url", func() { cfg.Etcd.ClientURL = flagCfg.Etcd.ClientURL })
			set("etcd-peer-url", func() { cfg.Etcd.PeerURL = flagCfg.Etcd.PeerURL })
			set("etcd-initial-cluster", func() { cfg.Etcd.InitialCluster = flagCfg.Etcd.InitialCluster })
			set("etcd-token", func() { cfg.Etcd.Token = flagCfg.Etcd.Token })
			if f.Changed("etcd-quota") {
				if err := cfg.Etcd.Quota.UnmarshalText([]byte(etcdQuota)); err != nil {
					return usageError{fmt.Errorf("--etcd-quota: %w", err)}
				}
			}
			set("pki", func() { cfg.PKIDir = g.pki })
			set("insecure", func() { cfg.Insecure = g.insecure })
			set("nfs", func() {
				cfg.NFS.Listen = nil
				for _, a := range nfsAddrs {
					if a = strings.TrimSpace(a); a != "" {
						cfg.NFS.Listen = append(cfg.NFS.Listen, a)
					}
				}
			})
			set("nfs-address", func() {
				cfg.NFS.Addresses = nil
				for _, a := range svcAddrs {
					if a = strings.TrimSpace(a); a != "" {
						cfg.NFS.Addresses = append(cfg.NFS.Addresses, a)
					}
				}
			})
			set("nfs-port", func() { cfg.NFS.Port = flagCfg.NFS.Port })
			set("nfs-address-ttl", func() { cfg.NFS.AddressTTL = flagCfg.NFS.AddressTTL })
			set("nfs-iface", func() { cfg.NFS.Iface = flagCfg.NFS.Iface })
			set("nfs-prefix", func() { cfg.NFS.Prefix = flagCfg.NFS.Prefix })
			set("nfs-hook-add", func() { cfg.NFS.HookAdd = flagCfg.NFS.HookAdd })
			set("nfs-hook-del", func() { cfg.NFS.HookDel = flagCfg.NFS.HookDel })
			set("nfs-hook-announce", func() { cfg.NFS.HookAnnounce = flagCfg.NFS.HookAnnounce })
			set("nfs-link-iface", func() { cfg.NFS.LinkIface = flagCfg.NFS.LinkIface })
			set("nfs-link-check", func() { cfg.NFS.LinkCheck = flagCfg.NFS.LinkCheck })
			set("nfs-max-connections", func() { cfg.NFS.MaxConnections = flagCfg.NFS.MaxConnections })
			set("etcd-endpoints", func() {
				cfg.Etcd.Endpoints = nil
				for _, e := range strings.Split(endpoints, ",") {
					if e = strings.TrimSpace(e); e != "" {
						cfg.Etcd.Endpoints = append(cfg.Etcd.Endpoints, e)
					}
				}
			})
			if len(drives) > 0 {
				cfg.Drives = nil
				for _, d := range drives {
					spec, err := server.ParseDriveSpec(d)
					if err != nil {
						return usageError{err}
					}
					cfg.Drives = append(cfg.Drives, spec)
				}
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)}
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			s, err := server.Start(c.Context(), cfg, log)
			if err != nil {
				return err
			}
			return s.Wait(c.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "YAML config file (flags override it)")
	f.StringVar(&flagCfg.Name, "name", "", "node name, unique in the cluster (default: the host name)")
	f.StringVar(&flagCfg.DataDir, "data-dir", "", "directory for the node's own state (the embedded etcd member)")
	f.StringVar(&flagCfg.GRPCAddr, "grpc-addr", server.DefaultGRPCAddr, "block service listen address")
	f.StringVar(&flagCfg.AdminAddr, "admin-addr", server.DefaultAdminAddr, "admin API listen address, HTTPS with --pki (also /metrics)")
	f.StringArrayVar(&drives, "drive", nil, "a drive PATH[:CLASS[:POOL[:SIZE]]] (repeatable)")
	f.StringVar(&endpoints, "etcd-endpoints", "", "comma-separated client URLs of the etcd cluster (external, or the other embedded members)")
	f.BoolVar(&flagCfg.Etcd.Embed, "etcd-embed", false, "run an embedded etcd member in this node")
	f.StringVar(&flagCfg.Etcd.ClientURL, "etcd-client-url", "", "embedded member: client URL (default "+server.DefaultClientURL+"; http:// with --insecure)")
	f.StringVar(&flagCfg.Etcd.PeerURL, "etcd-peer-url", "", "embedded member: peer URL (default "+server.DefaultPeerURL+"; http:// with --insecure)")
	f.StringVar(&flagCfg.Etcd.InitialCluster, "etcd-initial-cluster", "", "embedded member: founding members NAME=PEERURL,… (default: this member alone)")
	f.StringVar(&flagCfg.Etcd.Token, "etcd-token", "weft", "embedded member: initial cluster token")
	f.StringVar(&etcdQuota, "etcd-quota", drive.FormatSize(etcdx.DefaultQuota), "embedded member: database quota, a size from "+drive.FormatSize(etcdx.MinQuota)+" to "+drive.FormatSize(etcdx.MaxQuota)+
		"; past it etcd refuses all writes, and small files stop going inline at half of it (give every member the same)")
	f.DurationVar(&flagCfg.LeaseTTL, "lease-ttl", server.DefaultLeaseTTL, "liveness lease TTL: a crashed node shows down after at most this long")
	f.StringVar(&flagCfg.DefaultProtection, "default-protection", server.DefaultProtection, "protection of pools created implicitly by --drive")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.BoolVar(&flagCfg.Pprof, "pprof", false, "serve Go profiles at ADMIN_ADDR/debug/pprof/")
	f.StringSliceVar(&nfsAddrs, "nfs", nil, "serve NFSv3 (and MOUNT) on HOST:PORT, e.g. 127.0.0.1:2049 (repeatable or comma-separated)")
	f.StringSliceVar(&svcAddrs, "nfs-address", nil, "NFS service addresses (IPs) this node is a candidate for, served at --nfs-port by their holder (repeatable or comma-separated)")
	f.IntVar(&flagCfg.NFS.Port, "nfs-port", server.DefaultNFSPort, "the NFS service addresses' port")
	f.DurationVar(&flagCfg.NFS.AddressTTL, "nfs-address-ttl", 3*time.Second, "the NFS service addresses' lease TTL: a dead holder's addresses move after about this long")
	f.StringVar(&flagCfg.NFS.Iface, "nfs-iface", "", "put the service addresses on this interface (ip addr add, arping -U) and check its link")
	f.IntVar(&flagCfg.NFS.Prefix, "nfs-prefix", 0, "the service addresses' prefix length on --nfs-iface (default: /32 or /128)")
	f.StringVar(&flagCfg.NFS.HookAdd, "nfs-hook-add", "", `command that puts a service address on this machine, e.g. "ip addr add {addr}/{prefix} dev {iface}"`)
	f.StringVar(&flagCfg.NFS.HookDel, "nfs-hook-del", "", `command that takes it off, e.g. "ip addr del {addr}/{prefix} dev {iface}"`)
	f.StringVar(&flagCfg.NFS.HookAnnounce, "nfs-hook-announce", "", `command run after the add, e.g. "arping -U -c 2 -I {iface} {addr}"`)
	f.StringVar(&flagCfg.NFS.LinkIface, "nfs-link-iface", "", "the public link check: this interface must be up with a carrier (default: --nfs-iface)")
	f.StringVar(&flagCfg.NFS.LinkCheck, "nfs-link-check", "", `the public link check: a command that must exit 0, e.g. "ping -c 1 -W 1 10.0.0.1"`)
	f.IntVar(&flagCfg.NFS.MaxConnections, "nfs-max-connections", 0, "client connections each NFS address holds open; more are closed at once (default 1024)")
	f.DurationVar(&flagCfg.RepairGrace, "repair-grace", events.DefaultRepairGrace, "how long a drive may be down before a repair job starts by itself")
	return cmd
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print weft's version",
		Args:  exactArgs(0, "no arguments"),
		Run: func(c *cobra.Command, _ []string) {
			fmt.Fprintf(c.OutOrStdout(), "weft %s\n", server.Version)
		},
	}
}
