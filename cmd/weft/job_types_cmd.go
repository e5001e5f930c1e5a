package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/job"
)

func jobTypesCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "types", Short: "List job types and change their defaults and schedules"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List job types: exclusion set, phases, default priority and policy, enabled, schedule",
		Long: `List the job types with their cluster-wide settings: the priority and impact
policy of jobs started without them, whether the type may run, and its
schedule (cron syntax, times in UTC unless it names a zone) with the next
time it fires, in this machine's local time. NEXT RUN is "-" when there is
no schedule or the type is disabled, and "due" when the time has passed
and the coordinator has yet to check (it does every 20 seconds).

With --json, each type also carries default_schedule (the type's own),
next_run, last_run, last_job and last_outcome (what the last firing did).`,
		Example: `  weft job types list
  weft job types list --json | jq '.[] | select(.schedule != "") | {name, schedule, next_run}'`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).JobTypes, printTypes)
		},
	}
	var (
		priority int
		policy   string
		enabled  string
		schedule string
	)
	modify := &cobra.Command{
		Use:   "modify TYPE [--priority N] [--policy P] [--enabled true|false] [--schedule CRON]",
		Short: "Change a job type's default priority, policy, whether it may run, or its schedule",
		Long: `Change a job type's cluster-wide settings. Flags not given keep their value.

--schedule sets when the coordinator starts a job of the type by itself,
with the type's priority and policy, as a cron expression of five fields:

  minute (0-59) hour (0-23) day-of-month (1-31) month (1-12 or jan-dec)
  day-of-week (0-7 or sun-sat; 0 and 7 are Sunday)

Each field is *, a value, a range (1-5) or a list (1,15), and * or a range
may take a step (*/15, 1-5/2). When day-of-month and day-of-week are both
restricted, a day matching either fires (as in Vixie cron). The macros
@hourly, @daily, @weekly (Sunday 00:00), @monthly and @yearly also work.
Times are UTC unless the expression starts with TZ=<zone> (an IANA name
such as Europe/Paris); across a daylight-saving change a repeated time
fires once and a skipped one fires when the clocks have jumped.

A new schedule first fires at its first time after it is set. A time that
passes while a job of the type is queued, running or paused starts nothing
(the event log says so); times missed while the cluster was down start one
job, not one each; a disabled type's times pass silently. Each firing is
recorded in weft job events list (kind schedule). --schedule "" removes
the schedule; mediascan has a monthly one by default (0 2 1 * *).`,
		Example: `  weft job types modify integrityscan --policy low --priority 8
  weft job types modify mediascan --schedule "0 3 1 * *"              # 03:00 UTC on the 1st
  weft job types modify collect --schedule "TZ=Europe/Paris 0 1 * * sat"  # Saturdays 01:00 Paris time
  weft job types modify integrityscan --schedule @weekly
  weft job types modify mediascan --schedule ""                       # no schedule`,
		Args: exactArgs(1, "one job type"),
		RunE: func(c *cobra.Command, args []string) error {
			if c.Flags().Changed("schedule") && strings.TrimSpace(schedule) != "" {
				if _, err := job.ParseCron(schedule); err != nil {
					return usageError{fmt.Errorf("--schedule: %w", err)}
				}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			types, err := cl.JobTypes(c.Context())
			if err != nil {
				return err
			}
			var ts *job.TypeSettings
			for i := range types {
				if types[i].Name == args[0] {
					ts = &types[i].TypeSettings
				}
			}
			if ts == nil {
				return fmt.Errorf("no job type %q (see weft job types list)", args[0])
			}
			if priority != 0 {
				ts.Priority = priority
			}
			if policy != "" {
				ts.Policy = policy
			}
			switch enabled {
			case "":
			case "true", "false":
				ts.Enabled = enabled == "true"
			default:
				return usageError{fmt.Errorf("--enabled %q: want true or false", enabled)}
			}
			if c.Flags().Changed("schedule") {
				ts.Schedule = schedule
			}
			types, err = cl.ModifyJobType(c.Context(), args[0], *ts)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), types)
			}
			return printTypes(c.OutOrStdout(), types)
		},
	}
	modify.Flags().IntVar(&priority, "priority", 0, "default priority 1-10")
	modify.Flags().StringVar(&policy, "policy", "", "default impact policy")
	modify.Flags().StringVar(&enabled, "enabled", "", "true or false")
	modify.Flags().StringVar(&schedule, "schedule", "", `cron expression ("0 2 1 * *", "@weekly", "TZ=Europe/Paris 0 3 * * *"); "" for none`)
	c.AddCommand(list, modify)
	return c
}

func printTypes(w io.Writer, types []job.TypeView) error {
	t := newTable(w, "TYPE", "SET", "PHASES", "PRIORITY", "POLICY", "ENABLED", "SCHEDULE", "NEXT RUN")
	now := time.Now()
	for _, ty := range types {
		sched := ty.Schedule
		if sched == "" {
			sched = "-"
		}
		t.row(ty.Name, ty.SetName, strings.Join(ty.Phases, ","), strconv.Itoa(ty.Priority), ty.Policy, strconv.FormatBool(ty.Enabled), sched, nextRunText(ty.NextRun, now))
	}
	return t.flush()
}

// nextRunText shows a type's next scheduled run in local time: "-" for
// none, "due" once it has passed (the coordinator starts it within its
// check interval).
func nextRunText(next, now time.Time) string {
	switch {
	case next.IsZero():
		return "-"
	case !next.After(now):
		return "due"
	}
	return next.Local().Format("2006-01-02 15:04 MST")
}
