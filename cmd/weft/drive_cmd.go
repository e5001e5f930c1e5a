package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
)

func newDriveCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drive",
		Short: "List drives; add, suspend, resume and remove (drain) them",
		Long: `Drives are directories on a node's local file systems, registered with an
id (d1, d2, …), a class (nvme, ssd, hdd) and a pool. Availability (up,
down) follows the node and the drive's health; status (ready, suspended,
draining, removed) is set by the administrator: a suspended drive takes no
new blocks but keeps serving the ones it has. "weft drive add" puts a new
directory into service on a running node.`,
	}
	var addClass, addPool, addCapacity string
	add := &cobra.Command{
		Use:   "add NODE PATH",
		Short: "Put a new drive (a directory on a node) into service while the cluster runs",
		Long: `Open directory PATH on node NODE as a new drive, without restarting the node.
The command goes to the admin API of any node, which routes it to NODE; NODE
must be up. PATH is a path on NODE's machine and must be absolute.

NODE treats PATH as it treats a --drive at startup: an empty or missing
directory is formatted with a new drive id from the control plane; a drive
of another cluster or of another node, a directory with other files in it,
or a path NODE already uses (one of its drives, a directory inside or
around one) is refused, naming the path and the reason. A directory that
already is a drive of NODE (say, one taken out of its --drive flags) comes
back with its id and blocks, unless it was removed from the cluster.

The drive joins POOL ("default" unless given), which is created with the
node's default protection if it does not exist, as at startup. It is up and
ready at once: clients place new stripes on it after their next topology
refresh (about a second), and the events that rebalance a cluster after a
drive is added see it appear. NODE remembers the drive in its data
directory (added-drives.json) and opens it again when it restarts with the
same flags, after its --drive drives; a drive listed in both is opened once,
as --drive says.

--capacity caps what the drive holds (64MiB, 10G, 1.5TiB; K/M/G/T and
KiB…PiB are powers of 1024, KB…PB of 1000); default its whole file system.
The drive's id, node, pool, class and capacity are printed (--json: the
drive's record and its capacity in bytes).`,
		Example: `  weft drive add n2 /mnt/sdc
  weft drive add n2 /mnt/nvme1 --class nvme --pool fast
  weft drive add n3 /srv/weft/d4 --class hdd --capacity 500GiB
  weft drive add n2 /mnt/sdc --json`,
		Args: exactArgs(2, "a node name and a directory on that node (e.g. n2 /mnt/sdc)"),
		RunE: func(c *cobra.Command, args []string) error {
			req := admin.AddDriveRequest{Node: args[0], Path: args[1], Class: addClass, Pool: addPool}
			if !filepath.IsAbs(req.Path) {
				return usageError{fmt.Errorf("PATH %q is relative: give the directory's absolute path on node %s", req.Path, req.Node)}
			}
			if addClass != "" {
				if _, err := drive.ParseClass(addClass); err != nil {
					return usageError{fmt.Errorf("--class: %w", err)}
				}
			}
			if addCapacity != "" {
				n, err := drive.ParseSize(addCapacity)
				if err != nil {
					return usageError{fmt.Errorf("--capacity: %w", err)}
				}
				req.Capacity = n
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			r, err := cl.AddDrive(c.Context(), req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), r)
			}
			capacity := "whole file system"
			if r.Capacity > 0 {
				capacity = humanBytes(r.Capacity)
			}
			t := newTable(c.OutOrStdout(), "ID", "NODE", "POOL", "CLASS", "CAPACITY", "STATUS", "PATH")
			t.row(r.Drive.ID.String(), r.Drive.Node, r.Drive.Pool, r.Drive.Class, capacity, string(r.Drive.Status), r.Drive.Path)
			return t.flush()
		},
	}
	add.Flags().StringVar(&addClass, "class", "", "drive class: nvme, ssd or hdd (default ssd)")
	add.Flags().StringVar(&addPool, "pool", "", `pool to join, created if missing (default "default")`)
	add.Flags().StringVar(&addCapacity, "capacity", "", "most bytes the drive holds, e.g. 64MiB, 10G (default: the whole file system)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List drives with availability, status, pool and usage",
		Long: `List every drive with its availability (up, down), status (ready,
suspended, draining, removed), class, pool and usage. A drive moving to
another pool (weft drive move) shows "draining→POOL" while a drain job
empties it; its BLOCKS count down to 0, then it shows "ready" in POOL.`,
		Example: "  weft drive list\n  weft drive list --json",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).Drives, func(w io.Writer, drives []cluster.Drive) error {
				t := newTable(w, "ID", "NODE", "STATE", "STATUS", "CLASS", "POOL", "USED", "SIZE", "USE%", "BLOCKS", "PATH")
				for _, d := range drives {
					used, size, pct, blocks := "-", "-", "-", "-"
					if d.Live != nil && d.Live.Error == "" {
						used, size = humanBytes(d.Live.UsedBytes), humanBytes(d.Live.TotalBytes)
						pct, blocks = percent(d.Live.TotalBytes-d.Live.FreeBytes, d.Live.TotalBytes), strconv.FormatInt(d.Live.Blocks, 10)
					}
					status := string(d.Status)
					if d.MoveTo != "" {
						status += "→" + d.MoveTo // moving: its blocks count down to 0
					}
					t.row(d.ID.String(), d.Node, string(d.State), status, d.Class, d.Pool, used, size, pct, blocks, d.Path)
				}
				return t.flush()
			})
		},
	}
	setStatus := func(verb string, to cluster.DriveStatus, short string) *cobra.Command {
		return &cobra.Command{
			Use:     verb + " DRIVE",
			Short:   short,
			Example: fmt.Sprintf("  weft drive %s d3", verb),
			Args:    exactArgs(1, "one drive id (e.g. d3)"),
			RunE: func(c *cobra.Command, args []string) error {
				id, err := cluster.ParseDriveID(args[0])
				if err != nil {
					return usageError{err}
				}
				cl, err := g.client()
				if err != nil {
					return err
				}
				d, err := cl.SetDriveStatus(c.Context(), id, to)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c.OutOrStdout(), d)
				}
				fmt.Fprintf(c.OutOrStdout(), "drive %s on %s is %s\n", d.ID, d.Node, d.Status)
				return nil
			},
		}
	}
	remove := &cobra.Command{
		Use:   "remove DRIVE",
		Short: "Empty a drive (a drain job moves every unit off it), then retire it",
		Long: `Set the drive to draining — no new blocks go to it, it keeps serving reads —
and start a drain job that moves every unit off it, re-protected on other
drives. When no file references the drive any more, the job marks it
removed. Reads and writes go on meanwhile. Watch it with weft job view.`,
		Example: "  weft drive remove d3",
		Args:    exactArgs(1, "one drive id (e.g. d3)"),
		RunE: func(c *cobra.Command, args []string) error {
			id, err := cluster.ParseDriveID(args[0])
			if err != nil {
				return usageError{err}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			r, err := cl.RemoveDrive(c.Context(), id)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), r)
			}
			fmt.Fprintf(c.OutOrStdout(), "drive %s on %s is draining; drain job %d moves its data (weft job view %d --watch)\n",
				r.Drive.ID, r.Drive.Node, r.Job, r.Job)
			return nil
		},
	}
	cmd.AddCommand(list, add, remove, newDriveMoveCmd(g),
		setStatus("suspend", cluster.StatusSuspended, "Stop placing new blocks on a drive (it keeps serving reads)"),
		setStatus("resume", cluster.StatusReady, "Return a suspended drive to service"))
	return cmd
}
