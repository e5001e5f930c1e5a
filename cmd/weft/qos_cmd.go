package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/qos"
)

// specHelp is the limit grammar, shared by the help texts.
const specHelp = `A limit specification is one word, no spaces:

  pool=NAME,CLASS=LIMIT[,CLASS=LIMIT...]

NAME is a pool, or * for the default of every pool that has no limit of
its own for that class. CLASS is one of
  other        client I/O: mounts and gateways
  maintenance  the jobs' I/O: repair, drain, rebalance, tier, scans, collect
  misc         everything else
LIMIT is unlimited (or inf); NIOPS (300IOPS); a byte rate (100MB/s; units
KB/s, MB/s, GB/s are decimal, KiB/s, MiB/s, GiB/s binary); or both joined
by + (300IOPS+100MB/s). A limit is for the whole cluster: the nodes
serving the pool share it by their demand, re-shared every second.`

func newQoSCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "qos",
		Short: "Limit the I/O of each class (client, maintenance, misc) per pool, and watch it",
		Long: `Quality of service keeps background work from crowding out the clients.
Every block read and write the nodes serve belongs to a class: other
(clients), maintenance (jobs) or misc. Limits in IOPS and/or MB/s can be
set per pool and class; the block services hold them before the drives,
each node its share of the cluster-wide limit. Statistics are kept
whether QoS is enabled or not (the last 60 seconds, in each node's
memory).

` + specHelp + `

While QoS holds back maintenance I/O on a node, the job throttle there
adds no workers to its jobs. weft qos stats --fine breaks the I/O down
per node, job, client, process and size class.`,
		Example: `  weft qos set pool=*,maintenance=300IOPS,other=unlimited
  weft qos enable
  weft qos show
  weft qos stats --seconds 10 --interval 5
  weft qos stats --fine --csv > io.csv`,
	}
	var replace bool
	set := &cobra.Command{
		Use:   "set SPEC...",
		Short: "Set limits (merged into the configuration; --replace replaces it)",
		Long: `Sets the limits each SPEC gives, leaving the other pools and classes as
they were (with --replace, dropping every limit not given). Setting
limits does not enable QoS: see weft qos enable. Each change is a new
version of the configuration; every node applies it within a second.

` + specHelp,
		Example: `  weft qos set pool=fast,maintenance=300IOPS,other=unlimited pool=*,maintenance=100MB/s
  weft qos set pool=fast,maintenance=unlimited    # lift the default for pool fast
  weft qos set --replace pool=*,maintenance=50MB/s`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError{fmt.Errorf("weft qos set takes one or more limit specifications such as pool=*,maintenance=300IOPS (see --help)")}
			}
			return changeQoS(c, g, admin.QoSChange{Set: args, Replace: replace})
		},
	}
	set.Flags().BoolVar(&replace, "replace", false, "drop every limit the SPECs do not give")
	enable := &cobra.Command{
		Use:   "enable [SPEC...]",
		Short: "Enforce the limits (and set those given, as weft qos set does)",
		Example: `  weft qos enable
  weft qos enable pool=*,maintenance=300IOPS`,
		RunE: func(c *cobra.Command, args []string) error {
			on := true
			return changeQoS(c, g, admin.QoSChange{Enable: &on, Set: args})
		},
	}
	disable := &cobra.Command{
		Use:   "disable",
		Short: "Stop enforcing limits (they are kept, and statistics go on)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			off := false
			return changeQoS(c, g, admin.QoSChange{Enable: &off})
		},
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "Show the configuration and each node's share of every limit",
		Long: `Prints whether QoS is enabled, the limits as they were set, and for each
node that is up its share of each limit in force (IOPS and MB/s per
second). A node that does not answer is named on stderr.`,
		Example: `  weft qos show
  weft qos show --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			s, err := cl.QoS(c.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), s)
			}
			printQoSShow(c.OutOrStdout(), s)
			for _, e := range s.Errors {
				fmt.Fprintln(c.ErrOrStderr(), "weft: "+e)
			}
			return nil
		},
	}
	stats := newQoSStatsCmd(g)
	cmd.AddCommand(set, enable, disable, show, stats)
	return cmd
}

// changeQoS checks the specifications of ch locally (a mistake is a
// usage error naming the token), applies ch and prints the result.
func changeQoS(c *cobra.Command, g *globals, ch admin.QoSChange) error {
	if len(ch.Set) > 0 {
		if _, err := qos.Parse(ch.Set); err != nil {
			return usageError{err}
		}
	}
	cl, err := g.client()
	if err != nil {
		return err
	}
	cfg, err := cl.ChangeQoS(c.Context(), ch)
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(c.OutOrStdout(), cfg)
	}
	printQoSConfig(c.OutOrStdout(), cfg)
	return nil
}

func printQoSConfig(w io.Writer, c qos.Config) {
	state := "disabled"
	if c.Enabled {
		state = "enabled"
	}
	fmt.Fprintf(w, "QoS %s, configuration version %d", state, c.Version)
	if !c.Updated.IsZero() {
		fmt.Fprintf(w, " (changed %s", c.Updated.Local().Format(time.DateTime))
		if c.By != "" {
			fmt.Fprintf(w, " by %s", c.By)
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
	specs := c.Specs()
	if len(specs) == 0 {
		fmt.Fprintln(w, "limits: none (every class unlimited in every pool)")
		return
	}
	fmt.Fprintln(w, "limits:")
	for _, s := range specs {
		fmt.Fprintln(w, "  "+s)
	}
}

func printQoSShow(w io.Writer, s admin.QoSShow) {
	printQoSConfig(w, s.Config)
	fmt.Fprintln(w)
	t := newTable(w, "NODE", "POOL", "CLASS", "IOPS SHARE", "MB/S SHARE")
	n := 0
	for _, node := range s.Nodes {
		for _, sh := range node.Shares {
			n++
			t.row(node.Node, sh.Pool, string(sh.Class), limitCol(sh.IOPS), limitCol(sh.BytesPerSec/1e6))
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "no node holds a limit (QoS disabled, or no limit applies to the pools of the nodes that answered)")
		return
	}
	_ = t.flush()
}

// limitCol prints a share, "-" for an axis not limited (raw 0).
func limitCol(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmtFloat(v, 1)
}

func fmtFloat(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
