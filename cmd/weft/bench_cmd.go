package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/bench"
	"github.com/weftfs/weft/internal/meta"
)

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure: metadata rates, FUSE's own ceiling (loopback), and make test namespaces (populate)",
		Long: `Benchmark tools. Data throughput is measured with fio (see
docs/benchmarks.md and scripts/bench-fuse.sh); these commands cover what
fio does not.`,
	}
	var files int
	metaRates := &cobra.Command{
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
	metaRates.Flags().IntVar(&files, "files", 10000, "number of files")
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
	cmd.AddCommand(metaRates, loop, newBenchPopulateCmd(g))
	return cmd
}

func newBenchPopulateCmd(g *globals) *cobra.Command {
	var o bench.PopulateOptions
	var inject string
	cmd := &cobra.Command{
		Use:   "populate --tops T --dirs M --objects N [--under /populate] [--batch 256]",
		Short: "Make a test namespace of millions of empty files, straight into the metadata store",
		Long: `Make a test namespace for namespace-wide tools (the policy dry run, fsck)
without going through a mount: the inodes and directory entries are
written straight into the cluster's metadata store, --batch creates per
transaction, with the records the same creates made one by one would
write (link counts, back-pointers, directory times, per-pool usage, LINs
from the shared counter). Files are empty: no data, size 0.

The tree, below --under (made if missing; its parent must exist):

  t0000 … t{T-1}             T top directories
    d00000 … d{M-1}          M subdirectories in each
      N objects in each, per thousand:
        780  f000000.dat                 empty file
        183  f000000.log                 empty file
         30  s000000/ f0.dat … f4.dat    directory of 5 files
          4  h000000.dat + h000000.lnk   a file with a second hard link
          3  x0000-00000-000000/ f0.dat … f3.dat, a directory of 4 files
             made for this subdirectory but placed in the NEXT top
             directory (cross-linked layout)

Names depend only on T, M and N, so a run is repeatable on a fresh
cluster; a second run on the same --under is refused (the names are
taken) before it writes anything. About 1.16 inodes and 1.13 files per
object: T x M x N = 886,000 makes about 1,000,000 files.

It connects to the metadata store (etcd) as a client identity, as weft
mount does: the --pki directory must hold a client certificate (weft
local up makes client:mount; --as NAME picks one of several). While it
runs it prints its progress on stderr; at the end the counts, the time
and the rate (--json: as JSON).

--inject KIND --faults N then makes N namespace faults of KIND, for
weft fsck's tests and benchmarks: N more files named fsck-KIND-NNNNNN,
spread over the subdirectories d00000…, each created with the fault
injected (the meta/… failpoints of docs/architecture.md, "Fault
injection"), so that a dry run of weft fsck reports exactly N findings
of KIND:

  missing-backpointer   the entry, and the inode without its back-pointer
  wrong-entry           the entry naming a LIN that was never allocated
  link-count            the inode's link count one too high
  unreachable           the inode only: no entry, not an orphan
  dangling-entry        the entry only: no inode
  usage-counter         the inode and entry, without the pool's usage
                        counted (one finding, the pool's, whatever N)`,
		Example: `  weft bench populate --tops 4 --dirs 222 --objects 1000        # ~1,000,000 files in /populate
  weft bench populate --tops 1 --dirs 10 --objects 1000 --under /small --json
  weft --admin 127.0.0.1:7080 bench populate --pki /tmp/c1/pki --tops 2 --dirs 50 --objects 500
  weft bench populate --tops 2 --dirs 10 --objects 500 --under /bad --inject link-count --faults 25`,
		Args: exactArgs(0, "no arguments (the shape is --tops, --dirs, --objects)"),
		RunE: func(c *cobra.Command, _ []string) error {
			o.Inject = meta.FsckKind(inject)
			want, err := bench.PopulateExpected(o)
			if err != nil {
				return usageError{err}
			}
			m, done, err := g.openNamespace(c.Context())
			if err != nil {
				return err
			}
			defer done()
			errw := c.ErrOrStderr()
			var last time.Time
			o.Progress = func(r bench.PopulateResult) {
				if time.Since(last) < time.Second {
					return
				}
				last = time.Now()
				printPopulateProgress(errw, r, want.Inodes)
			}
			r, err := bench.Populate(c.Context(), m, o)
			if !last.IsZero() {
				printPopulateProgress(errw, r, want.Inodes)
				fmt.Fprintln(errw)
			}
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), r)
			}
			t := newTable(c.OutOrStdout(), "UNDER", "INODES", "FILES", "DIRS", "HARD LINKS", "TRANSACTIONS", "SECONDS", "INODES/S")
			t.row(r.Under, fmt.Sprint(r.Inodes), fmt.Sprint(r.Files), fmt.Sprint(r.Directories), fmt.Sprint(r.HardLinks),
				fmt.Sprint(r.Transactions), fmt.Sprintf("%.1f", r.Seconds), fmt.Sprintf("%.0f", r.InodesPerSec))
			if err := t.flush(); err != nil {
				return err
			}
			if r.Injected > 0 {
				fmt.Fprintf(c.OutOrStdout(), "injected %d faults of kind %s (weft fsck start --dry-run finds them)\n", r.Injected, r.Inject)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Tops, "tops", 4, "T: top directories")
	cmd.Flags().IntVar(&o.Dirs, "dirs", 10, "M: subdirectories in each top directory")
	cmd.Flags().IntVar(&o.Objects, "objects", 1000, "N: objects in each subdirectory (see the mix above)")
	cmd.Flags().StringVar(&o.Under, "under", "/populate", "the directory to make the tree in (a path in the file system)")
	cmd.Flags().IntVar(&o.Batch, "batch", meta.DefaultBulkBatch, "creates and links per metadata transaction (fewer if the store's limits require)")
	cmd.Flags().StringVar(&inject, "inject", "", "after the tree, make --faults namespace faults of KIND (see above), for fsck's tests")
	cmd.Flags().IntVar(&o.Faults, "faults", 0, "how many faults --inject makes")
	return cmd
}

// printPopulateProgress rewrites the progress line of weft bench populate.
func printPopulateProgress(w io.Writer, r bench.PopulateResult, want int64) {
	pct := 0.0
	if want > 0 {
		pct = 100 * float64(r.Inodes) / float64(want+1)
	}
	fmt.Fprintf(w, "\rpopulate %s: %d of about %d inodes (%.0f%%) in %.0fs, %.0f inodes/s ", r.Under, r.Inodes, want+1, pct, r.Seconds, r.InodesPerSec)
}
