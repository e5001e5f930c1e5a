package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/bench"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
)

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure: data throughput of a mount or an NFS export (throughput), I/O patterns (io), metadata rates, FUSE's own ceiling (loopback), and make test namespaces (populate)",
		Long: `Benchmark tools. Data throughput of a mount is measured with fio too (see
docs/benchmarks.md, scripts/bench-fuse.sh and scripts/bench-reads.sh);
these commands cover what fio does not: a directory and an NFS export
driven by the same code (throughput, meta; scripts/bench-nfs.sh compares
the NFS gateway with the FUSE mount), shared-file strided I/O (io
--pattern strided), FUSE's ceiling, test namespaces.`,
	}
	var files, metaJobs int
	metaRates := &cobra.Command{
		Use:   "meta DIR|NFS-URL",
		Short: "Create, stat and remove N empty files in one directory (a mount, a local directory or an NFS export)",
		Long: `Create N empty files in a new subdirectory of the target, stat each,
remove each, and print the rate of each phase (files over the phase's
time). The target is a directory (a weft mount, a local directory) or an
NFSv3 export given as a libnfs URL, as weft local up --nfs prints:

  nfs://HOST[:PORT]/EXPORT?nfsport=P&mountport=P&version=3&uid=N&gid=N

On NFS a create is a CREATE (exclusive), a stat a LOOKUP, a remove a
REMOVE; on a directory, open(O_CREAT|O_EXCL) and close, stat(2),
unlink(2). --jobs N runs N clients at once (NFS: N connections), each
with its share of the names. Run it on a weft mount and on a local
directory, or on the mount and a gateway, to compare.`,
		Example: `  weft bench meta --files 10000 weft-mnt
  weft bench meta --json /var/tmp
  weft bench meta --jobs 4 'nfs://127.0.0.1/?nfsport=15449&mountport=15449&version=3'`,
		Args: exactArgs(1, "one target: a directory or an nfs:// URL"),
		RunE: func(c *cobra.Command, args []string) error {
			t, err := bench.ParseTarget(args[0], false)
			if err != nil {
				return usageError{err}
			}
			if files < 1 || metaJobs < 1 {
				return usageError{fmt.Errorf("--files %d --jobs %d: want at least 1 of each", files, metaJobs)}
			}
			r, err := bench.Meta(c.Context(), t, files, metaJobs)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), r)
			}
			t2 := newTable(c.OutOrStdout(), "OP", "FILES", "JOBS", "SECONDS", "OPS/S")
			t2.row("create", fmt.Sprint(files), fmt.Sprint(r.Jobs), fmt.Sprintf("%.2f", r.CreateSec), fmt.Sprintf("%.0f", r.CreatePS))
			t2.row("stat", fmt.Sprint(files), fmt.Sprint(r.Jobs), fmt.Sprintf("%.2f", r.StatSec), fmt.Sprintf("%.0f", r.StatPS))
			t2.row("remove", fmt.Sprint(files), fmt.Sprint(r.Jobs), fmt.Sprintf("%.2f", r.RemoveSec), fmt.Sprintf("%.0f", r.RemovePS))
			return t2.flush()
		},
	}
	metaRates.Flags().IntVar(&files, "files", 10000, "number of files")
	metaRates.Flags().IntVar(&metaJobs, "jobs", 1, "clients at once (NFS: connections)")
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
	cmd.AddCommand(metaRates, newBenchThroughputCmd(g), loop, newBenchPopulateCmd(g), newBenchIOCmd(g))
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

