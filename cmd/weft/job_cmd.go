package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/job"
)

func newJobCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Run and watch background jobs: repair, drain, integrityscan, …",
		Long: `The job engine runs data management in the background while the cluster
serves clients: one coordinator (elected) splits each job's phases into
tasks, every node's director claims tasks and runs them with worker threads
whose number an impact policy and the node's load decide, and progress is
checkpointed so that a pause, a node crash or a coordinator failover loses
seconds of work and never skips an item.

At most 3 jobs run at once (priority 1 is highest; a higher-priority job
pauses a lower one when it needs the slot). Jobs in the "mark" exclusion set
run one at a time; "restripe" jobs may run together.

Events start jobs by themselves: a drive down past the repair grace period
(repair), a drive or node added (multiscan), a pool out of balance
(rebalance); a pool short of space turns on low-space mode. weft job events
list shows each event and what came of it.`,
	}
	cmd.AddCommand(jobStartCmd(g), jobListCmd(g, false), jobViewCmd(g), jobActionCmd(g, "pause", "Pause a job (it keeps its progress)"),
		jobActionCmd(g, "resume", "Resume a paused job from its checkpoints"), jobActionCmd(g, "cancel", "Cancel a job (its report is kept)"),
		jobModifyCmd(g), jobReportsCmd(g), jobTypesCmd(g), jobPoliciesCmd(g), jobStatusCmd(g), jobSettingsCmd(g), jobEventsCmd(g))
	return cmd
}

func jobStartCmd(g *globals) *cobra.Command {
	var (
		policy   string
		priority int
		path     string
		dryRun   bool
		params   []string
	)
	c := &cobra.Command{
		Use:   "start TYPE",
		Short: "Start a job",
		Long: `Start a job of TYPE (see weft job types list). It is queued, then runs when a
slot and its exclusion set allow. Without --priority and --policy the type's
defaults apply.`,
		Example: `  weft job start integrityscan --dry-run
  weft job start repair --priority 1 --policy high
  weft job start drain --param drives=d3,d7
  weft job start mediascan --param drives=d3 --policy high`,
		Args: exactArgs(1, "one job type"),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			req := admin.StartJobRequest{Type: args[0], Priority: priority, Policy: policy, Params: map[string]string{}}
			if path != "" {
				req.Params["path"] = path
			}
			if dryRun {
				req.Params["dry-run"] = "true"
			}
			for _, p := range params {
				k, v, ok := strings.Cut(p, "=")
				if !ok || k == "" {
					return usageError{fmt.Errorf("--param %q: want KEY=VALUE", p)}
				}
				req.Params[k] = v
			}
			id, err := cl.StartJob(c.Context(), req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), admin.StartJobReply{ID: id})
			}
			fmt.Fprintf(c.OutOrStdout(), "job %d started (%s); watch it with: weft job view %d --watch\n", id, args[0], id)
			return nil
		},
	}
	c.Flags().StringVar(&policy, "policy", "", "impact policy: low, medium, high, off_hours or a custom one")
	c.Flags().IntVar(&priority, "priority", 0, "priority 1 (highest) to 10")
	c.Flags().StringVar(&path, "path", "", "restrict the job to a directory tree (types that support it)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "report, change nothing (integrityscan)")
	c.Flags().StringArrayVar(&params, "param", nil, "a type parameter KEY=VALUE (repeatable)")
	return c
}

