package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/local"
	"github.com/weftfs/weft/internal/server"
)

func newLocalCmd(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run a whole cluster on this machine (development, tests, demos)",
		Long: `Run a weft cluster on this machine: N "weft server" processes on 127.0.0.1
ports, each with D directories as drives, with embedded etcd members in the
first three nodes (so the control plane survives the loss of one node).
Everything lives in --dir; running "weft local up" again with the same
directory brings the same cluster back with all its state.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "weft-data", "cluster directory (layout, node data, drives, logs)")

	var nodes, drives int
	var mountDir string
	var pprof bool
	var grace time.Duration
	var ttl time.Duration
	var verbose bool
	var driveSize, etcdQuota string
	var ownAddrs, cgroups bool
	var nfsOn bool
	var nfsAddrs []string
	var nfsPort int
	var nfsIface string
	up := &cobra.Command{
		Use:   "up",
		Short: "Start the local cluster and supervise it until Ctrl-C",
		Long: `Start (or restart) the local cluster in --dir, mount it at --mount
(./weft-mnt by default) and supervise it. When every node and drive is up
and the file system is mounted it prints one line starting with "ready:"
with the admin address and the mount point, and writes the address to
DIR/admin.addr (which the other weft commands read). Ctrl-C or SIGTERM
unmounts and stops every node cleanly.

The drives of a local cluster are directories on one file system, so each
would report that file system's size and free space; --drive-size gives
every drive a capacity of its own instead (its blocks may not exceed it, and
it reports it as its size). It applies on each start and may change between
starts; the drive layout (nodes, drives per node) stays as created.

A node that exits or is killed is reported and left down, as a crashed
machine would be; "weft local node start NAME" starts it again.

A new cluster gets its certificates in DIR/pki (the cluster's CA, a node
certificate per node, a client certificate for its mount, an admin
certificate for the CLI): every connection is mutual TLS and every request
authenticated. Each start issues again those that expire within 30 days.
The CLI finds them by itself when run in the directory that holds
weft-data (the default --dir); otherwise give it --pki DIR/pki with
--admin. --insecure makes a cluster without them (plain text, nobody
authenticated: any user of this machine can read and change everything),
for experiments and benchmarks; a cluster keeps what it was created with.
See docs/admin-guide.md, "Certificates".

The supervisor's control API (weft local node ...) is a unix socket only
the user who ran weft local up (and root) may use.

For network fault tests, --own-addresses gives each node of a new cluster a
loopback address of its own (127.A.B.N for node nN) and --cgroups starts
each node in a cgroup v2 of its own (root only); "weft local node list"
shows both, so that firewall rules can cut one node off (see
docs/admin-guide.md, "Partitions").

--nfs makes every node an NFSv3 gateway (weft server --nfs) on a port of
its own, on the node's address; the ports are chosen the first time and
kept in the layout. Once ready it prints a line per node, "nfs: NAME URL",
with a libnfs URL (nfs-ls, nfs-cp, nfs-cat take it), and writes "NAME
HOST:PORT" lines to DIR/nfs.addrs. The exports are weft nfs export's
("/" while none is configured); see docs/admin-guide.md, "NFS gateway".

--nfs-address IP[,IP] adds NFS service addresses (loopback addresses here,
such as 127.0.0.50): every node is a gateway and a candidate for each, the
node holding one serves it (weft server --nfs-address), and another takes
it over within seconds when that node dies. They are served at one port,
--nfs-port or a free one chosen at each start, printed as "nfs: service
ADDR URL" and written as "ADDR HOST:PORT" lines to DIR/nfs.service.addrs;
weft nfs status shows which node holds each. --nfs-iface TEMPLATE gives
each node an interface of its own for them ("{node}" is its name; make the
interfaces first, e.g. ip link add weftpub-n1 type dummy): the holder puts
the address there and gives it up when that link goes down — public link
failures on one machine. See docs/admin-guide.md,
"NFS service addresses and failover".`,
		Example: `  weft local up                          # 3 nodes x 4 drives in ./weft-data
  weft local up --nodes 3 --drives-per-node 2
  weft local up --drive-size 256MiB          # every drive holds at most 256 MiB
  weft local up --dir /tmp/c1 &  weft --admin $(cat /tmp/c1/admin.addr) --pki /tmp/c1/pki status
  weft local up --insecure --dir /tmp/bench  # no TLS: for experiments only
  weft local up --nfs --mount ""             # NFS gateways on every node, no FUSE mount
  weft local up --nfs-address 127.0.0.50     # one NFS service address that fails over`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			lvl := slog.LevelWarn
			if verbose {
				lvl = slog.LevelInfo
			}
			// 0 means "the default, or what the directory's cluster has"
			// only when the flag is absent: asked for, it is a mistake.
			if c.Flags().Changed("nodes") && (nodes < 1 || nodes > 64) {
				return usageError{fmt.Errorf("--nodes %d: a local cluster has 1 to 64 nodes", nodes)}
			}
			if c.Flags().Changed("drives-per-node") && (drives < 1 || drives > 64) {
				return usageError{fmt.Errorf("--drives-per-node %d: a node has 1 to 64 drives", drives)}
			}
			var size int64
			if driveSize != "" {
				var err error
				if size, err = drive.ParseSize(driveSize); err != nil {
					return usageError{fmt.Errorf("--drive-size: %w", err)}
				}
			}
			var quota int64
			if etcdQuota != "" {
				var err error
				if quota, err = drive.ParseSize(etcdQuota); err != nil {
					return usageError{fmt.Errorf("--etcd-quota: %w", err)}
				}
				if err := server.CheckEtcdQuota(quota); err != nil {
					return usageError{err}
				}
			}
			return local.Up(c.Context(), local.Options{
				Dir: dir, Nodes: nodes, DrivesPerNode: drives, LeaseTTL: ttl, Mount: mountDir, Pprof: pprof, RepairGrace: grace, DriveSize: size, EtcdQuota: quota,
				OwnAddresses: ownAddrs, Cgroups: cgroups, Insecure: g.insecure, NFS: nfsOn,
				NFSAddresses: nfsAddrs, NFSPort: nfsPort, NFSIface: nfsIface,
				Out: c.OutOrStdout(), Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})),
			})
		},
	}
	up.Flags().IntVar(&nodes, "nodes", 0, "number of nodes for a new cluster (default 3)")
	up.Flags().IntVar(&drives, "drives-per-node", 0, "drives per node for a new cluster (default 4)")
	up.Flags().StringVar(&driveSize, "drive-size", "", "capacity of every drive, e.g. 64MiB, 10G (default: the whole file system)")
	up.Flags().StringVar(&etcdQuota, "etcd-quota", "", "the embedded etcd members' database quota, e.g. 256MiB (default 8GiB; see weft server --etcd-quota)")
	up.Flags().DurationVar(&ttl, "lease-ttl", 0, "node liveness lease TTL (default 5s)")
	up.Flags().StringVar(&mountDir, "mount", "weft-mnt", `mount the cluster here ("" for no mount)`)
	up.Flags().DurationVar(&grace, "repair-grace", 0, "how long a drive may be down before repair starts (default 10m)")
	up.Flags().BoolVar(&pprof, "pprof", false, "serve Go profiles at each node's ADMIN_ADDR/debug/pprof/")
	up.Flags().BoolVarP(&verbose, "verbose", "v", false, "log the supervisor's actions")
	up.Flags().BoolVar(&ownAddrs, "own-addresses", false, "give each node of a new cluster its own loopback address (127.A.B.N)")
	up.Flags().BoolVar(&cgroups, "cgroups", false, "start each node in a cgroup v2 of its own (root; for firewall rules)")
	up.Flags().BoolVar(&nfsOn, "nfs", false, "make every node an NFSv3 gateway on a port of its own (printed as a libnfs URL)")
	up.Flags().StringSliceVar(&nfsAddrs, "nfs-address", nil, "NFS service addresses that fail over between the nodes, loopback here (e.g. 127.0.0.50)")
	up.Flags().IntVar(&nfsPort, "nfs-port", 0, "the NFS service addresses' port (default: a free one)")
	up.Flags().StringVar(&nfsIface, "nfs-iface", "", `each node's interface for the service addresses, "{node}" its name (e.g. weftpub-{node}, made beforehand): the holder puts them there and holds them only while its link is up`)

	down := &cobra.Command{
		Use:   "down",
		Short: "Stop the local cluster started by `weft local up` in --dir",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := local.Down(dir, 90*time.Second); err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), "stopped")
			return nil
		},
	}

	node := &cobra.Command{
		Use:   "node",
		Short: "List, start, stop or kill the node processes of a running local cluster",
		Long: `Control the node processes of a running "weft local up": "kill" sends
SIGKILL (a crash: the node shows down once its lease expires), "stop" sends
SIGTERM (a clean shutdown: it shows down at once), "start" starts it again.`,
		Example: "  weft local node list\n  weft local node kill n2\n  weft local node start n2",
	}
	nodeList := &cobra.Command{
		Use:   "list",
		Short: "List the supervised node processes",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			ctl, err := local.Dial(dir)
			if err != nil {
				return err
			}
			states, err := ctl.Nodes(c.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), states)
			}
			nfsOn := slices.ContainsFunc(states, func(s local.NodeState) bool { return s.NFSAddr != "" })
			header := []string{"NAME", "PROCESS", "PID", "ADMIN", "GRPC", "CGROUP", "LOG"}
			if nfsOn {
				header = slices.Insert(header, 5, "NFS")
			}
			t := newTable(c.OutOrStdout(), header...)
			for _, s := range states {
				state := "running"
				if !s.Running {
					state = "stopped"
					if s.Exit != "" {
						state = s.Exit
					}
				}
				cg := s.Cgroup
				if cg == "" {
					cg = "-"
				}
				row := []string{s.Name, state, strconv.Itoa(s.PID), s.AdminAddr, s.GRPCAddr, cg, s.Log}
				if nfsOn {
					row = slices.Insert(row, 5, s.NFSAddr)
				}
				t.row(row...)
			}
			return t.flush()
		},
	}
	var startEnv []string
	act := func(verb, short string) *cobra.Command {
		return &cobra.Command{
			Use:   verb + " NAME",
			Short: short,
			Args:  exactArgs(1, "one node name (e.g. n2)"),
			RunE: func(c *cobra.Command, args []string) error {
				ctl, err := local.Dial(dir)
				if err != nil {
					return err
				}
				fn := map[string]func() error{
					"start": func() error { return ctl.StartEnv(c.Context(), args[0], startEnv...) },
					"stop":  func() error { return ctl.Stop(c.Context(), args[0]) },
					"kill":  func() error { return ctl.Kill(c.Context(), args[0]) },
				}[verb]
				if err := fn(); err != nil {
					return err
				}
				fmt.Fprintf(c.OutOrStdout(), "node %s: %s done\n", args[0], verb)
				return nil
			},
		}
	}
	start := act("start", "Start a stopped node process")
	start.Flags().StringArrayVar(&startEnv, "env", nil, "add KEY=VALUE to the node's environment for this run (repeatable), e.g. WEFT_FAILPOINTS=drive/put-before-sync=crash")
	start.Example = "  weft local node start n2\n  weft local node start n2 --env WEFT_FAILPOINTS='server/drain-before-ack=crash'"
	node.AddCommand(nodeList,
		start,
		act("stop", "Stop a node process gracefully (SIGTERM)"),
		act("kill", "Kill a node process (SIGKILL), as a crash would"))
	cmd.AddCommand(up, down, node)
	return cmd
}
