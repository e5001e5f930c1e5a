package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/job"
)

func newCallbackCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "callback",
		Short: "Run your own command when an event happens (a pool low on space, a drive down, …)",
		Long: `A callback is a command of yours that the cluster runs for each new event
of the kinds it names (weft job events --help lists them): to page
someone, open a ticket, or start a migration script of your own when a
pool runs low.

Where and how it runs: on the node that is job coordinator at the time
(weft job status names it), as the user weft server runs as, in /,
without a shell, with the server's environment plus the event's:

  WEFT_EVENT_ID       the event's number (weft job events show ID)
  WEFT_EVENT_KIND     its kind: low-space, drive-down, …
  WEFT_EVENT_SUBJECT  what it is about: "pool fast", "d7", "node n2"
  WEFT_EVENT_DETAIL   what was observed, one line
  WEFT_EVENT_JOB      the job it started or that covers it ("" if none)
  WEFT_EVENT_TIME     when it was recorded (RFC 3339, UTC)
  WEFT_PARAM_<KEY>    each of the event's parameters, KEY in upper case:
                      POOL, USAGE and FREE (percent of the pool's drives
                      in service), THRESHOLD, HIGH, DRIVE, NODE, JOB, …
                      (weft job events show ID lists an event's)

In its arguments (--arg), %kind, %subject, %detail, %id, %job and %time
become the event's, %KEY the parameter KEY (%pool, %usage; empty when the
event has none), and %% a single %.

Callbacks of one event run one after another (by name), events in order;
each run is killed (its whole process group) at its --timeout. Its exit
status — or timeout, not found, not executable — its duration and the
last 4 KiB of its output are kept with the event: weft job events list
shows the results, weft job events show ID the output.

A callback runs for events recorded after it was added. Runs survive a
coordinator failover: the next coordinator continues after the last event
whose callbacks all ran, so none is skipped, but the command that was
running may run a second time for the same event — write it so that
running twice does no harm. The command must exist on every node that
may become coordinator; on a node where it does not, the run says "not
found". Adding one needs an administrator's certificate or a token: it
runs code on a node.`,
	}
	var (
		events  []string
		command string
		args    []string
		timeout time.Duration
	)
	add := &cobra.Command{
		Use:   "add NAME --event KIND[,KIND...] --command /PATH [--arg ARG]... [--timeout 60s]",
		Short: "Add a callback",
		Long: `Add callback NAME (1-32 of a-z, 0-9, '-', '_') that runs the executable at
/PATH (an absolute path on the nodes, run without a shell) with the ARGs,
for every new event of the kinds KIND (repeat --event or separate kinds
with commas; "all" for every kind). Kinds: ` + strings.Join(job.EventKinds(), ", ") + `.

--timeout bounds a run: 1s to 10m, default 60s; at its end the command
and every process it started in its process group are killed.`,
		Example: `  weft callback add page-oncall --event low-space,pool-threshold \
      --command /usr/local/bin/page-oncall --arg "%subject: %detail"
  weft callback add migrate --event pool-threshold --command /opt/site/migrate.sh \
      --arg --from=%pool --arg --used=%usage --timeout 10m
  weft callback add audit --event all --command /usr/local/bin/log-weft-event`,
		Args: exactArgs(1, "one callback name"),
		RunE: func(c *cobra.Command, a []string) error {
			switch {
			case len(events) == 0:
				return usageError{fmt.Errorf("weft callback add %s: give --event KIND (one of %s, or all)", a[0], strings.Join(job.EventKinds(), ", "))}
			case command == "":
				return usageError{fmt.Errorf("weft callback add %s: give --command /PATH, the absolute path of an executable", a[0])}
			case !filepath.IsAbs(command):
				return usageError{fmt.Errorf("--command %q: give an absolute path (such as /usr/local/bin/page-oncall): it runs without a shell and without $PATH", command)}
			case timeout < 0:
				return usageError{fmt.Errorf("--timeout %s: use 1s to %s", timeout, job.MaxCallbackTimeout)}
			}
			req := admin.AddCallbackRequest{Name: a[0], Events: events, Command: command, Args: args}
			if timeout != 0 {
				req.Timeout = timeout.String()
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			cb, err := cl.AddCallback(c.Context(), req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), cb)
			}
			fmt.Fprintf(c.OutOrStdout(), "callback %s added: runs %s for %s events on the coordinator's node (timeout %s)\n",
				cb.Name, commandLine(cb), strings.Join(cb.Events, ", "), cb.Timeout)
			return nil
		},
	}
	add.Flags().StringSliceVar(&events, "event", nil, "event kinds to run for (repeat, or separate with commas; all: every kind)")
	add.Flags().StringVar(&command, "command", "", "absolute path of the executable to run")
	add.Flags().StringArrayVar(&args, "arg", nil, "an argument of the command, %NAME substituted (repeat for more; kept whole, commas too)")
	add.Flags().DurationVar(&timeout, "timeout", 0, "kill a run after this long (1s to 10m; default 60s)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the callbacks",
		Long: `List the callbacks by name: the event kinds each runs for, its command line
(arguments as given, before substitution), its timeout and when it was
added. --json prints them with every field (timeout in nanoseconds).`,
		Example: "  weft callback list\n  weft callback list --json | jq -r '.[].name'",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).Callbacks, func(w io.Writer, cbs []job.Callback) error {
				t := newTable(w, "NAME", "EVENTS", "TIMEOUT", "CREATED", "COMMAND")
				for _, cb := range cbs {
					t.row(cb.Name, strings.Join(cb.Events, ","), cb.Timeout.String(), cb.Created.Local().Format("2006-01-02 15:04:05"), commandLine(cb))
				}
				return t.flush()
			})
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a callback",
		Long: `Delete callback NAME: it runs for no further event. A run in progress
finishes and is kept with its event; the runs of earlier events stay.`,
		Example: "  weft callback delete page-oncall",
		Args:    exactArgs(1, "one callback name"),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			if err := cl.DeleteCallback(c.Context(), a[0]); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "callback %s deleted\n", a[0])
			return nil
		},
	}
	cmd.AddCommand(add, list, del)
	return cmd
}

// commandLine is a callback's command and arguments as a shell would
// read them (arguments with spaces or quotes quoted).
func commandLine(cb job.Callback) string {
	parts := []string{cb.Command}
	for _, a := range cb.Args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// callbackResults summarises an event's callback runs for a table:
// "page:exit 0, log:timeout", or "-".
func callbackResults(ev job.Event) string {
	if len(ev.Callbacks) == 0 {
		return "-"
	}
	var out []string
	for _, r := range ev.Callbacks {
		out = append(out, r.Name+":"+r.Result())
	}
	return strings.Join(out, ", ")
}
