package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
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
