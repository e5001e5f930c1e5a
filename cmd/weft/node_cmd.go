package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/runner"
)

func newNodeCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "List the cluster's nodes and their background workers"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List nodes with their state, addresses and process",
		Long: `List every node that ever registered, with its state (up while its
etcd lease lives; down once the lease expires, within the lease TTL of a
crash), its block-service and admin addresses, and its process id.`,
		Example: `  weft node list
  weft node list --json | jq '.[] | {name, state, pid: .live.pid}'`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).Nodes, func(w io.Writer, nodes []cluster.Node) error {
				t := newTable(w, "NAME", "STATE", "GRPC", "ADMIN", "ETCD", "PID", "VERSION", "SINCE")
				for _, n := range nodes {
					pid, ver, since := "-", "-", "-"
					if n.Live != nil {
						pid, ver, since = strconv.Itoa(n.Live.PID), n.Live.Version, n.Live.Started.Local().Format("2006-01-02 15:04:05")
					}
					etcd := "-"
					if n.EtcdClient != "" {
						etcd = "member"
					}
					t.row(n.Name, string(n.State), n.GRPCAddr, n.AdminAddr, etcd, pid, ver, since)
				}
				return t.flush()
			})
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "workers [NODE]",
		Short: "Show a node's background workers: state, steps, errors",
		Long: `Show the background workers of NODE, or of every node that is up: the
node's local work (serving the block service and the admin API, renewing
its lease, publishing drive usage, freeing deleted blocks, ticking the job
throttle, turning cluster events into jobs) runs as workers of one runner
per process, each doing one step of work at a time.

STATE is running (in a step; a server's one step lasts as long as it
serves), idle (resting until its next step), throttled (pausing after a
step, to leave the machine to the foreground), backing-off (waiting after
a failed step; the wait doubles at every failure in a row up to a cap),
done, failed (ended with an error) or stopped. STEPS and ERRORS count the
steps finished and those that failed; LAST-STEP is when the last step
began and how long it took; LAST-ERROR is the last failure and when it
happened (it stays after the worker recovers). --json prints a list with
one entry per node (also given NODE), with every field (next run, exact
times).

The command goes to any node's admin API, which asks NODE's. A node that
is down runs no workers: naming it is an error, and without NODE it is
left out. A mount's workers: weft mount workers ADDR.`,
		Example: `  weft node workers
  weft node workers n2
  weft node workers --json | jq '.[].workers[] | select(.errors > 0)'`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("%s takes at most one node name (got %d arguments; see --help)", c.CommandPath(), len(args))}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			ctx := c.Context()
			var names []string
			if len(args) == 1 {
				names = args
			} else {
				nodes, err := cl.Nodes(ctx)
				if err != nil {
					return err
				}
				for _, n := range nodes {
					if n.State == cluster.Up {
						names = append(names, n.Name)
					}
				}
			}
			var all []admin.Workers
			var errs []error
			for _, name := range names {
				ws, err := cl.NodeWorkers(ctx, name)
				if err != nil {
					errs = append(errs, fmt.Errorf("workers of node %s: %w", name, err))
					continue
				}
				all = append(all, ws)
			}
			if len(all) > 0 || len(errs) == 0 {
				if g.json {
					err = printJSON(c.OutOrStdout(), all)
				} else {
					err = printWorkers(c.OutOrStdout(), time.Now(), all...)
				}
				errs = append([]error{err}, errs...)
			}
			return errors.Join(errs...)
		},
	})
	return cmd
}

// printWorkers prints the workers of one or more processes as a table;
// now is the reference for "ago".
func printWorkers(w io.Writer, now time.Time, procs ...admin.Workers) error {
	t := newTable(w, "NODE", "WORKER", "STATE", "STEPS", "ERRORS", "LAST-STEP", "LAST-ERROR")
	for _, p := range procs {
		who := p.Node
		if who == "" {
			who = p.Mount
		}
		for _, ws := range p.Workers {
			t.row(who, ws.Name, ws.State, strconv.FormatUint(ws.Steps, 10), strconv.FormatUint(ws.Errors, 10), lastStep(now, ws), lastError(now, ws))
		}
	}
	return t.flush()
}

// lastStep describes a worker's last step: "4s ago, took 1.2ms", "running
// for 3m2s" (in a step now), or "-" before the first.
func lastStep(now time.Time, ws runner.WorkerStatus) string {
	switch {
	case ws.LastStep.IsZero():
		return "-"
	case ws.State == runner.StateRunning:
		return "running for " + roughly(now.Sub(ws.LastStep))
	}
	return fmt.Sprintf("%s ago, took %s", roughly(now.Sub(ws.LastStep)), roughly(ws.LastDuration))
}

// lastError describes a worker's last failure, "2m ago: MESSAGE" (the
// last column: a long message does not disturb the others), or "-".
func lastError(now time.Time, ws runner.WorkerStatus) string {
	if ws.LastError == "" {
		return "-"
	}
	return fmt.Sprintf("%s ago: %s", roughly(now.Sub(ws.LastErrorAt)), ws.LastError)
}

// roughly rounds d for reading: whole seconds from 10 s (3m2s), else
// hundredths of its unit (1.23s, 4.56ms).
func roughly(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case d >= time.Microsecond:
		return d.Round(10 * time.Nanosecond).String()
	}
	return d.String()
}
