package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/job"
)

func jobEventsCmd(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "events",
		Short: "The events that start jobs (drive down or added, node added, pool unbalanced, low space, under-protected stripes) and lost data",
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
  under-protected  stripes are below their pool's protection and drives
                   came back, or new ones went below with every drive up:
                   a repair job, unless one is queued or running
  data-lost        a job found a file with data it cannot rebuild (once
                   per file): see weft file lost list

Jobs record the last two as well. The newest 1000 events are kept.

Each event carries parameters (pool, usage, drive, node, job, …) and the
results of the callbacks it ran (weft callback --help): list shows them
in brief, show in full.`,
	}
	var limit int
	list := &cobra.Command{
		Use:   "list [--limit N]",
		Short: "List the newest events, oldest first",
		Long: `List the newest events (50 unless --limit says, at most 1000), oldest
first, as a table:

  ID         the event's number: consecutive, never reused
  TIME       when the coordinator recorded it (local time)
  EVENT      its kind (see weft job events --help)
  SUBJECT    what it is about: a drive (d7), a node (node n2), a pool
  JOB        the job it started, the queued or running job that already
             covers it, or why no job started
  CALLBACKS  each callback that ran for it and its result: NAME:exit N,
             or NAME:timeout, NAME:not found, … ("-": none; weft job
             events show ID prints their output)
  DETAIL     what was observed

--json prints the events as a JSON array (fields id, time, kind, subject,
detail, job, outcome, params, and callbacks: each run's name, node,
started, seconds, exit, error and output).`,
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
					t := newTable(w, "ID", "TIME", "EVENT", "SUBJECT", "JOB", "CALLBACKS", "DETAIL")
					for _, ev := range evs {
						t.row(strconv.FormatUint(ev.ID, 10), ev.Time.Local().Format("2006-01-02 15:04:05"), ev.Kind, ev.Subject, ev.Outcome, callbackResults(ev), ev.Detail)
					}
					return t.flush()
				})
		},
	}
	list.Flags().IntVar(&limit, "limit", admin.DefaultEventLimit, "how many of the newest events to list (1-1000)")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one event: its parameters and each callback's result and output",
		Long: `Show event ID (the ID column of weft job events list): its time, kind,
subject, detail, job and outcome, its parameters (what a callback gets as
WEFT_PARAM_<KEY> and %key), and each callback that ran for it: where and
when, for how long, its exit status or why it has none, and the last
4 KiB of its output (stdout and stderr together). --json prints the
event with every field.`,
		Example: `  weft job events show 42
  weft job events show 42 --json | jq -r '.callbacks[] | select(.exit != 0) | .output'`,
		Args: exactArgs(1, "one event id"),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 64)
			if err != nil || id == 0 {
				return usageError{fmt.Errorf("event id %q: want a positive number (the ID column of weft job events list)", args[0])}
			}
			return query(g, c, func(cl *admin.Client, ctx context.Context) (job.Event, error) { return cl.JobEvent(ctx, id) }, printEvent)
		},
	}
	c.AddCommand(list, show)
	return c
}

// printEvent prints one event and its callbacks' runs.
func printEvent(w io.Writer, ev job.Event) error {
	fmt.Fprintf(w, "event     %d (%s)\n", ev.ID, ev.Kind)
	fmt.Fprintf(w, "time      %s\n", ev.Time.Local().Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(w, "subject   %s\n", ev.Subject)
	if ev.Detail != "" {
		fmt.Fprintf(w, "detail    %s\n", ev.Detail)
	}
	fmt.Fprintf(w, "outcome   %s\n", ev.Outcome)
	if len(ev.Params) > 0 {
		var ps []string
		for _, k := range slices.Sorted(maps.Keys(ev.Params)) {
			ps = append(ps, k+"="+ev.Params[k])
		}
		fmt.Fprintf(w, "params    %s\n", strings.Join(ps, " "))
	}
	if len(ev.Callbacks) == 0 {
		fmt.Fprintln(w, "callbacks none")
		return nil
	}
	for _, r := range ev.Callbacks {
		fmt.Fprintf(w, "\ncallback %s on %s at %s: %s after %.2fs\n", r.Name, r.Node, r.Started.Local().Format("15:04:05"), r.Result(), r.Seconds)
		if r.Error != "" {
			fmt.Fprintf(w, "  %s\n", r.Error)
		}
		out := strings.TrimRight(r.Output, "\n")
		switch {
		case out != "":
			for _, line := range strings.Split(out, "\n") {
				fmt.Fprintf(w, "  | %s\n", line)
			}
		case r.Error == "":
			fmt.Fprintln(w, "  (no output)")
		}
	}
	return nil
}
