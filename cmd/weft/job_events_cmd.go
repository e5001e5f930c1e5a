package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

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

Jobs record the last two as well. The newest 1000 events are kept.`,
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
