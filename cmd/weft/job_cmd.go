package main

import (
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
list shows each event and what came of it; weft callback runs commands of
your own for them.`,
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
