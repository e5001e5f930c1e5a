package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// newFsckCmd is weft fsck: the administrator's words for the fsck job.
func newFsckCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fsck",
		Short: "Check and repair the namespace and its layout online (the fsck job)",
		Long: `weft fsck checks the namespace and its layout while clients use them, and
repairs what it finds unless told not to. It is a job of the job engine (type fsck, in the
mark exclusion set): it is throttled by its impact policy, checkpointed,
and survives node failures like every job; weft job view, pause, resume
and cancel work on it too. These commands are its short forms.

What it checks, in three passes over the namespace, then two over the
layout (--only namespace or --only layout runs one half):

  entries        every directory entry names an inode that exists
                 (dangling-entry) and has the entry's type (entry-type)
  backpointers   every inode's back-pointers (the entries it says name it)
                 exist and name it (stale-backpointer), or name an inode
                 that does not claim them (wrong-entry)
  links          every entry naming an inode has its back-pointer
                 (missing-backpointer); link counts match the links (for a
                 directory: 2 + its subdirectories) (link-count); every
                 inode is linked, or an orphan the collect job will purge
                 (unreachable)
  stripes        every unit of every file's stripe maps names a block that
                 is on its drive (missing-unit), with a header naming the
                 file, stripe and unit, and a generation not newer than the
                 map's (bad-header); units on drives that are down are
                 skipped (the repair job's business)
  usage          each pool's usage counters (inodes, bytes, allocated)
                 match its inodes and stripe maps, computed in one snapshot
                 (usage-counter)

A repair re-checks its finding in the transaction that fixes it, and
leaves alone what a client changed meanwhile (counted as CHANGED). An
unreachable inode, or one whose only entry is gone, is linked into
/lost+found (created, mode 0700, if missing) under its inode number. A missing or bad unit is rebuilt from the other
units of its stripe, as mediascan does (a stripe too damaged for that goes
to the lost-data list: weft file lost list). A stale usage counter gets
the difference added, once.`,
		Example: `  weft fsck start --dry-run && weft fsck status
  weft fsck start --speed 2000
  weft job view 12 --watch     # the same job, by its id
  weft fsck stop`,
	}
	cmd.AddCommand(fsckStartCmd(g), fsckStatusCmd(g), fsckStopCmd(g))
	return cmd
}

func fsckStartCmd(g *globals) *cobra.Command {
	var (
		dry      bool
		speed    uint
		only     string
		priority int
		impact   string
	)
	c := &cobra.Command{
		Use:   "start [--dry-run] [--speed N] [--only namespace|layout] [--priority N] [--policy P]",
		Short: "Start an fsck job and print its id",
		Long: `Starts an fsck job over the whole namespace. With --dry-run it finds and
reports, and changes nothing. --only namespace or --only layout runs one
half (default: both, the namespace first). --speed bounds the checks (one
per directory, inode or unit) each node makes a second; without it the impact policy alone
paces the job. The job runs at priority 6 and the low impact policy unless
--priority and --policy say otherwise.

Only one job of the mark set (fsck, collect, integrityscan, multiscan)
runs at a time: a second one waits for the first.

Exit status: 0 when the job is started, 1 when the cluster refused it,
2 for a mistake in the command line.`,
		Example: `  weft fsck start --dry-run           # report only
  weft fsck start                     # check and repair
  weft fsck start --speed 2000 --policy medium
  weft fsck start --dry-run && weft fsck status`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			switch only {
			case "", "namespace", "layout":
			default:
				return usageError{fmt.Errorf("--only %q: want namespace or layout (leave --only out to check both)", only)}
			}
			if priority != 0 && (priority < 1 || priority > 10) {
				return usageError{fmt.Errorf("--priority %d: want 1 (highest) to 10", priority)}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			params := map[string]string{}
			if only != "" {
				params["only"] = only
			}
			if dry {
				params["dry-run"] = "true"
			}
			if speed > 0 {
				params["speed"] = strconv.FormatUint(uint64(speed), 10)
			}
			id, err := cl.StartJob(c.Context(), admin.StartJobRequest{Type: "fsck", Priority: priority, Policy: impact, Params: params})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), admin.StartJobReply{ID: id})
			}
			what := "fsck"
			if dry {
				what = "fsck dry run"
			}
			fmt.Fprintf(c.OutOrStdout(), "started %s job %d (weft fsck status; weft job view %d --watch)\n", what, id, id)
			return nil
		},
	}
	c.Flags().BoolVar(&dry, "dry-run", false, "find and report only: repair nothing")
	c.Flags().UintVar(&speed, "speed", 0, "at most N checks a second on each node (0: no limit but the impact policy)")
	c.Flags().StringVar(&only, "only", "", "check one half only: namespace or layout (default: both)")
	c.Flags().IntVar(&priority, "priority", 0, "job priority 1 (highest) to 10 (default: fsck's, 6)")
	c.Flags().StringVar(&impact, "policy", "", "impact policy: low, medium, high, off_hours or a custom one (default: low)")
	return c
}

