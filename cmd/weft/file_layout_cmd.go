package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
)

func newFileSetPoolCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "set-pool PATH POOL",
		Short: "Move a file to another pool (its data is rewritten there)",
		Long: `Move the regular file PATH, on a weft mount, into pool POOL. The file's pool
changes at once (the pools' usage moves with it), and a relayout job
rewrites its stripes copy-on-write onto POOL's drives, with the file's own
protection or else POOL's. The file stays readable and writable meanwhile:
each stripe's new map is committed only if no writer changed the stripe
since it was read, else that stripe is done again. Watch it with weft job
view JOB --watch; weft file info PATH --units shows where the units are.

Refused when POOL does not exist or has no drives in service, when the
protection is wider than POOL's drives, or when it cannot keep the file's
stripe size. A handle opened before the change keeps writing new stripes
in the old layout until it is closed: run set-pool again afterwards.`,
		Example: `  weft file set-pool /mnt/weft/results/run42.h5 capacity
  weft file set-pool --json /mnt/weft/hot.db fast`,
		Args: exactArgs(2, "a path on a weft mount and a pool name"),
		RunE: func(c *cobra.Command, args []string) error {
			lin, err := weftFile("file set-pool", args[0])
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			r, err := cl.SetFilePool(c.Context(), lin, args[1])
			return printLayoutChange(g, c, args[0], r, err)
		},
	}
}

func newFileSetProtectionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "set-protection PATH PROTECTION",
		Short: "Change a file's protection (its data is re-encoded)",
		Long: `Set the protection of the regular file PATH, on a weft mount: mirror:N,
ec:K+M, or "pool" to follow its pool's protection again. The file's
attribute changes at once, and a relayout job re-encodes its stripes
copy-on-write with the new protection on its pool's drives; the file stays
readable and writable meanwhile. A stripe keeps its size (the bytes of file
it holds), so a protection whose K does not divide it into units of a
multiple of 4 KiB is refused, as is one wider than the pool's drives in
service.`,
		Example: `  weft file set-protection /mnt/weft/critical.db mirror:3
  weft file set-protection /mnt/weft/big.tar ec:8+2
  weft file set-protection /mnt/weft/big.tar pool`,
		Args: exactArgs(2, "a path on a weft mount and a protection (mirror:N, ec:K+M or pool)"),
		RunE: func(c *cobra.Command, args []string) error {
			lin, err := weftFile("file set-protection", args[0])
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			r, err := cl.SetFileProtection(c.Context(), lin, args[1])
			return printLayoutChange(g, c, args[0], r, err)
		},
	}
}

// printLayoutChange prints the answer of set-pool or set-protection.
func printLayoutChange(g *globals, c *cobra.Command, path string, r admin.FileLayoutReply, err error) error {
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(c.OutOrStdout(), r)
	}
	prot := r.Protection
	if prot == "" {
		prot = r.PoolProtection + " (the pool's)"
	}
	fmt.Fprintf(c.OutOrStdout(), "%s: pool %s, protection %s; relayout job %d rewrites its data (weft job view %d --watch)\n",
		path, r.Pool, prot, r.Job, r.Job)
	return nil
}