func jobListCmd(g *globals, ended bool) *cobra.Command {
	var all bool
	use, short := "list", "List queued, running and paused jobs (--all: ended ones too)"
	if ended {
		use, short = "list", "List ended jobs with their results"
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			jobs, err := cl.Jobs(c.Context())
			if err != nil {
				return err
			}
			var keep []job.JobView
			for _, j := range jobs {
				if term := j.State.Terminal(); (ended && term) || (!ended && (all || !term)) {
					keep = append(keep, j)
				}
			}
			sort.Slice(keep, func(a, b int) bool { return keep[a].ID < keep[b].ID })
			if g.json {
				return printJSON(c.OutOrStdout(), keep)
			}
			t := newTable(c.OutOrStdout(), "ID", "TYPE", "STATE", "PRI", "POLICY", "PHASE", "PROGRESS", "ITEMS", "ERRORS", "STARTED", "REASON")
			for _, j := range keep {
				var items, errs int64
				for _, p := range j.Phases {
					items += p.Items
					errs += p.Errors
				}
				t.row(j.ID.String(), j.Type, string(j.State), strconv.Itoa(j.Priority), j.Policy, phaseName(j), progressText(j),
					strconv.FormatInt(items, 10), strconv.FormatInt(errs, 10), when(j.Started), j.Reason)
			}
			return t.flush()
		},
	}
	if !ended {
		c.Flags().BoolVar(&all, "all", false, "include ended jobs")
	}
	return c
}

func phaseName(j job.JobView) string {
	if j.Phase < len(j.Phases) {
		return fmt.Sprintf("%d/%d %s", j.Phase+1, len(j.Phases), j.Phases[j.Phase].Name)
	}
	return "-"
}

func progressText(j job.JobView) string {
	if j.Progress == nil {
		if j.State == job.Succeeded {
			return "100%"
		}
		return "-"
	}
	s := fmt.Sprintf("%.1f%%", j.Progress.Percent)
	if j.Progress.ETA > 0 {
		s += " eta " + j.Progress.ETA.Round(time.Second).String()
	}
	return s
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("01-02 15:04:05")
}

