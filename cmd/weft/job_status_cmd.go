package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/impact"
	"github.com/weftfs/weft/internal/job"
)

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
				if err := printNodeStatus(w, st.Status); err != nil {
					return err
				}
				printThrottle(w, st.Throttle)
				return nil
			})
		},
	}
}

func printNodeStatus(w io.Writer, st job.Status) error {
	t := newTable(w, "NODE", "JOB", "TYPE", "PHASE", "POLICY", "WORKERS", "DUTY", "RATE", "TASKS", "ITEMS/S")
	for _, n := range st.Nodes {
		if len(n.Jobs) == 0 {
			t.row(n.Node, "-", "-", "-", "-", "0", "-", "-", "0", "0")
			continue
		}
		for _, m := range n.Jobs {
			rate := "-" // unlimited
			if m.BytesPerSec > 0 {
				rate = humanBytes(int64(m.BytesPerSec)) + "/s"
			}
			t.row(n.Node, m.Job.String(), m.Type, strconv.Itoa(m.Phase+1), m.Policy, strconv.Itoa(m.Workers),
				fmt.Sprintf("%.0f%%", 100*m.Duty), rate, strconv.Itoa(m.Tasks), fmt.Sprintf("%.1f", m.ItemsPerSec))
		}
	}
	return t.flush()
}

// printThrottle prints the throttle of the node that answered: per job
// its level, workers, client latency targets, pressure and why its
// workers last changed ("back off: client p99 12ms > target 10ms on pool
// fast (node n2)"), then the client latency figures it last read.
func printThrottle(w io.Writer, st impact.ThrottleStatus) {
	if st.Tick.IsZero() && len(st.Jobs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nthrottle of the node answering (last tick %s)\n", when(st.Tick))
	if st.LoadError != "" {
		fmt.Fprintf(w, "  load error: %s\n", st.LoadError)
	}
	if st.PolicyError != "" {
		fmt.Fprintf(w, "  policy error: %s\n", st.PolicyError)
	}
	for _, j := range st.Jobs {
		win := "default"
		if j.Window != "" {
			win = "window " + j.Window
		}
		fmt.Fprintf(w, "  %s  policy %s, level %s (%s) %g-%g workers, at %g (%d×%.0f%%)\n",
			j.Job, j.Policy, j.Level, win, j.MinWorkers, j.MaxWorkers, j.Target, j.Workers, 100*j.Duty)
		fmt.Fprintf(w, "    client p99 target  %s\n", j.ClientP99)
		if j.LatencyBackoff != "" {
			fmt.Fprintf(w, "    held back          %s\n", j.LatencyBackoff)
		}
		fmt.Fprintf(w, "    pressure           %s\n", j.Pressure)
		fmt.Fprintf(w, "    changed %s  %s\n", when(j.Changed), j.Reason)
	}
	if !st.LatencyCheck.IsZero() {
		var figs []string
		for _, l := range st.Latency {
			figs = append(figs, l.String())
		}
		if len(figs) == 0 {
			figs = []string{"no pool with client I/O"}
		}
		fmt.Fprintf(w, "client latency (checked %s): %s\n", when(st.LatencyCheck), strings.Join(figs, "; "))
	}
}
