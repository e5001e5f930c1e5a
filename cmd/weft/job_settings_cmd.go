package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func jobSettingsCmd(g *globals) *cobra.Command {
	var (
		maxRunning, keep, lowSpace, rebalance int
		exclusive                             string
	)
	c := &cobra.Command{
		Use:   "settings [--max-running N] [--restripe-exclusive true|false] [--keep-jobs N] [--low-space-threshold PCT] [--rebalance-threshold POINTS]",
		Short: "Show or change the engine's settings: jobs at once, restripe one-at-a-time, reports kept, space thresholds",
		Long: `Show the job engine's cluster-wide settings, or change the ones given as
flags (the others keep their values). Every node applies them within a few
seconds.

  max running          jobs that may run at once (1-16, default 3); a lower
                       value pauses the lowest-priority running jobs
  restripe exclusive   run jobs of the restripe set one at a time
  keep jobs            ended jobs whose reports are kept (1-10000, default 100)
  low space threshold  percent free below which a pool turns on low-space
                       mode (0-50, default 5; 0: never): jobs that do not
                       free space pause, jobs that do (collect, treedelete)
                       run. The mode ends when every pool is back at the
                       threshold plus one point (hysteresis).
  rebalance threshold  percentage points of used space between the fullest
                       and the emptiest drive in service of a pool beyond
                       which a rebalance job starts by itself (0-50,
                       default 5; 0: never)`,
		Example: `  weft job settings
  weft job settings --max-running 2 --restripe-exclusive true
  weft job settings --low-space-threshold 10
  weft job settings --rebalance-threshold 0    # no automatic rebalance`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			st, err := cl.JobSettings(c.Context())
			if err != nil {
				return err
			}
			f := c.Flags()
			if f.NFlag() > 0 {
				changed := false
				for name, v := range map[string]struct {
					dst *int
					val int
				}{
					"max-running": {&st.MaxRunning, maxRunning}, "keep-jobs": {&st.KeepJobs, keep},
					"low-space-threshold": {&st.LowSpaceThreshold, lowSpace}, "rebalance-threshold": {&st.RebalanceThreshold, rebalance},
				} {
					if f.Changed(name) {
						*v.dst, changed = v.val, true
					}
				}
				switch exclusive {
				case "":
				case "true", "false":
					st.RestripeExclusive, changed = exclusive == "true", true
				default:
					return usageError{fmt.Errorf("--restripe-exclusive %q: want true or false", exclusive)}
				}
				if changed {
					if st, err = cl.SetJobSettings(c.Context(), st); err != nil {
						return err
					}
				}
			}
			if g.json {
				return printJSON(c.OutOrStdout(), st)
			}
			fmt.Fprintf(c.OutOrStdout(), "max running          %d\nrestripe exclusive   %v\nkeep jobs            %d\nlow space threshold  %s\nrebalance threshold  %s\n",
				st.MaxRunning, st.RestripeExclusive, st.KeepJobs, offOr(st.LowSpaceThreshold, "%d%% free"), offOr(st.RebalanceThreshold, "%d points"))
			return nil
		},
	}
	c.Flags().IntVar(&maxRunning, "max-running", 3, "jobs that may run at once (1-16)")
	c.Flags().StringVar(&exclusive, "restripe-exclusive", "", "run restripe jobs one at a time: true or false")
	c.Flags().IntVar(&keep, "keep-jobs", 100, "ended jobs whose reports are kept")
	c.Flags().IntVar(&lowSpace, "low-space-threshold", 5, "percent free below which a pool turns on low-space mode (0-50; 0: never)")
	c.Flags().IntVar(&rebalance, "rebalance-threshold", 5, "used-space spread in points within a pool that starts a rebalance (0-50; 0: never)")
	return c
}

// offOr formats a threshold: "off" for 0.
func offOr(v int, format string) string {
	if v == 0 {
		return "off"
	}
	return fmt.Sprintf(format, v)
}
