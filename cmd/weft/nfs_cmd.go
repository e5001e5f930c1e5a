package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
)

func newNFSCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nfs",
		Short: "Configure the NFS gateways' exports and watch what they serve",
		Long: `A node run with weft server --nfs HOST:PORT (or every node of weft local up
--nfs) is an NFSv3 gateway: it serves MOUNT and NFS on that port, over the
same namespace as every mount, with the same permission checks.

What it serves is the cluster's exports configuration, one list for every
gateway: each export is a directory of the namespace, the clients allowed
to mount it (IPs or CIDRs; any when none is given), read-only or
read-write, and whether root is squashed (the default) and to whom. While
no export is configured the gateways export the whole namespace, "/", to
any client, read-write, root squashed to 65534:65534. Every gateway
applies a change within a second or so (weft nfs status shows the version
each applies).`,
		Example: `  weft nfs export add /projects --clients 10.0.0.0/24,10.0.1.7
  weft nfs export add /archive --read-only
  weft nfs export list
  weft nfs export remove /archive
  weft nfs status`,
	}
	cmd.AddCommand(newNFSExportCmd(g), newNFSStatusCmd(g))
	return cmd
}

func newNFSExportCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Add, remove and list the exported directories",
		Example: `  weft nfs export add /projects --clients 10.0.0.0/24
  weft nfs export list --json`,
	}
	var (
		clients        []string
		readOnly       bool
		noSquash       bool
		syncW          bool
		anonUID, anonG uint32
	)
	add := &cobra.Command{
		Use:   "add PATH",
		Short: "Export directory PATH of the namespace",
		Long: `Exports PATH, a directory of the namespace given as an absolute path
("/" is the whole namespace; /projects is the directory a mount shows as
MOUNTPOINT/projects). The directory must exist when a client mounts it.

--clients limits the clients that may mount it to those IPs and CIDRs
(any client without it). --read-only refuses every change through the
export. Root (uid 0) is squashed to --anon-uid:--anon-gid (65534:65534,
nobody:nogroup, unless given) unless --no-root-squash lets it act as root.
--sync makes every write durable before its reply (answered FILE_SYNC):
clients that do not write again what they wrote UNSTABLE when a gateway
fails over (libnfs: nfs-cp, nfs-cat) need it not to lose those writes;
kernel clients do without it.

A path exported already is refused: remove it first, then add it with the
new options. The first export added replaces the default export of "/".`,
		Example: `  weft nfs export add /projects --clients 10.0.0.0/24,10.0.1.7
  weft nfs export add /archive --read-only
  weft nfs export add / --clients 127.0.0.1 --no-root-squash
  weft nfs export add /scratch --anon-uid 1000 --anon-gid 1000
  weft nfs export add /ingest --sync          # for libnfs clients behind a service address`,
		Args: exactArgs(1, "the exported directory's PATH"),
		RunE: func(c *cobra.Command, args []string) error {
			e := cluster.NFSExport{Path: args[0], ReadOnly: readOnly, NoRootSquash: noSquash, AnonUID: anonUID, AnonGID: anonG, Sync: syncW}
			for _, cl := range clients {
				if cl = strings.TrimSpace(cl); cl != "" {
					e.Clients = append(e.Clients, cl)
				}
			}
			f := c.Flags()
			for _, name := range []string{"anon-uid", "anon-gid"} {
				if v, _ := f.GetUint32(name); f.Changed(name) && v == 0 {
					return usageError{fmt.Errorf("--%s 0: the squashed identity cannot be root; to let root act as root, use --no-root-squash", name)}
				}
			}
			if noSquash && (f.Changed("anon-uid") || f.Changed("anon-gid")) {
				return usageError{fmt.Errorf("--anon-uid/--anon-gid set the identity root is squashed to, and --no-root-squash turns squashing off: give one or the other")}
			}
			if err := e.Validate(); err != nil {
				return usageError{err}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			l, err := cl.AddNFSExport(c.Context(), e)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), l)
			}
			return printNFSExports(c.OutOrStdout(), l)
		},
	}
	af := add.Flags()
	af.StringSliceVar(&clients, "clients", nil, "IPs or CIDRs allowed to mount it, comma-separated (default: any client)")
	af.BoolVar(&readOnly, "read-only", false, "refuse every change through this export")
	af.BoolVar(&noSquash, "no-root-squash", false, "let uid 0 act as root (by default root is squashed to the anonymous identity)")
	af.BoolVar(&syncW, "sync", false, "make every write durable before its reply (FILE_SYNC): for clients that do not resend uncommitted writes after a failover")
	af.Uint32Var(&anonUID, "anon-uid", 0, "uid root is squashed to (default 65534)")
	af.Uint32Var(&anonG, "anon-gid", 0, "gid root is squashed to (default 65534)")
	remove := &cobra.Command{
		Use:   "remove PATH",
		Short: "Stop exporting PATH",
		Long: `Removes the export of PATH; each gateway applies the change to the
requests that follow it. Removing the last export brings back the
default export of "/".`,
		Example: `  weft nfs export remove /archive`,
		Args:    exactArgs(1, "the exported directory's PATH"),
		RunE: func(c *cobra.Command, args []string) error {
			if err := (cluster.NFSExport{Path: args[0]}).Validate(); err != nil {
				return usageError{err}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			l, err := cl.RemoveNFSExport(c.Context(), args[0])
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), l)
			}
			return printNFSExports(c.OutOrStdout(), l)
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the exports (the default export of / while none is configured)",
		Long: `Prints the exports configuration's version and a table of the exports:
PATH, the CLIENTS allowed (* for any), ACCESS (rw or ro), ROOT (squashed to
UID:GID, or root with --no-root-squash). While none is configured it shows
the default export of "/" the gateways serve. --json prints the record with
"effective", what the gateways serve.`,
		Example: `  weft nfs export list
  weft nfs export list --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			return query(g, c, (*admin.Client).NFSExports, printNFSExports)
		},
	}
	cmd.AddCommand(add, remove, list)
	return cmd
}

// printNFSExports prints the exports configuration as a table.
func printNFSExports(w io.Writer, l admin.NFSExportList) error {
	if l.Default {
		fmt.Fprintln(w, `no export configured: the gateways export "/" with the defaults`)
	} else {
		fmt.Fprintf(w, "exports version %d", l.Version)
		if !l.Updated.IsZero() {
			fmt.Fprintf(w, " (changed %s", l.Updated.Local().Format(time.DateTime))
			if l.By != "" {
				fmt.Fprintf(w, " by %s", l.By)
			}
			fmt.Fprint(w, ")")
		}
		fmt.Fprintln(w)
	}
	t := newTable(w, "PATH", "CLIENTS", "ACCESS", "ROOT")
	for _, e := range l.Effective {
		clients := "*"
		if len(e.Clients) > 0 {
			clients = strings.Join(e.Clients, ",")
		}
		access := "rw"
		if e.ReadOnly {
			access = "ro"
		}
		if e.Sync {
			access += ",sync"
		}
		t.row(e.Path, clients, access, rootCol(e))
	}
	return t.flush()
}

// rootCol says what root is on export e.
func rootCol(e cluster.NFSExport) string {
	if e.NoRootSquash {
		return "root"
	}
	id := func(v uint32) string {
		if v == 0 {
			return "65534"
		}
		return strconv.FormatUint(uint64(v), 10)
	}
	return "squashed to " + id(e.AnonUID) + ":" + id(e.AnonGID)
}

func newNFSStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show what every node's NFS gateway serves: addresses, clients, ops/s",
		Long: `Asks every node that is up for its NFS gateway and prints up to four tables:

  addresses the NFS service addresses (weft server --nfs-address) held:
            the node serving each, since when, and the holding's epoch
            (every move raises it); a free address is not listed

  gateways  per node: the addresses it serves, the exports version it
            applies, its clients and its operations per second (over the
            last 10 seconds); a node without a gateway shows "-"
  clients   per node: each client's address, the address it reached, its
            operations and when it was last seen, most recent first
  ops       per node and procedure: ops/s, the operations and errors since
            the gateway started, and their mean time in milliseconds

