package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/mount"
)

func newMountCmd(g *globals) *cobra.Command {
	var (
		private  bool
		debug    bool
		logLevel string
		pprof    bool
		noCache  bool
		syncOps  bool
		noLocal  bool
		metrics  string
		ahead    int
		capStr   string
		inline   string
	)
	cmd := &cobra.Command{
		Use:   "mount MOUNTPOINT",
		Short: "Mount the cluster's namespace with FUSE (the native client)",
		Long: `Mount the cluster at MOUNTPOINT and serve it until interrupted (Ctrl-C,
SIGTERM) or unmounted (umount MOUNTPOINT, fusermount3 -u MOUNTPOINT).

The client talks to the control plane (etcd) for metadata and straight to
the nodes' block services for data: there is no gateway hop. Files are
erasure coded or mirrored as their pool or directory asks (ec:4+2 on a
local cluster); reads reconstruct from parity when a drive or node is down.

The mount is shared by all users (allow_other) and the kernel checks POSIX
permissions for every uid and gid (default_permissions). Data written is
buffered per open file and written out in whole stripes; close(2) and
fsync(2) make it durable and visible to other mounts.

Metadata is cached in the mount and kept coherent by an etcd watch: a
change made through another mount (or by a job) is seen once the watch
has delivered it, normally within a millisecond or two, and the kernel's
own caches add up to 1 s (attributes and names). --no-meta-cache turns the
mount's cache off. Access times follow relatime and are committed in the
background within a second (many files per transaction): this mount shows
them at once, other clients a second later; a crash loses those not yet
committed.

Creates and unlinks are written back: in a directory this mount holds the
delegation of (it takes it when it creates or removes files there and
nobody else uses the directory), they are acknowledged at once and
committed to etcd within milliseconds, many per transaction. Another
client that reads or changes the directory first gets the delegation back,
so it sees every acknowledged change. The chown, chmod and utimes of a
file created there are written back with its create, and the commit of
its data at close carries them in one transaction; those of a directory
made there are written back too. fsync(2) of the file
or of the directory waits for the commit, as on a local file system; a
change not yet committed when the mount's machine crashes is lost whole
(never half applied). The data of a file created there is durable at
fsync too, like its create, and its blocks on drives of the mount's own
machine are synced once for a batch of such files (syncfs(2)) rather
than one by one; other data is durable when close(2) returns.
--sync-dirops commits every create and unlink before replying, as NFS
does.

The mount connects as a client identity: --pki DIR ($WEFT_PKI, or
weft-data/pki) holds the cluster's ca.crt and one client certificate
(client-NAME.crt and .key; --as NAME if there are several), issued with
weft cert issue --client NAME. --insecure mounts a cluster run without
TLS. --metrics serves on a loopback address only.

Readahead: a sequential reader gets --readahead stripes (default 4) read
ahead of it; a strided reader (records of about the same size at a constant
distance, as N tasks reading one shared file) gets its next records
prefetched instead of whole stripes; random reads get nothing.
--max-readahead caps how far one reader's prefetch goes (an administrator's
guard against prefetching what is not read: the
weft_mount_prefetch_unread_bytes_total counter of --metrics shows it).

Small files: a file of at most --inline-max bytes (default 4KiB) has its
data committed inline, in its stripe map in etcd, in the transaction that
commits its size; it takes no block on the drives, its copies are etcd's
(one per member), and reading it reads only metadata. A file that grows
past the limit moves to blocks when it is next written out, with its
pool's protection. 0 stores every file in blocks. Every mount reads
inline files whatever its own setting; weft file info shows them.`,
		Example: `  weft mount /mnt/weft                 # in the directory of weft local up's weft-data
  weft --admin 10.0.0.1:7080 mount --pki /etc/weft/pki /mnt/weft
  weft mount --pki /etc/weft/pki --as backup /mnt/weft   # client:backup of several
  weft mount --private ~/weft        # only the mounting user may use it
  weft mount --max-readahead 4MiB /mnt/weft   # at most 4 MiB ahead of a reader
  weft mount --inline-max 0 /mnt/weft         # every file's data in blocks`,
		Args: exactArgs(1, "one mount point"),
		RunE: func(c *cobra.Command, args []string) error {
			addr, err := admin.Discover(g.admin)
			if err != nil {
				return err
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)}
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			if pprof && metrics == "" {
				return usageError{fmt.Errorf("--pprof serves on the --metrics address: give --metrics 127.0.0.1:PORT too")}
			}
			pkiDir := ""
			if !g.insecure {
				if pkiDir, _ = g.pkiDir(); pkiDir == "" {
					return usageError{fmt.Errorf("no certificates: pass --pki DIR (or $%s) with the cluster's ca.crt and a client certificate (weft cert issue --client NAME), "+
						"or --insecure for a cluster run without TLS", envPKI)}
				}
			}
			var prefetchCap int64
			switch capStr {
			case "":
			case "0", "off":
				prefetchCap = -1
			default:
				if prefetchCap, err = drive.ParseSize(capStr); err != nil || prefetchCap <= 0 {
					return usageError{fmt.Errorf("--max-readahead %q: give a size such as 8MiB or 512KiB, or 0 to turn prefetch off", capStr)}
				}
			}
			inlineMax, err := parseInlineMax(inline)
			if err != nil {
				return err
			}
			if ahead < 0 {
				return usageError{fmt.Errorf("--readahead %d: give a number of stripes, or 0 for the default (4)", ahead)}
			}
			return mount.Run(c.Context(), mount.Options{
				Readahead: ahead, PrefetchCap: prefetchCap, InlineMax: inlineMax,
				Admin: addr, Dir: args[0], AllowOther: !private, Debug: debug, Log: log, NoCache: noCache, SyncDirOps: syncOps, NoLocalIO: noLocal, Metrics: metrics, Pprof: pprof,
				Ready: func(dir string) { fmt.Fprintf(c.OutOrStdout(), "mounted: %s\n", dir) },
				PKI:   pkiDir, Identity: g.as,
			})
		},
	}
	cmd.Flags().BoolVar(&private, "private", false, "do not allow other users (no allow_other)")
	cmd.Flags().BoolVar(&debug, "debug", false, "log every FUSE request")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	cmd.Flags().BoolVar(&noCache, "no-meta-cache", false, "ask etcd for every lookup and getattr instead of the watch-coherent metadata cache")
	cmd.Flags().BoolVar(&syncOps, "sync-dirops", false, "commit every create and unlink to etcd before replying (no write-back)")
	cmd.Flags().BoolVar(&noLocal, "no-local-io", false, "read and write every unit through its node, even of drives on this machine (to measure or diagnose the network path)")
	cmd.Flags().StringVar(&metrics, "metrics", "", "serve Prometheus metrics of the mount at http://ADDR/metrics and its workers at http://ADDR/workers (weft mount workers ADDR)")
	cmd.Flags().IntVar(&ahead, "readahead", 0, "stripes read ahead of each sequential reader (default 4)")
	cmd.Flags().StringVar(&capStr, "max-readahead", "", "cap on how far one reader's prefetch reads ahead of it (stripes for sequential readers, records for strided ones), e.g. 8MiB; 0 turns prefetch off (default: no cap beyond --readahead)")
	cmd.Flags().StringVar(&inline, "inline-max", "4KiB", "largest file whose data is committed inline, in its stripe map in etcd, rather than in blocks (at most 64KiB; 0 stores every file in blocks)")
	cmd.Flags().BoolVar(&pprof, "pprof", false, "also serve Go profiles at http://ADDR/debug/pprof/ of --metrics ADDR")
	cmd.AddCommand(&cobra.Command{
		Use:   "workers ADDR",
		Short: "Show a running mount's background workers (needs weft mount --metrics ADDR)",
		Long: `Show the background workers of the mount serving --metrics ADDR: its
metadata cache (cache-follow, cache-progress, cache-flush), its write-back
(delegations), its open files (opens), the metrics server (metrics) and
the wait for the FUSE server's end (fuse). The table is weft node
workers' (see its help for the columns), with the mount point in the NODE
column; --json prints the mount's entry with every field.

A mount point named "workers" is mounted with weft mount ./workers.`,
		Example: `  weft mount --metrics 127.0.0.1:9100 /mnt/weft &
  weft mount workers 127.0.0.1:9100
  weft mount workers 127.0.0.1:9100 --json | jq '.workers[] | {name, state, errors}'`,
		Args: exactArgs(1, "the mount's --metrics address (e.g. 127.0.0.1:9100)"),
		RunE: func(c *cobra.Command, args []string) error {
			ws, err := admin.NewClient(args[0]).MountWorkers(c.Context())
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), ws)
			}
			return printWorkers(c.OutOrStdout(), time.Now(), ws)
		},
	})
	return cmd
}

// parseInlineMax reads --inline-max: a size of at most meta.MaxInline, 0
// for none; it returns client.Config.InlineMax (negative: none).
func parseInlineMax(v string) (int, error) {
	n, err := drive.ParseSize(v)
	switch {
	case err != nil || n < 0:
		return 0, usageError{fmt.Errorf("--inline-max %q: give a size such as 4KiB, or 0 to store every file in blocks", v)}
	case n > meta.MaxInline:
		return 0, usageError{fmt.Errorf("--inline-max %s: at most %d bytes (64KiB): larger files belong in blocks", v, meta.MaxInline)}
	case n == 0:
		return -1, nil
	}
	return int(n), nil
}
