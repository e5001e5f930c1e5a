package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/meta"
)

func newStatusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show cluster health, capacity, nodes, drives and the control plane",
		Long: `Show the cluster's health: "healthy" when every node, every drive in
service and every etcd member is up and every file is whole and at its
pool's protection; "degraded" with a node, drive or member down, or files
with stripes below their pool's protection (written while drives or nodes
were down: see weft file list --under-protected; a repair re-protects
them); "critical" when files have lost data (see weft file lost list:
restore them from a backup). One line per problem follows. Exit status is
0 either way; use --json for scripts.

The "data" line counts the files below their pool's protection and the
files with lost data.

The "jobs" line is the job engine's mode: "normal", or "low-space since
TIME: REASON" while a pool is below the low_space_threshold setting (jobs
that do not free space are paused until every pool is back at the
threshold plus one point; see weft job settings and weft job events list).

The "etcd" line names the members (the leader marked) and the fullest
member's database against its quota. Past half the quota, mounts and NFS
gateways stop committing small files' data inline (weft mount
--inline-max) and store it in blocks; past 80% it is a problem: at the
quota etcd refuses every write until its database is compacted and
defragmented or the quota raised.`,
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
				// Full counts what is not free: weft's data and anything
				// else on the drives' file systems (as weft drive list).
				fmt.Fprintf(w, "capacity  %s of weft data, %s free of %s (%s full)\n", humanBytes(st.UsedBytes), humanBytes(st.FreeBytes),
					humanBytes(st.TotalBytes), percent(st.TotalBytes-st.FreeBytes, st.TotalBytes))
				if st.Data != nil {
					fmt.Fprintf(w, "data      %s\n", dataLine(st.Data))
				}
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
				fmt.Fprintf(w, "etcd      %s", strings.Join(members, " "))
				if db := st.EtcdDB; db != nil {
					fmt.Fprintf(w, "; database %s of %s (%s)", humanBytes(db.Used), humanBytes(db.Quota), percent(db.Used, db.Quota))
				}
				fmt.Fprintln(w)
				if st.JobEngine != nil {
					fmt.Fprintf(w, "jobs      %s\n", st.JobEngine)
				}
				fmt.Fprintln(w)
				t := newTable(w, "POOL", "PROTECTION", "DRIVES", "USED", "SIZE", "USE%")
				for _, p := range st.Pools {
					t.row(p.Name, p.Protection, fmt.Sprintf("%d/%d", p.DrivesUp, p.Drives), humanBytes(p.UsedBytes), humanBytes(p.TotalBytes), percent(p.TotalBytes-p.FreeBytes, p.TotalBytes))
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

// dataLine says how many files are below their protection and how many
// have lost data.
func dataLine(d *meta.ProtectionStats) string {
	atLeast := ""
	if d.Partial {
		atLeast = "at least "
	}
	under := "every stripe at its pool's protection"
	if d.UnderFiles > 0 {
		under = fmt.Sprintf("%s%d files (%s in %d stripes) below their pool's protection", atLeast, d.UnderFiles, humanBytes(int64(d.UnderBytes)), d.UnderStripes)
	}
	lost := "no data lost"
	if d.LostFiles > 0 {
		lost = fmt.Sprintf("%s%d files with lost data (%s in %d stripes)", atLeast, d.LostFiles, humanBytes(int64(d.LostBytes)), d.LostStripes)
	}
	return under + "; " + lost
}
