package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/qos"
)

// qosStatsLong is the help of weft qos stats.
const qosStatsLong = `Asks every node that is up for its statistics of the last N complete
seconds (--seconds, 1 to 60: the nodes keep 60) and prints them per
interval of K seconds (--interval, 1 to N).

By default, per interval, pool and class, summed over the nodes and
both directions:

  IOPS     block reads and writes per second
  MB/S     megabytes (10^6 bytes) per second
  PENDING  the average number of I/Os at the drives (outside QoS)
  QUEUED   the average number of I/Os waiting in QoS
  SECONDS  the interval's length

Every pool and class with I/O in the window has a row in every interval.

With --fine, per interval, node, pool, class, direction (RW: r or w),
size class, job, client and process, the rows of the keys that did I/O
in the interval:

  SIZE     <4KiB, <64KiB, <1MiB by the I/O's bytes; unit: a whole block
           of 1 MiB or more (every write, and a read of a whole unit of
           the default size); >=1MiB: a part of a larger unit; other: see
           below
  JOB      the job whose I/O it is (maintenance), - for none
  CLIENT   the mount (mount-<session>), or the node whose jobs made it
           (node-<name>)
  PID      the process, as the kernel named it in the FUSE request (the
           calling thread's id); - when unknown: reads by the mount's
           readahead, write-outs of data that several processes wrote,
           the jobs' I/O
  IOPS, MB/S as above
  AVG-MS, MIN-MS, MAX-MS
           the latency of one I/O, queued in QoS and at the drive, in
           milliseconds; the CSV and JSON also give the drive's part
  QUEUED   the average number of these I/Os waiting in QoS

A node keeps at most 1024 keys a second: the I/Os of further keys are
summed per pool, class and direction in rows of size "other" (job,
client and pid empty), and weft names the node and the number of such
I/Os on stderr. A direct read of a drive on the mount's own machine does
not pass a block service and is not counted.

--csv prints comma-separated values with a header row (times in RFC 3339,
UTC); with --fine its columns are

  node,start,seconds,pool,class,rw,size,job,client,pid,ops,bytes,
  mb_per_sec,avg_ms,min_ms,max_ms,drive_avg_ms,drive_min_ms,
  drive_max_ms,queued,pending

(an empty job, client or pid is unknown). --json prints the API's answer.
A node that does not answer is named on stderr.`