func jobViewCmd(g *globals) *cobra.Command {
	var watch bool
	c := &cobra.Command{
		Use:     "view ID",
		Short:   "Show a job: state, phases with their reports, progress (--watch: a live progress bar)",
		Example: "  weft job view 12\n  weft job view 12 --watch",
		Args:    exactArgs(1, "one job id"),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := job.ParseJobID(args[0])
			if err != nil {
				return usageError{err}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			w := c.OutOrStdout()
			for {
				j, err := cl.Job(c.Context(), id)
				if err != nil {
					return err
				}
				if g.json && !watch {
					return printJSON(w, j)
				}
				if !watch {
					printJob(w, j)
					return nil
				}
				if j.State.Terminal() {
					fmt.Fprintf(w, "\r%s\n", progressBar(j))
					printJob(w, j)
					return nil
				}
				if isTTY(w) {
					fmt.Fprintf(w, "\r%s", progressBar(j))
				} else {
					fmt.Fprintln(w, progressBar(j))
				}
				select {
				case <-c.Context().Done():
					fmt.Fprintln(w)
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
	c.Flags().BoolVar(&watch, "watch", false, "follow the job with a progress bar until it ends")
	return c
}

// isTTY reports whether w is a terminal (for redrawing a progress bar).
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar renders "[#####.....]  45.2% 2/3 repair  1234 items  eta 2m10s  running".
func progressBar(j job.JobView) string {
	const width = 30
	pct := 0.0
	if j.Progress != nil {
		pct = j.Progress.Percent
	} else if j.State == job.Succeeded {
		pct = 100
	}
	filled := int(pct / 100 * width)
	filled = max(0, min(width, filled))
	var items int64
	for _, p := range j.Phases {
		items += p.Items
	}
	eta := ""
	if j.Progress != nil && j.Progress.ETA > 0 {
		eta = "  eta " + j.Progress.ETA.Round(time.Second).String()
	}
	return fmt.Sprintf("[%s%s] %5.1f%% %s  %d items%s  %s   ", strings.Repeat("#", filled), strings.Repeat(".", width-filled),
		pct, phaseName(j), items, eta, j.State)
}

func printJob(w io.Writer, j job.JobView) {
	fmt.Fprintf(w, "job       %d (%s)\n", j.ID, j.Type)
	fmt.Fprintf(w, "state     %s", j.State)
	if j.Reason != "" {
		fmt.Fprintf(w, " (%s)", j.Reason)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "priority  %d, policy %s\n", j.Priority, j.Policy)
	if len(j.Params) > 0 {
		var ps []string
		for k, v := range j.Params {
			ps = append(ps, k+"="+v)
		}
		sort.Strings(ps)
		fmt.Fprintf(w, "params    %s\n", strings.Join(ps, " "))
	}
	fmt.Fprintf(w, "times     created %s, started %s, ended %s\n", when(j.Created), when(j.Started), when(j.Ended))
	fmt.Fprintf(w, "progress  %s\n\n", progressText(j))
	t := newTable(w, "PHASE", "STATE", "TASKS", "ITEMS", "BYTES", "ERRORS", "DURATION", "NOTE")
	for _, p := range j.Phases {
		dur := "-"
		if !p.Started.IsZero() {
			end := p.Ended
			if end.IsZero() {
				end = time.Now()
			}
			dur = end.Sub(p.Started).Round(time.Millisecond).String()
		}
		note := p.Note
		if p.Error != "" {
			note = "error: " + p.Error
		}
		t.row(p.Name, string(p.State), strconv.Itoa(p.Tasks), strconv.FormatInt(p.Items, 10), humanBytes(p.Bytes),
			strconv.FormatInt(p.Errors, 10), dur, note)
	}
	_ = t.flush()
	for _, p := range j.Phases {
		if p.Summary == "" {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", p.Name)
		for line := range strings.SplitSeq(strings.TrimRight(p.Summary, "\n"), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

func jobActionCmd(g *globals, verb, short string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " ID",
		Short: short,
		Args:  exactArgs(1, "one job id"),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := job.ParseJobID(args[0])
			if err != nil {
				return usageError{err}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			j, err := cl.JobAction(c.Context(), id, verb)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), j)
			}
			fmt.Fprintf(c.OutOrStdout(), "job %d: %s\n", j.ID, j.State)
			return nil
		},
	}
}

func jobModifyCmd(g *globals) *cobra.Command {
	var req admin.ModifyJobRequest
	c := &cobra.Command{
		Use:     "modify ID [--priority N] [--policy P]",
		Short:   "Change a job's priority or impact policy (takes effect within seconds)",
		Example: "  weft job modify 12 --policy high --priority 2",
		Args:    exactArgs(1, "one job id"),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := job.ParseJobID(args[0])
			if err != nil {
				return usageError{err}
			}
			if req.Priority == 0 && req.Policy == "" {
				return usageError{fmt.Errorf("give --priority and/or --policy")}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			j, err := cl.ModifyJob(c.Context(), id, req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), j)
			}
			fmt.Fprintf(c.OutOrStdout(), "job %d: priority %d, policy %s\n", j.ID, j.Priority, j.Policy)
			return nil
		},
	}
	c.Flags().IntVar(&req.Priority, "priority", 0, "priority 1 (highest) to 10")
	c.Flags().StringVar(&req.Policy, "policy", "", "impact policy")
	return c
}

func jobReportsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "reports", Short: "Reports of ended jobs (per phase: items, bytes, errors, duration)"}
	view := jobViewCmd(g)
	view.Short = "Show one job's report"
	c.AddCommand(jobListCmd(g, true), view)
	return c
}

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
			return query(g, c, (*admin.Client).Policies, func(w io.Writer, ps []job.Policy) error {
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

func jobStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the coordinator, and per node and job: workers, duty cycle, items/s",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).JobStatus, func(w io.Writer, st admin.JobStatus) error {
				coord := st.Coordinator
				if coord == "" {
					coord = "(none elected)"
				}
				fmt.Fprintf(w, "coordinator  %s\n", coord)
				if st.LowSpace {
					fmt.Fprintf(w, "low space    %s\n", st.LowSpaceReason)
				}
				fmt.Fprintln(w)
				return printNodeStatus(w, st.Status)
			})
		},
	}
}