A node that does not answer is named on stderr. --json prints the nodes'
answers as they are.`,
		Example: `  weft nfs status
  weft nfs status --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			s, err := cl.NFSStatus(c.Context())
			if err != nil {
				return err
			}
			for _, e := range s.Errors {
				fmt.Fprintln(c.ErrOrStderr(), "weft: "+e)
			}
			if g.json {
				return printJSON(c.OutOrStdout(), s)
			}
			return printNFSStatus(c.OutOrStdout(), s, time.Now())
		},
	}
}

// printNFSStatus prints the gateways, their clients and their operations.
func printNFSStatus(w io.Writer, s admin.NFSStatus, now time.Time) error {
	if len(s.Addresses) > 0 {
		t := newTable(w, "SERVICE ADDRESS", "NODE", "SINCE", "EPOCH")
		for _, a := range s.Addresses {
			t.row(a.Addr, a.Node, a.Since.Local().Format(time.DateTime)+" ("+ago(now, a.Since)+")", strconv.FormatInt(a.Epoch, 10))
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	t := newTable(w, "NODE", "ADDRESS", "EXPORTS", "CLIENTS", "OPS/S")
	for _, n := range s.Nodes {
		if !n.Gateway {
			t.row(n.Node, "-", "-", "-", "-")
			continue
		}
		var rate float64
		for _, o := range n.Ops {
			rate += o.PerSecond
		}
		addrs := "(none)"
		if len(n.Listeners) > 0 {
			addrs = strings.Join(n.Listeners, ",")
		}
		ev := "default"
		if n.ExportsVersion > 0 {
			ev = "v" + strconv.FormatUint(n.ExportsVersion, 10)
		}
		t.row(n.Node, addrs, ev, strconv.Itoa(len(n.Clients)), fmtFloat(rate, 1))
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, n := range s.Nodes {
		if n.RefusedConns > 0 {
			fmt.Fprintf(w, "node %s refused %d client connections at its --nfs-max-connections: raise it, or find the client opening connections in a loop\n", n.Node, n.RefusedConns)
		}
	}
	var clients, ops int
	for _, n := range s.Nodes {
		clients += len(n.Clients)
		ops += len(n.Ops)
	}
	if clients > 0 {
		fmt.Fprintln(w)
		t = newTable(w, "NODE", "CLIENT", "ADDRESS", "OPS", "LAST SEEN")
		for _, n := range s.Nodes {
			for _, c := range n.Clients {
				t.row(n.Node, c.Addr, c.Listener, strconv.FormatUint(c.Ops, 10), ago(now, c.LastSeen))
			}
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if ops > 0 {
		fmt.Fprintln(w)
		t = newTable(w, "NODE", "PROCEDURE", "OPS/S", "OPS", "ERRORS", "AVG MS")
		for _, n := range s.Nodes {
			for _, o := range n.Ops {
				avg := "-"
				if o.Count > 0 {
					avg = fmtFloat(1000*o.Seconds/float64(o.Count), 2)
				}
				t.row(n.Node, o.Procedure, fmtFloat(o.PerSecond, 1), strconv.FormatUint(o.Count, 10), strconv.FormatUint(o.Errors, 10), avg)
			}
		}
		return t.flush()
	}
	return nil
}

// ago says how long before now t was, in whole seconds ("-" for never).
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return strconv.FormatInt(int64(math.Max(0, now.Sub(t).Seconds())), 10) + "s ago"
}
