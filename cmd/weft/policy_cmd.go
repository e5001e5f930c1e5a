package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
)

func newPolicyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Install, show and try the pool policy (placement, migration, deletion rules)",
		Long: `The pool policy is a short text of SQL-like rules saying which pool a
new file's data goes to (SET POOL), when files move between pools
(MIGRATE), and which files are deleted (DELETE) or listed (LIST). The
language is described in docs/policy.md.

A policy is checked before it is installed: every syntax or type error,
and every pool that does not exist, is reported with its line and
column, and nothing is installed. Each install is a new version; the
cluster keeps every version (weft policy history, weft policy show
--version N).

SET POOL rules apply at once: every mount follows the installed policy
and places each new regular file by the first rule that matches what is
known when it is created (path, name, owner, group, mode). A file no
rule places goes to its directory's pool. A rule that places a file in
a pool with no drive ready makes the create fail with "no space left on
device". MIGRATE, DELETE and LIST rules are run by tier jobs;
weft policy test shows what they would do now, without doing it.`,
		Example: `  weft policy install rules.pol --comment "tars to capacity"
  weft policy show
  weft policy history
  weft policy test rules.pol --path /projects`,
	}
	var comment string
	install := &cobra.Command{
		Use:   "install FILE [--comment TEXT]",
		Short: "Check a policy and install it as the next version (FILE - reads stdin)",
		Long: `Checks FILE against the cluster (syntax, types, pools and protections)
and installs it as the next version. A policy with mistakes is refused
as a whole, each problem on a line starting with its line and column;
the exit status is then 1 and the installed policy is unchanged.`,
		Example: `  weft policy install rules.pol
  weft policy install - --comment "default to fast" <<'EOF'
  RULE 'default' SET POOL 'fast'
  EOF`,
		Args: exactArgs(1, "one policy file (or - for stdin)"),
		RunE: func(c *cobra.Command, args []string) error {
			text, err := readPolicy(c, args[0])
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			v, err := cl.InstallPolicy(c.Context(), text, comment)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if g.json {
				return printJSON(c.OutOrStdout(), v)
			}
			fmt.Fprintf(c.OutOrStdout(), "policy version %d installed: %d rules, checksum %s\n", v.Version, v.Rules, v.Checksum)
			return nil
		},
	}
	install.Flags().StringVar(&comment, "comment", "", "a note kept in the history")
	var version uint64
	show := &cobra.Command{
		Use:   "show [--version N]",
		Short: "Print the installed policy (or version N) as it was written",
		Example: `  weft policy show
  weft policy show --version 2 > old.pol
  weft policy show --json`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, func(cl *admin.Client, ctx context.Context) (cluster.InstalledPolicy, error) {
				return cl.Policy(ctx, version)
			},
				func(w io.Writer, p cluster.InstalledPolicy) error {
					fmt.Fprintf(os.Stderr, "-- version %d, installed %s%s, %d rules, checksum %s\n",
						p.Version, p.Installed.UTC().Format(time.RFC3339), byText(p.By), p.Rules, p.Checksum)
					_, err := io.WriteString(w, p.Text)
					if err == nil && !strings.HasSuffix(p.Text, "\n") {
						_, err = io.WriteString(w, "\n")
					}
					return err
				})
		},
	}
	show.Flags().Uint64Var(&version, "version", 0, "the version to print (default: the installed one)")
	history := &cobra.Command{
		Use:     "history",
		Short:   "List every installed version: when, by whom, rules, checksum",
		Example: "  weft policy history\n  weft policy history --json",
		Args:    exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			return query(g, c, (*admin.Client).PolicyHistory, func(w io.Writer, vs []cluster.PolicyVersion) error {
				if len(vs) == 0 {
					fmt.Fprintln(w, "no policy installed (weft policy install FILE)")
					return nil
				}
				t := newTable(w, "VERSION", "INSTALLED", "BY", "RULES", "CHECKSUM", "COMMENT")
				for _, v := range vs {
					by := v.By
					if by == "" {
						by = "-"
					}
					t.row(fmt.Sprint(v.Version), v.Installed.UTC().Format(time.RFC3339), by, fmt.Sprint(v.Rules), v.Checksum, v.Comment)
				}
				return t.flush()
			})
		},
	}
	var dir string
	var maxFiles int
	var allFiles bool
	var timeout time.Duration
	test := &cobra.Command{
		Use:   "test [FILE] [--path DIR] [--max-files N] [--timeout D]",
		Short: "Show what a policy would do to the files now, changing nothing",
		Long: `Evaluates FILE's rules (or the installed policy's, without FILE) on
every file under DIR and prints, per rule, the files and bytes it
matches and those it would act on: for SET POOL the files it would
place if they were created now (and how many are in another pool now);
for MIGRATE the files that would move, from which pool to which, with
THRESHOLD checked against each pool's use now, files taken by WEIGHT
and the target kept under LIMIT; for DELETE and LIST the files it would
delete or list. Then each pool's use now and after the migrations.

The scan is bounded: it stops after --max-files inodes or --timeout
(20 seconds unless told; at most 30 minutes), and then says how far it
got (the counts cover the files scanned). A namespace scans at some
tens of thousands of files a second (docs/benchmarks.md): give a
namespace of millions of files a --timeout of minutes to see it whole.
The command waits for the node's answer as long as --timeout, plus a
few seconds.`,
		Example: `  weft policy test rules.pol
  weft policy test rules.pol --path /scratch
  weft policy test rules.pol --timeout 10m      # a namespace of millions of files, whole
  weft policy test --json | jq '.rules[] | {rule, selected}'
  weft policy test --files --json | jq -r '.rules[] | select(.rule=="cold") | .samples[]'`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("%s takes at most one policy file (got %d arguments; see --help)", c.CommandPath(), len(args))}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			budget := time.Duration(0) // the node's default
			if c.Flags().Changed("timeout") {
				if timeout <= 0 || timeout > admin.MaxDryRunBudget {
					return usageError{fmt.Errorf("--timeout %s: want a duration of more than 0 and at most %s, such as 5m", timeout, admin.MaxDryRunBudget)}
				}
				budget = timeout
			}
			var text string
			if len(args) == 1 {
				var err error
				if text, err = readPolicy(c, args[0]); err != nil {
					return err
				}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			rep, err := cl.TestPolicyWithin(c.Context(), admin.PolicyTestRequest{Text: text, Path: dir, MaxFiles: maxFiles, Files: allFiles}, budget)
			if err != nil {
				if len(args) == 1 {
					return fmt.Errorf("%s: %w", args[0], err)
				}
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), rep)
			}
			return printDryRun(c.OutOrStdout(), rep)
		},
	}
	test.Flags().StringVar(&dir, "path", "/", "the directory whose files are evaluated (a path in the file system)")
	test.Flags().BoolVar(&allFiles, "files", false, fmt.Sprintf("list every file each rule selects (up to %d per rule), not only the first %d", admin.MaxDryRunSamples, admin.DryRunSamples))
	test.Flags().IntVar(&maxFiles, "max-files", 0, fmt.Sprintf("scan at most N inodes (default %d)", admin.DefaultDryRunFiles))
	test.Flags().DurationVar(&timeout, "timeout", 20*time.Second, fmt.Sprintf("scan for at most D, then report what was scanned (at most %s)", admin.MaxDryRunBudget))
	cmd.AddCommand(install, show, history, test, policyApplyCmd(g))
	return cmd
}

