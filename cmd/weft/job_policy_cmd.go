package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/impact"
)

func jobPoliciesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "policies",
		Short: "List, create and modify impact policies",
		Long: `An impact policy says how hard a job may work, by time window: each window
names a level — paused, low (0.25-2 workers per node), medium (1-6),
high (2-16) — and within a level the workers go down when the node's CPU or
a drive's IOPS or queue depth passes the level's threshold for its class
(nvme, ssd, hdd), and back up when the load falls. Built-in: low, medium,
high, off_hours (low on weekdays 08:00-18:00, high otherwise).

Client latency: when the 99th percentile of the clients' block I/O time on
a pool, on any node, passes the policy's target, its jobs are cut within a
second, and get their workers back 3 s after every pool is under target
again. Levels low and medium have targets per drive class (low: nvme 5ms,
ssd 10ms, hdd 50ms; medium: twice those); high has none. --client-p99
replaces them for every pool and window (none: no target).`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List impact policies",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).Policies, func(w io.Writer, ps []impact.Policy) error {
				t := newTable(w, "NAME", "DEFAULT", "TIME ZONE", "CLIENT P99", "WINDOWS")
				for _, p := range ps {
					var ws []string
					for _, w := range p.Windows {
						ws = append(ws, w.String())
					}
					tz := p.TimeZone
					if tz == "" {
						tz = "cluster"
					}
					t.row(p.Name, p.Default, tz, impact.FormatClientP99(p.ClientP99), strings.Join(ws, "; "))
				}
				return t.flush()
			})
		},
	}
	put := func(update bool) *cobra.Command {
		var req admin.PolicyRequest
		verb, short := "create", "Create a custom impact policy"
		if update {
			verb, short = "modify", "Replace a custom impact policy's definition"
		}
		pc := &cobra.Command{
			Use:   verb + " NAME --default LEVEL [--window 'DAYS HH:MM-HH:MM LEVEL']... [--client-p99 DURATION|none]",
			Short: short,
			Example: `  weft job policies create nightly --default low --window "mon-fri 20:00-06:00 high" --window "sat,sun 00:00-24:00 high"
  weft job policies modify nightly --default paused --window "* 01:00-05:00 medium" --tz Europe/Paris
  weft job policies create gentle --default medium --client-p99 5ms`,
			Args: exactArgs(1, "one policy name"),
			RunE: func(c *cobra.Command, args []string) error {
				req.Name = args[0]
				if _, err := impact.ParseClientP99(req.ClientP99); err != nil {
					return usageError{fmt.Errorf("--client-p99: %w", err)}
				}
				cl, err := g.client()
				if err != nil {
					return err
				}
				p, err := cl.PutPolicy(c.Context(), req, update)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c.OutOrStdout(), p)
				}
				fmt.Fprintf(c.OutOrStdout(), "policy %s: default %s, %d windows, client p99 %s\n", p.Name, p.Default, len(p.Windows), impact.FormatClientP99(p.ClientP99))
				return nil
			},
		}
		pc.Flags().StringVar(&req.Default, "default", "low", "level outside the windows: paused, low, medium, high")
		pc.Flags().StringArrayVar(&req.Windows, "window", nil, "a window 'DAYS HH:MM-HH:MM LEVEL [min=N] [max=N]' (repeatable)")
		pc.Flags().StringVar(&req.TimeZone, "tz", "", "time zone of the windows (default: the cluster's)")
		pc.Flags().StringVar(&req.ClientP99, "client-p99", "", "client latency target for every pool, e.g. 5ms; none: no target (default: the levels' per drive class)")
		return pc
	}
	c.AddCommand(list, put(false), put(true))
	return c
}
