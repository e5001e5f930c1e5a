package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
)

func newPoolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "List and create storage pools",
		Long: `A pool is a named set of drives (a tier) with a default protection:
mirror:N (N copies) or ec:K+M (K data and M parity units per stripe).
A drive joins a pool when it is added (weft server --drive PATH:CLASS:POOL,
or weft drive add NODE PATH --pool POOL).`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List pools with protection, drives and capacity",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).Pools, func(w io.Writer, pools []cluster.Pool) error {
				t := newTable(w, "NAME", "PROTECTION", "DRIVES", "UP", "USED", "FREE", "SIZE", "USE%")
				for _, p := range pools {
					t.row(p.Name, p.Protection, strconv.Itoa(p.Drives), strconv.Itoa(p.DrivesUp), humanBytes(p.UsedBytes),
						humanBytes(p.FreeBytes), humanBytes(p.TotalBytes), percent(p.TotalBytes-p.FreeBytes, p.TotalBytes))
				}
				return t.flush()
			})
		},
	}
	var protection string
	create := &cobra.Command{
		Use:     "create NAME --protection SPEC",
		Short:   "Create a pool",
		Example: "  weft pool create fast --protection ec:4+2\n  weft pool create archive --protection mirror:3",
		Args:    exactArgs(1, "one pool name"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			p, err := cl.CreatePool(c.Context(), args[0], protection)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), p)
			}
			fmt.Fprintf(c.OutOrStdout(), "pool %s created with protection %s\n", p.Name, p.Protection)
			return nil
		},
	}
	create.Flags().StringVar(&protection, "protection", "ec:4+2", "default protection of the pool's files: mirror:N or ec:K+M")
	cmd.AddCommand(list, create)
	return cmd
}
