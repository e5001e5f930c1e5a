package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
)

func newStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show cluster health, capacity, nodes, drives and the control plane",
		Long: `Show the cluster's health: "healthy" when every node, every drive in
service and every etcd member is up, otherwise "degraded" with one line per
problem. Exit status is 0 either way; use --json for scripts.

The "jobs" line is the job engine's mode: "normal", or "low-space since
TIME: REASON" while a pool is below the low_space_threshold setting (jobs
that do not free space are paused until every pool is back at the
threshold plus one point; see weft job settings and weft job events list).`,
		Example: `  weft status
  weft status --json | jq .health
  weft status --json | jq .job_engine`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).Status, func(w io.Writer, st admin.Status) error {
				fmt.Fprintf(w, "cluster   %s\n", st.ClusterID)
				fmt.Fprintf(w, "health    %s\n", st.Health)
				fmt.Fprintf(w, "nodes     %d/%d up\n", st.NodesUp, st.Nodes)
				fmt.Fprintf(w, "drives    %d/%d up", st.DrivesUp, st.Drives)
				if n := st.DriveStatus[string(cluster.StatusRemoved)]; n > 0 {
					fmt.Fprintf(w, " (%d removed)", n)
				}
				fmt.Fprintln(w)
				fmt.Fprintf(w, "capacity  %s used of %s (%s), %s free\n", humanBytes(st.UsedBytes), humanBytes(st.TotalBytes),
					percent(st.UsedBytes, st.TotalBytes), humanBytes(st.FreeBytes))
				var members []string
				for _, m := range st.Etcd {
					s := m.Name
					switch {
					case !m.Healthy:
						s += "(down)"
					case m.Leader:
						s += "(leader)"
					}
					members = append(members, s)
				}
				fmt.Fprintf(w, "etcd      %s\n", strings.Join(members, " "))
				if st.JobEngine != nil {
					fmt.Fprintf(w, "jobs      %s\n", st.JobEngine)
				}
				fmt.Fprintln(w)
				t := newTable(w, "POOL", "PROTECTION", "DRIVES", "USED", "SIZE", "USE%")
				for _, p := range st.Pools {
					t.row(p.Name, p.Protection, fmt.Sprintf("%d/%d", p.DrivesUp, p.Drives), humanBytes(p.UsedBytes), humanBytes(p.TotalBytes), percent(p.UsedBytes, p.TotalBytes))
				}
				if err := t.flush(); err != nil {
					return err
				}
				if len(st.Problems) > 0 {
					fmt.Fprintln(w, "\nproblems:")
					for _, p := range st.Problems {
						fmt.Fprintln(w, "  -", p)
					}
				}
				return nil
			})
		},
	}
}
