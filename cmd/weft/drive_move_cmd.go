package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/cluster"
)

func newDriveMoveCmd(g *globals) *cobra.Command {
	var pool string
	cmd := &cobra.Command{
		Use:   "move DRIVE --pool POOL",
		Short: "Move a drive to another pool (its data is drained off first)",
		Long: `Move drive DRIVE into pool POOL while the cluster serves. The drive becomes
draining — it takes no new blocks and keeps serving reads — and a drain job
moves every unit it holds to the other drives of its current pool. When it
is empty it joins POOL, ready, and new stripes of POOL's files may go to it.
Watch it with weft drive list (STATUS "draining→POOL", BLOCKS counting down)
or weft job view JOB --watch.

The drive's pool is kept in the control plane, not in the node's flags: a
node restarted during or after the move with the old pool in its --drive
flags keeps the drive where the move put it.

Refused when POOL does not exist, has a class and the drive is of another,
or when the drive's pool would keep fewer drives than its protection needs.
"weft drive resume DRIVE" cancels a move that has not finished; moving a
drive back to the pool it is leaving does too.`,
		Example: `  weft drive move d5 --pool capacity
  weft drive move d5 --pool capacity --json`,
		Args: exactArgs(1, "one drive id (e.g. d5)"),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := cluster.ParseDriveID(args[0])
			if err != nil {
				return usageError{err}
			}
			if pool == "" {
				return usageError{fmt.Errorf("weft drive move %s: name the pool to move it to with --pool (see weft pool list)", args[0])}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			r, err := cl.MoveDrive(c.Context(), id, pool)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), r)
			}
			if r.Drive.MoveTo == "" {
				fmt.Fprintf(c.OutOrStdout(), "drive %s stays in pool %s: its move was cancelled (status %s)\n", r.Drive.ID, r.Drive.Pool, r.Drive.Status)
				return nil
			}
			fmt.Fprintf(c.OutOrStdout(), "drive %s on %s is draining out of pool %s; drain job %d empties it, then it joins pool %s (weft job view %d --watch)\n",
				r.Drive.ID, r.Drive.Node, r.Drive.Pool, r.Job, r.Drive.MoveTo, r.Job)
			return nil
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "pool to move the drive to (required)")
	return cmd
}
