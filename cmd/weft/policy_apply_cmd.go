package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
)

// policyApplyCmd is weft policy apply: a tier job over the installed
// policy.
func policyApplyCmd(g *globals) *cobra.Command {
	var (
		dir      string
		version  uint64
		dry      bool
		priority int
		impact   string
	)
	c := &cobra.Command{
		Use:   "apply [--path DIR] [--version N] [--dry-run] [--priority N] [--policy P]",
		Short: "Run the policy's MIGRATE, DELETE and LIST rules now (a tier job)",
		Long: `Starts a tier job that applies the installed policy (or version N of
weft policy history) to the files under DIR:

  - MIGRATE rules move the files they select to their TO POOL (and
    PROTECTION) copy-on-write while clients keep reading and writing
    them. A rule with THRESHOLD(high,low) moves files only if its FROM
    POOL is above high when the job plans, taking them by WEIGHT,
    highest first, until the pool is projected at or below low; LIMIT
    keeps the target pool at or below its percentage.
  - DELETE rules delete the files they select (all their names), each
    only if the rule still matches it when its turn comes.
  - LIST rules write the paths of the files they match, one per line,
    to /.weft/lists/NAME.JOB in the file system.

A file is acted on by the first MIGRATE or DELETE rule that matches it;
weft policy test shows beforehand what the job will select. The job
scans, plans, acts and reports (weft job view ID shows each phase's
table; --dry-run stops after the plan). It runs at the low impact
policy unless --policy says otherwise, and pauses, resumes and
survives node failures like every job.

A pool that goes above its high threshold starts a tier job by itself
(a pool-threshold event; weft job events list).`,
		Example: `  weft policy apply
  weft policy apply --dry-run --path /projects
  weft policy apply --policy medium && weft job view 42 --watch`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			params := map[string]string{"path": dir}
			if version != 0 {
				params["policy"] = strconv.FormatUint(version, 10)
			}
			if dry {
				params["dry-run"] = "true"
			}
			id, err := cl.StartJob(c.Context(), admin.StartJobRequest{Type: "tier", Priority: priority, Policy: impact, Params: params})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), admin.StartJobReply{ID: id})
			}
			fmt.Fprintf(c.OutOrStdout(), "started tier job %d (weft job view %d --watch)\n", id, id)
			return nil
		},
	}
	c.Flags().StringVar(&dir, "path", "/", "apply the rules to the files under this directory only")
	c.Flags().Uint64Var(&version, "version", 0, "the policy version to apply (default: the installed one)")
	c.Flags().BoolVar(&dry, "dry-run", false, "scan and plan only: move, delete and list nothing")
	c.Flags().IntVar(&priority, "priority", 0, "job priority 1 (highest) to 10 (default: the tier type's)")
	c.Flags().StringVar(&impact, "policy", "", "impact policy: low, medium, high, off_hours or a custom one (default: the tier type's)")
	return c
}