func printNodeStatus(w io.Writer, st job.Status) error {
	t := newTable(w, "NODE", "JOB", "TYPE", "PHASE", "POLICY", "WORKERS", "DUTY", "TASKS", "ITEMS/S")
	for _, n := range st.Nodes {
		if len(n.Jobs) == 0 {
			t.row(n.Node, "-", "-", "-", "-", "0", "-", "0", "0")
			continue
		}
		for _, m := range n.Jobs {
			t.row(n.Node, m.Job.String(), m.Type, strconv.Itoa(m.Phase+1), m.Policy, strconv.Itoa(m.Workers),
				fmt.Sprintf("%.0f%%", 100*m.Duty), strconv.Itoa(m.Tasks), fmt.Sprintf("%.1f", m.ItemsPerSec))
		}
	}
	return t.flush()
}

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

func jobEventsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "events",
		Short: "The events that start jobs (drive down or added, node added, pool unbalanced, low space)",
		Long: `The job engine's event log: every cluster event that started a job, or
would have, and what came of it. The coordinator records:

  drive-down       a drive in service went down; past the repair grace
                   period (weft server --repair-grace, default 10m) a
                   repair job starts, unless one is queued or running
  drive-added      a drive id the cluster had not seen: a multiscan job
  node-added       a node the cluster had not seen: a multiscan job (one
                   job for everything added in the same check; none if a
                   multiscan is already queued, nor while the cluster
                   stores no blocks)
  pool-unbalanced  the used space of a pool's drives in service spreads
                   more than the rebalance_threshold setting: a rebalance
                   job for the pool, unless a rebalance of it or a
                   multiscan is queued or running (checked every 30 s;
                   recorded once per job)
  low-space        a pool fell below the low_space_threshold setting:
                   low-space mode on (jobs that do not free space pause)
  space-recovered  every pool is back at the threshold plus one point:
                   low-space mode off (the paused jobs resume)
  schedule         a job schedule fired

The newest 1000 events are kept.`,
	}
	var limit int
	list := &cobra.Command{
		Use:   "list [--limit N]",
		Short: "List the newest events, oldest first",
		Long: `List the newest events (50 unless --limit says, at most 1000), oldest
first, as a table:

  ID       the event's number: consecutive, never reused
  TIME     when the coordinator recorded it (local time)
  EVENT    its kind (see weft job events --help)
  SUBJECT  what it is about: a drive (d7), a node (node n2), a pool
  JOB      the job it started, the queued or running job that already
           covers it, or why no job started
  DETAIL   what was observed

--json prints the events as a JSON array (fields id, time, kind, subject,
detail, job, outcome).`,
		Example: `  weft job events list
  weft job events list --limit 200
  weft job events list --json | jq '.[] | select(.kind == "drive-down")'`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if limit < 1 || limit > job.DefaultKeepEvents {
				return usageError{fmt.Errorf("--limit %d: use 1 to %d", limit, job.DefaultKeepEvents)}
			}
			return query(g, c, func(cl *admin.Client, ctx context.Context) ([]job.Event, error) { return cl.JobEvents(ctx, limit) },
				func(w io.Writer, evs []job.Event) error {
					t := newTable(w, "ID", "TIME", "EVENT", "SUBJECT", "JOB", "DETAIL")
					for _, ev := range evs {
						t.row(strconv.FormatUint(ev.ID, 10), ev.Time.Local().Format("2006-01-02 15:04:05"), ev.Kind, ev.Subject, ev.Outcome, ev.Detail)
					}
					return t.flush()
				})
		},
	}
	list.Flags().IntVar(&limit, "limit", admin.DefaultEventLimit, "how many of the newest events to list (1-1000)")
	c.AddCommand(list)
	return c
}
