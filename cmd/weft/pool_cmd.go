package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
)

func newPoolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pool",
		Short: "Create, change, list and delete storage pools",
		Long: `A pool is a named set of drives (a tier) with a default protection —
mirror:N (N copies) or ec:K+M (K data and M parity units per stripe) — a
drive class it is meant for (nvme, ssd, hdd) and space thresholds HIGH,LOW
in percent of its capacity (the pool counts as full past HIGH; a move out
of it stops below LOW; default 90,70).

A file lives in exactly one pool: its units are only ever placed on that
pool's drives. A drive joins a pool when it is added (weft server --drive
PATH:CLASS:POOL, weft drive add NODE PATH --pool POOL) or moved (weft drive
move DRIVE --pool POOL); a file moves with weft file set-pool.`,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List pools with drives, class, protection, thresholds and usage",
		Long: `List every pool: its drives (up/total, not counting removed ones; "+N in"
when N drives are moving into it), class, default protection, thresholds,
weft's data on its drives that are up (USED) and their size (SIZE), how
full those drives' file systems are (USE%: what is not free, weft's data
and anything else on them — what the thresholds compare against, as in
weft drive list), and the files (inodes: files, directories, links) and
bytes the namespace keeps in it. --json prints the full records.`,
		Example: "  weft pool list\n  weft pool list --json | jq '.[] | {name, inodes}'",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).PoolViews, func(w io.Writer, pools []admin.PoolView) error {
				t := newTable(w, "NAME", "DRIVES", "CLASS", "PROTECTION", "THRESHOLDS", "USED", "SIZE", "USE%", "FILES", "BYTES")
				for _, p := range pools {
					drives := fmt.Sprintf("%d/%d", p.DrivesUp, p.Drives)
					if p.DrivesMovingIn > 0 {
						drives += fmt.Sprintf(" +%d in", p.DrivesMovingIn)
					}
					class, files, bytes := p.Class, "-", "-"
					if class == "" {
						class = "-"
					}
					if p.UsageKnown {
						files, bytes = strconv.FormatInt(p.Inodes, 10), humanBytes(p.Bytes)
					}
					t.row(p.Name, drives, class, p.Protection, fmt.Sprintf("%d,%d", p.High, p.Low), humanBytes(p.UsedBytes),
						humanBytes(p.TotalBytes), percent(p.TotalBytes-p.FreeBytes, p.TotalBytes), files, bytes)
				}
				return t.flush()
			})
		},
	}

	var spec poolFlags
	create := &cobra.Command{
		Use:   "create NAME --protection SPEC [--class CLASS] [--threshold HIGH,LOW]",
		Short: "Create a pool",
		Long: `Create pool NAME (1-63 characters of a-z, 0-9, '-', '_', '.') with a default
protection for its files, and optionally the drive class it is for and its
space thresholds. The pool starts without drives: move drives into it with
weft drive move, or add new ones with weft drive add --pool. A protection
whose stripes are wider than the cluster has drives is refused.`,
		Example: `  weft pool create fast --protection ec:4+2 --class ssd
  weft pool create capacity --protection ec:8+2 --class hdd --threshold 85,60
  weft pool create archive --protection mirror:3`,
		Args: exactArgs(1, "one pool name"),
		RunE: func(c *cobra.Command, args []string) error {
			s, err := spec.parse(c, true)
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			p, err := cl.CreatePoolSpec(c.Context(), args[0], s)
			if err != nil {
				return err
			}
			return printPool(g, c, "created", p)
		},
	}
	spec.add(create, true)

	var mspec poolFlags
	modify := &cobra.Command{
		Use:   "modify NAME [--protection SPEC] [--class CLASS] [--threshold HIGH,LOW]",
		Short: "Change a pool's protection, class or thresholds",
		Long: `Change what the flags name of pool NAME; the rest stays. A new protection
applies to stripes written from then on; existing files keep theirs until
they are rewritten (weft file set-protection PATH pool re-encodes one). A
protection wider than the pool's drives in service is refused.`,
		Example: `  weft pool modify fast --threshold 80,50
  weft pool modify capacity --protection ec:6+3
  weft pool modify default --class ssd`,
		Args: exactArgs(1, "one pool name"),
		RunE: func(c *cobra.Command, args []string) error {
			s, err := mspec.parse(c, false)
			if err != nil {
				return err
			}
			if s == (cluster.PoolSpec{}) {
				return usageError{fmt.Errorf("weft pool modify %s: nothing to change: give --protection, --class or --threshold", args[0])}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			p, err := cl.ModifyPool(c.Context(), args[0], s)
			if err != nil {
				return err
			}
			return printPool(g, c, "modified", p)
		},
	}
	mspec.add(modify, false)

	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a pool that has no drives and no files",
		Long: `Delete pool NAME. It is refused while drives are in the pool or moving to it
(move them with weft drive move, or remove them) and while the namespace
keeps files or directories in it (move them with weft file set-pool, or
delete them); the error names what is left.`,
		Example: "  weft pool delete scratch",
		Args:    exactArgs(1, "one pool name"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			if err := cl.DeletePool(c.Context(), args[0]); err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), map[string]string{"deleted": args[0]})
			}
			fmt.Fprintf(c.OutOrStdout(), "pool %s deleted\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(list, create, modify, del)
	return cmd
}

