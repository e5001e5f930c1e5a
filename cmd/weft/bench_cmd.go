package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/bench"
)

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure: metadata rates, and FUSE's own ceiling (loopback)",
		Long: `Benchmark tools. Data throughput is measured with fio (see
docs/benchmarks.md and scripts/bench-fuse.sh); these commands cover what
fio does not.`,
	}
	var files int
	meta := &cobra.Command{
		Use:   "meta DIR",
		Short: "Create, stat and remove N empty files in one directory from one thread",
		Long: `Create N empty files in a new subdirectory of DIR, stat each, remove each,
all from one thread, and print the rate of each phase. Run it on a weft
mount and on a local directory to compare.`,
		Example: "  weft bench meta --files 10000 weft-mnt\n  weft bench meta --json /var/tmp",
		Args:    exactArgs(1, "one directory"),
		RunE: func(c *cobra.Command, args []string) error {
			r, err := bench.Meta(args[0], files)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), r)
			}
			t := newTable(c.OutOrStdout(), "OP", "FILES", "SECONDS", "OPS/S")
			t.row("create", fmt.Sprint(files), fmt.Sprintf("%.2f", r.CreateSec), fmt.Sprintf("%.0f", r.CreatePS))
			t.row("stat", fmt.Sprint(files), fmt.Sprintf("%.2f", r.StatSec), fmt.Sprintf("%.0f", r.StatPS))
			t.row("remove", fmt.Sprint(files), fmt.Sprintf("%.2f", r.RemoveSec), fmt.Sprintf("%.0f", r.RemovePS))
			return t.flush()
		},
	}
	meta.Flags().IntVar(&files, "files", 10000, "number of files")
	loop := &cobra.Command{
		Use:   "loopback SRC MOUNTPOINT",
		Short: "Serve a FUSE loopback of SRC at MOUNTPOINT with passthrough refused (FUSE's ceiling)",
		Long: `Mount SRC at MOUNTPOINT through go-fuse's loopback file system, with kernel
FUSE passthrough refused, so that every byte crosses the FUSE protocol and a
Go server as weft's do. fio on this mount measures what FUSE itself allows on
this machine: the baseline weft's mount is compared with. Runs until Ctrl-C.`,
		Args: exactArgs(2, "a source directory and a mount point"),
		RunE: func(c *cobra.Command, args []string) error {
			srv, err := bench.Loopback(args[0], args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "mounted: %s\n", args[1])
			done := make(chan struct{})
			go func() { srv.Wait(); close(done) }()
			select {
			case <-c.Context().Done():
				return srv.Unmount()
			case <-done:
				return nil
			}
		},
	}
	cmd.AddCommand(meta, loop)
	return cmd
}