func newBenchIOCmd(g *globals) *cobra.Command {
	o := bench.IOOptions{Tasks: 4, Segments: 256, Fsync: true}
	var record int
	cmd := &cobra.Command{
		Use:   "io DIR [--pattern sequential|random|strided] [--tasks N] [--record BYTES] [--segments S]",
		Short: "Write then read records from N tasks: sequential or random on N files, or strided in one shared file",
		Long: `Run --tasks N tasks at once (each with its own open file) that write
records of --record bytes, then read them back and check every byte, in a
new subdirectory of DIR (removed afterwards unless --keep), and print the
bytes, seconds, MB/s and records per second of each phase.

Patterns:

  sequential   task i writes file task000i front to back, S records, then
               reads it front to back (default record: 1 MiB)
  random       task i writes every record of its file once in a random
               order, then reads each once in another (default: 4 KiB)
  strided      the N tasks share one file of N x S records interleaved:
               record s*N+i is task i's record of segment s; task i writes
               records i, i+N, i+2N, ... and then reads the records of task
               (i+1) mod N, so that no task reads what it wrote (as ior's
               "hard" tests do; default record: 47,008 bytes, neither page-
               nor block-aligned)

The write phase ends when every task's file is synced (--fsync=false: when
it is closed). The read phase follows at once: read caches of the kernel
and of weft may hold some of the data; drop the kernel's before a cold
read by running the phases apart (fio) or compare with a local directory
in the same run. On a weft mount, the strided read is what the readahead's
stride detection serves (see docs/admin-guide.md, "Readahead and prefetch
cap"; weft_mount_prefetch_unread_bytes_total shows what was prefetched in
vain). Records read back wrong are an error naming the file and record.`,
		Example: `  weft bench io --pattern strided --tasks 8 --segments 1000 weft-mnt
  weft bench io --pattern sequential --tasks 4 --segments 256 weft-mnt    # 4 x 256 MiB
  weft bench io --pattern random --tasks 4 --record 4096 --segments 10000 weft-mnt
  weft bench io --pattern strided --json /var/tmp    # the same on a local disk`,
		Args: exactArgs(1, "one directory"),
		RunE: func(c *cobra.Command, args []string) error {
			o.Dir, o.Record = args[0], record
			if o.Record == 0 {
				switch o.Pattern {
				case bench.Sequential:
					o.Record = 1 << 20
				case bench.Random:
					o.Record = 4096
				default:
					o.Record = bench.DefaultStridedRecord
				}
			}
			if st, err := os.Stat(o.Dir); err != nil || !st.IsDir() {
				return usageError{fmt.Errorf("weft bench io %s: not an existing directory", o.Dir)}
			}
			switch {
			case o.Pattern != bench.Sequential && o.Pattern != bench.Random && o.Pattern != bench.Strided:
				return usageError{fmt.Errorf("--pattern %q: choose sequential, random or strided", o.Pattern)}
			case o.Tasks < 1:
				return usageError{fmt.Errorf("--tasks %d: give at least 1", o.Tasks)}
			case o.Record < 16:
				return usageError{fmt.Errorf("--record %d: give at least 16 bytes", o.Record)}
			case o.Segments < 1:
				return usageError{fmt.Errorf("--segments %d: give at least 1", o.Segments)}
			}
			r, err := bench.IO(c.Context(), o)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), r)
			}
			fmt.Fprintf(c.OutOrStdout(), "%s: %d tasks x %d records of %d bytes, %d file(s)\n", r.Pattern, r.Tasks, r.Segments, r.Record, r.Files)
			t := newTable(c.OutOrStdout(), "PHASE", "BYTES", "SECONDS", "MB/S", "RECORDS/S")
			t.row("write", fmt.Sprint(r.Bytes), fmt.Sprintf("%.2f", r.WriteSec), fmt.Sprintf("%.1f", r.WriteMBps), fmt.Sprintf("%.0f", r.WriteOps))
			t.row("read", fmt.Sprint(r.Bytes), fmt.Sprintf("%.2f", r.ReadSec), fmt.Sprintf("%.1f", r.ReadMBps), fmt.Sprintf("%.0f", r.ReadOps))
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&o.Pattern, "pattern", bench.Strided, "sequential, random or strided")
	cmd.Flags().IntVar(&o.Tasks, "tasks", o.Tasks, "N: tasks running at once")
	cmd.Flags().IntVar(&record, "record", 0, "bytes per write and read (default: 1 MiB sequential, 4 KiB random, 47008 strided)")
	cmd.Flags().IntVar(&o.Segments, "segments", o.Segments, "S: records per task")
	cmd.Flags().BoolVar(&o.Fsync, "fsync", o.Fsync, "sync each file at the end of the write phase")
	cmd.Flags().BoolVar(&o.Keep, "keep", false, "leave the files in place")
	return cmd
}