func newQoSStatsCmd(g *globals) *cobra.Command {
	var seconds, interval int
	var fine, csvOut bool
	cmd := &cobra.Command{
		Use:   "stats [--seconds N] [--interval K] [--fine] [--csv | --json]",
		Short: "Show the I/O of each pool and class, or per job, client and process (--fine), from every node",
		Long:  qosStatsLong,
		Example: `  weft qos stats                      # the last 10 s, per second
  weft qos stats --seconds 60 --interval 10
  weft qos stats --fine --seconds 5   # who does the I/O, per node
  weft qos stats --fine --csv --seconds 60 > io.csv
  weft qos stats --fine --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, args []string) error {
			if csvOut && g.json {
				return usageError{fmt.Errorf("--csv and --json: give one of them (CSV for spreadsheets and scripts, JSON for programs)")}
			}
			if seconds < 1 || seconds > qos.StatsSeconds {
				return usageError{fmt.Errorf("--seconds %d: give 1 to %d (the nodes keep %d seconds)", seconds, qos.StatsSeconds, qos.StatsSeconds)}
			}
			if interval < 1 || interval > seconds {
				return usageError{fmt.Errorf("--interval %d: give 1 to --seconds (%d)", interval, seconds)}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			var errs []string
			if fine {
				st, err := cl.QoSFineStats(c.Context(), seconds, interval)
				if err != nil {
					return err
				}
				switch {
				case g.json:
					return printJSON(c.OutOrStdout(), st)
				case csvOut:
					err = printFineCSV(c.OutOrStdout(), st.Rows)
				default:
					err = printFineTable(c.OutOrStdout(), st.Rows)
				}
				if err != nil {
					return err
				}
				for _, n := range st.Nodes {
					if o := st.Overflow[n]; o > 0 {
						fmt.Fprintf(c.ErrOrStderr(), "weft: node %s: %d I/Os were of keys past the %d a second it keeps; they are in the rows of size other\n", n, o, qos.MaxFineKeys)
					}
				}
				errs = st.Errors
			} else {
				st, err := cl.QoSStats(c.Context(), seconds, interval)
				if err != nil {
					return err
				}
				switch {
				case g.json:
					return printJSON(c.OutOrStdout(), st)
				case csvOut:
					err = printStatsCSV(c.OutOrStdout(), st.Rows)
				default:
					err = printStatsTable(c.OutOrStdout(), st.Rows)
				}
				if err != nil {
					return err
				}
				errs = st.Errors
			}
			for _, e := range errs {
				fmt.Fprintln(c.ErrOrStderr(), "weft: "+e)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&seconds, "seconds", 10, "how many past seconds (1-60)")
	cmd.Flags().IntVar(&interval, "interval", 1, "seconds per row (1 to --seconds)")
	cmd.Flags().BoolVar(&fine, "fine", false, "per node, job, client, process, direction and size class")
	cmd.Flags().BoolVar(&csvOut, "csv", false, "print comma-separated values with a header row")
	return cmd
}

func printStatsTable(w io.Writer, rows []qos.Row) error {
	t := newTable(w, "TIME", "POOL", "CLASS", "IOPS", "MB/S", "PENDING", "QUEUED", "SECONDS")
	for _, r := range rows {
		t.row(time.Unix(r.Start, 0).Format("15:04:05"), r.Pool, string(r.Class), fmtFloat(r.IOPS, 1), fmtFloat(r.MBps, 2),
			fmtFloat(r.Pending, 3), fmtFloat(r.Queued, 3), strconv.Itoa(r.Seconds))
	}
	return t.flush()
}

func printStatsCSV(w io.Writer, rows []qos.Row) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"start", "seconds", "pool", "class", "ops", "bytes", "iops", "mb_per_sec", "pending", "queued"})
	for _, r := range rows {
		_ = cw.Write([]string{csvTime(r.Start), strconv.Itoa(r.Seconds), r.Pool, string(r.Class), strconv.FormatInt(r.Ops, 10),
			strconv.FormatInt(r.Bytes, 10), fmtFloat(r.IOPS, 3), fmtFloat(r.MBps, 6), fmtFloat(r.Pending, 6), fmtFloat(r.Queued, 6)})
	}
	cw.Flush()
	return cw.Error()
}

// fineCols are the key columns of a fine row as printed: its size class
// ("other" for an Other row), job, client and pid ("" when unknown).
func fineCols(r qos.FineRow) (size, job, client, pid string) {
	if r.Other {
		return "other", "", "", ""
	}
	if r.PID > 0 {
		pid = strconv.Itoa(r.PID)
	}
	return string(r.Size), r.Job, r.Client, pid
}

func printFineTable(w io.Writer, rows []qos.FineRow) error {
	t := newTable(w, "TIME", "NODE", "POOL", "CLASS", "RW", "SIZE", "JOB", "CLIENT", "PID", "IOPS", "MB/S", "AVG-MS", "MIN-MS", "MAX-MS", "QUEUED")
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, r := range rows {
		size, job, client, pid := fineCols(r)
		t.row(time.Unix(r.Start, 0).Format("15:04:05"), r.Node, r.Pool, string(r.Class), string(r.Dir), size, dash(job), dash(client), dash(pid),
			fmtFloat(r.IOPS, 1), fmtFloat(r.MBps, 2), fmtFloat(r.AvgMs, 2), fmtFloat(r.MinMs, 2), fmtFloat(r.MaxMs, 2), fmtFloat(r.Queued, 3))
	}
	return t.flush()
}

// fineCSVHeader is the header row of weft qos stats --fine --csv.
var fineCSVHeader = []string{"node", "start", "seconds", "pool", "class", "rw", "size", "job", "client", "pid", "ops", "bytes",
	"mb_per_sec", "avg_ms", "min_ms", "max_ms", "drive_avg_ms", "drive_min_ms", "drive_max_ms", "queued", "pending"}

func printFineCSV(w io.Writer, rows []qos.FineRow) error {
	cw := csv.NewWriter(w)
	_ = cw.Write(fineCSVHeader)
	for _, r := range rows {
		size, job, client, pid := fineCols(r)
		_ = cw.Write([]string{r.Node, csvTime(r.Start), strconv.Itoa(r.Seconds), r.Pool, string(r.Class), string(r.Dir), size, job, client, pid,
			strconv.FormatInt(r.Ops, 10), strconv.FormatInt(r.Bytes, 10), fmtFloat(r.MBps, 6),
			fmtFloat(r.AvgMs, 3), fmtFloat(r.MinMs, 3), fmtFloat(r.MaxMs, 3), fmtFloat(r.DriveAvgMs, 3), fmtFloat(r.DriveMinMs, 3), fmtFloat(r.DriveMaxMs, 3),
			fmtFloat(r.Queued, 6), fmtFloat(r.Pending, 6)})
	}
	cw.Flush()
	return cw.Error()
}

// csvTime formats Unix second sec in RFC 3339, UTC.
func csvTime(sec int64) string { return time.Unix(sec, 0).UTC().Format(time.RFC3339) }
