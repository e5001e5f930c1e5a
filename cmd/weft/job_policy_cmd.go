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
high, off_hours (low on weekdays 08:00-18:00, high otherwise).`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List impact policies",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).Policies, func(w io.Writer, ps []impact.Policy) error {
				t := newTable(w, "NAME", "DEFAULT", "TIME ZONE", "WINDOWS")
				for _, p := range ps {
					var ws []string
					for _, w := range p.Windows {
						ws = append(ws, w.String())
					}
					tz := p.TimeZone
					if tz == "" {
						tz = "cluster"
					}
					t.row(p.Name, p.Default, tz, strings.Join(ws, "; "))
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
			Use:   verb + " NAME --default LEVEL [--window 'DAYS HH:MM-HH:MM LEVEL']...",
			Short: short,
			Example: `  weft job policies create nightly --default low --window "mon-fri 20:00-06:00 high" --window "sat,sun 00:00-24:00 high"
  weft job policies modify nightly --default paused --window "* 01:00-05:00 medium" --tz Europe/Paris`,
			Args: exactArgs(1, "one policy name"),
			RunE: func(c *cobra.Command, args []string) error {
				req.Name = args[0]
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
				fmt.Fprintf(c.OutOrStdout(), "policy %s: default %s, %d windows\n", p.Name, p.Default, len(p.Windows))
				return nil
			},
		}
		pc.Flags().StringVar(&req.Default, "default", "low", "level outside the windows: paused, low, medium, high")
		pc.Flags().StringArrayVar(&req.Windows, "window", nil, "a window 'DAYS HH:MM-HH:MM LEVEL [min=N] [max=N]' (repeatable)")
		pc.Flags().StringVar(&req.TimeZone, "tz", "", "time zone of the windows (default: the cluster's)")
		return pc
	}
	c.AddCommand(list, put(false), put(true))
	return c
}