func newBenchThroughputCmd(g *globals) *cobra.Command {
	var o bench.ThroughputOptions
	var size, record, block, tests string
	var buffered bool
	cmd := &cobra.Command{
		Use:   "throughput DIR|NFS-URL",
		Short: "Sequential and random read and write throughput of a directory or an NFS export",
		Long: `Measure data throughput on a target: a directory (a weft mount, a local
directory) or an NFSv3 export given as a libnfs URL, as weft local up --nfs
prints:

  nfs://HOST[:PORT]/EXPORT?nfsport=P&mountport=P&version=3&uid=N&gid=N

(PORT, nfsport: the NFS port, 2049 without them; mountport: the MOUNT
port, the NFS port without it, as a weft gateway serves both on one; uid
and gid: the AUTH_SYS identity, the caller's without them. There is no
portmapper lookup.)

--jobs N clients work at once (NFS: N TCP connections, one call in flight
on each), each on a file of --size bytes of its own in a new directory,
in phases:

  seqwrite   write the file in --record writes, then sync it
  seqread    read it back in --record reads
  randread   --block reads at random aligned offsets, for --runtime
  randwrite  --block writes at random aligned offsets, for --runtime,
             then sync

On NFS every write is an UNSTABLE WRITE and a sync a COMMIT, as a kernel
client writes back; a read is a READ (the client caches nothing). On a
directory files are opened with O_DIRECT (--buffered: without), so that
every read and write reaches the file system's server past the kernel's
page cache, as on NFS; a sync is fsync(2). Every read is checked: each
4 KiB of a file carries its file and offset, so a wrong byte stops the
run with an error. A phase's time runs from the start of every job to
the end of the last, the sync included. The files and directory are
removed at the end. seqwrite always runs (it writes the files the other
phases use); --tests picks the phases reported.`,
		Example: `  weft bench throughput weft-mnt                                  # 1 job, 256MiB file, 1MiB records, 4KiB random
  weft bench throughput --jobs 4 --size 128MiB --runtime 10s --json weft-mnt
  weft bench throughput --jobs 4 'nfs://127.0.0.1/?nfsport=15449&mountport=15449&version=3'
  weft bench throughput --tests randread,randwrite --ops 2000 'nfs://10.0.0.5/projects?uid=1000&gid=1000'`,
		Args: exactArgs(1, "one target: a directory or an nfs:// URL"),
		RunE: func(c *cobra.Command, args []string) error {
			t, err := bench.ParseTarget(args[0], !buffered)
			if err != nil {
				return usageError{err}
			}
			sz, err := drive.ParseSize(size)
			if err != nil {
				return usageError{fmt.Errorf("--size: %w", err)}
			}
			rec, err := drive.ParseSize(record)
			if err != nil {
				return usageError{fmt.Errorf("--record: %w", err)}
			}
			blk, err := drive.ParseSize(block)
			if err != nil {
				return usageError{fmt.Errorf("--block: %w", err)}
			}
			if rec > 64<<20 || blk > 64<<20 {
				return usageError{fmt.Errorf("--record %s, --block %s: at most 64MiB", record, block)}
			}
			o.Size, o.Record, o.Block = sz, int(rec), int(blk)
			if tests != "" {
				o.Tests = strings.Split(tests, ",")
			}
			if err := o.Check(); err != nil {
				return usageError{err}
			}
			r, err := bench.Throughput(c.Context(), t, o)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), r)
			}
			tb := newTable(c.OutOrStdout(), "TEST", "JOBS", "OPS", "BYTES", "SECONDS", "MB/S", "IOPS")
			for _, p := range r.Phases {
				tb.row(p.Test, fmt.Sprint(r.Jobs), fmt.Sprint(p.Ops), fmt.Sprintf("%.1fMiB", float64(p.Bytes)/(1<<20)), fmt.Sprintf("%.2f", p.Seconds),
					fmt.Sprintf("%.1f", p.MBps), fmt.Sprintf("%.0f", p.IOPS))
			}
			return tb.flush()
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Jobs, "jobs", 1, "clients at once (NFS: connections), each with a file of its own")
	f.StringVar(&size, "size", "256MiB", "size of each job's file (a multiple of --record)")
	f.StringVar(&record, "record", "1MiB", "size of a sequential read or write (a multiple of 4KiB)")
	f.StringVar(&block, "block", "4KiB", "size of a random read or write (a multiple of 4KiB)")
	f.DurationVar(&o.Runtime, "runtime", 10*time.Second, "how long each random phase runs (0: --ops only)")
	f.IntVar(&o.Ops, "ops", 0, "at most this many random operations per job and phase (0: --runtime only)")
	f.StringVar(&tests, "tests", "", "phases to report, comma-separated, of seqwrite,seqread,randread,randwrite (default all)")
	f.BoolVar(&buffered, "buffered", false, "on a directory, open files without O_DIRECT (through the page cache)")
	return cmd
}