// poolFlags are the flags of pool create and modify.
type poolFlags struct {
	protection, class, threshold string
}

func (f *poolFlags) add(c *cobra.Command, create bool) {
	def, what := "ec:4+2", "default protection of the pool's files: mirror:N or ec:K+M"
	if !create {
		def, what = "", "new default protection: mirror:N or ec:K+M"
	}
	c.Flags().StringVar(&f.protection, "protection", def, what)
	c.Flags().StringVar(&f.class, "class", "", "drive class the pool is for: nvme, ssd or hdd")
	c.Flags().StringVar(&f.threshold, "threshold", "", "space thresholds HIGH,LOW in percent, 0 < LOW < HIGH <= 100 (default 90,70)")
}

// parse checks the flags' form (usage errors, exit status 2); the server
// checks them again, and against the cluster.
func (f *poolFlags) parse(c *cobra.Command, create bool) (cluster.PoolSpec, error) {
	s := cluster.PoolSpec{Protection: f.protection, Class: f.class}
	if f.class != "" && !cluster.ValidClass(f.class) {
		return s, usageError{fmt.Errorf("--class %q: want one of nvme, ssd, hdd", f.class)}
	}
	if f.threshold != "" {
		hi, lo, ok := strings.Cut(f.threshold, ",")
		h, err1 := strconv.Atoi(strings.TrimSpace(hi))
		l, err2 := strconv.Atoi(strings.TrimSpace(lo))
		if !ok || err1 != nil || err2 != nil {
			return s, usageError{fmt.Errorf("--threshold %q: want HIGH,LOW in percent, e.g. 90,70", f.threshold)}
		}
		if err := cluster.CheckThresholds(h, l); err != nil {
			return s, usageError{fmt.Errorf("--threshold: %s", strings.TrimPrefix(err.Error(), cluster.ErrInvalid.Error()+": "))}
		}
		s.High, s.Low = h, l
	}
	return s, nil
}

// printPool prints a pool record after a change.
func printPool(g *globals, c *cobra.Command, verb string, p cluster.PoolRecord) error {
	if g.json {
		return printJSON(c.OutOrStdout(), p)
	}
	class := p.Class
	if class == "" {
		class = "any"
	}
	fmt.Fprintf(c.OutOrStdout(), "pool %s %s: protection %s, class %s, thresholds %d,%d\n", p.Name, verb, p.Protection, class, p.High, p.Low)
	return nil
}