// latestFsck returns the fsck job with the highest id (not ended, if
// running is set), or an error saying there is none.
func latestFsck(ctx context.Context, cl *admin.Client, running bool) (job.JobView, error) {
	jobs, err := cl.Jobs(ctx)
	if err != nil {
		return job.JobView{}, err
	}
	return pickFsck(jobs, running)
}

// pickFsck is latestFsck over a list of jobs.
func pickFsck(jobs []job.JobView, running bool) (job.JobView, error) {
	var best *job.JobView
	for i, j := range jobs {
		if j.Type != "fsck" || running && j.State.Terminal() {
			continue
		}
		if best == nil || j.ID > best.ID {
			best = &jobs[i]
		}
	}
	if best == nil {
		if running {
			return job.JobView{}, errors.New("no fsck job is queued, running or paused (weft fsck status shows the last one)")
		}
		return job.JobView{}, errors.New("no fsck job has run (start one with weft fsck start --dry-run)")
	}
	return *best, nil
}

func fsckStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the latest fsck job: its state, phases and findings per kind",
		Long: `Shows the latest fsck job (running or ended) as weft job view does, then
its findings per kind: found, repaired, changed meanwhile (left alone
because a client changed them), failed. An ended job's report lists the
first findings of each kind with their paths.`,
		Example: `  weft fsck status
  weft fsck status --json | jq '.phases[-1].summary'`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			j, err := latestFsck(c.Context(), cl, false)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), j)
			}
			w := c.OutOrStdout()
			printJob(w, j)
			if !j.State.Terminal() || !hasSummary(j) {
				printFsckCounts(w, j)
			}
			return nil
		},
	}
}

func hasSummary(j job.JobView) bool {
	for _, p := range j.Phases {
		if p.Summary != "" {
			return true
		}
	}
	return false
}

// printFsckCounts prints the findings per kind so far (the report phase
// prints the same table when the job ends).
func printFsckCounts(w io.Writer, j job.JobView) {
	c := map[string]int64{}
	for _, p := range j.Phases {
		for _, s := range p.Scopes {
			for k, n := range s.Counts {
				c[k] += n
			}
		}
	}
	fmt.Fprintf(w, "\nfindings so far (%d checks):\n", c["checked"])
	t := newTable(w, "KIND", "FOUND", "REPAIRED", "CHANGED", "FAILED")
	for _, k := range append(meta.FsckKinds(), meta.FsckLayoutKinds()...) {
		get := func(what string) string { return strconv.FormatInt(c[string(k)+"."+what], 10) }
		t.row(string(k), get("found"), get("repaired"), get("changed"), get("failed"))
	}
	_ = t.flush()
}

func fsckStopCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Cancel the running fsck job (its report so far is kept)",
		Long: `Cancels the fsck job that is queued, running or paused. Repairs already
made stay; the job's report so far is kept (weft fsck status). To stop it
for a while instead, use weft job pause ID and weft job resume ID.`,
		Example: "  weft fsck stop",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			j, err := latestFsck(c.Context(), cl, true)
			if err != nil {
				return err
			}
			v, err := cl.JobAction(c.Context(), j.ID, "cancel")
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), v)
			}
			fmt.Fprintf(c.OutOrStdout(), "fsck job %d: %s\n", v.ID, v.State)
			return nil
		},
	}
}