// readPolicy reads a policy file, or stdin for "-".
func readPolicy(c *cobra.Command, name string) (string, error) {
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(c.InOrStdin())
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return "", fmt.Errorf("read the policy: %w", err)
	}
	return string(b), nil
}

func byText(by string) string {
	if by == "" {
		return ""
	}
	return " by " + by
}

// printDryRun prints a dry run's report: one block per rule, then pools.
func printDryRun(w io.Writer, rep admin.PolicyTestReport) error {
	what := "the given policy"
	if rep.Version > 0 {
		what = fmt.Sprintf("installed policy version %d", rep.Version)
	}
	fmt.Fprintf(w, "%s on %s: %d files, %s (%d inodes scanned in %.1fs)\n", what, rep.Path, rep.Files, humanBytes(rep.Bytes), rep.Scanned, rep.Seconds)
	if !rep.Complete {
		fmt.Fprintf(w, "PARTIAL: the scan stopped at LIN %d (--max-files, or --timeout: 20 s unless given); the counts cover the files scanned\n", rep.NextLIN)
	}
	t := newTable(w, "RULE", "KIND", "MATCHED", "MATCHED BYTES", "ACTS ON", "BYTES", "WHAT")
	for _, r := range rep.Rules {
		var what string
		switch r.Kind {
		case "SET POOL":
			what = fmt.Sprintf("new files to %s (%d elsewhere now)", r.Pool, r.Elsewhere)
		case "MIGRATE":
			var parts []string
			for _, m := range r.Migrations {
				s := fmt.Sprintf("%s→%s: %d of %d files, %s (%s", m.From, m.To, m.Files, m.Candidates, humanBytes(m.Bytes), m.Stop)
				if m.Skipped > 0 {
					s += fmt.Sprintf(", %d over LIMIT", m.Skipped)
				}
				parts = append(parts, s+")")
			}
			what = strings.Join(parts, "; ")
			if what == "" {
				what = "nothing to move"
			}
		case "DELETE":
			what = "delete"
		case "LIST":
			what = "list " + r.List
		}
		t.row(r.Rule, r.Kind, fmt.Sprint(r.Matched), humanBytes(r.MatchedBytes), fmt.Sprint(r.Selected), humanBytes(r.SelectedBytes), what)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if rep.Unplaced > 0 {
		fmt.Fprintf(w, "%d files match no SET POOL rule (new ones would take their directory's pool)\n", rep.Unplaced)
	}
	fmt.Fprintln(w)
	pt := newTable(w, "POOL", "SIZE", "USED", "USE%", "AFTER", "USE% AFTER")
	for _, p := range rep.Pools {
		pt.row(p.Pool, humanBytes(p.Size), humanBytes(p.Used), percent(p.Used, p.Size), humanBytes(p.UsedAfter), percent(p.UsedAfter, p.Size))
	}
	return pt.flush()
}
