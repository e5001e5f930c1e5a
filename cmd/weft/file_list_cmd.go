package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/meta"
)

// listPage is how many files the CLI asks for per page of a file list.
const listPage = 1000

func newFileListCmd(g *globals) *cobra.Command {
	var under bool
	cmd := &cobra.Command{
		Use:   "list --under-protected",
		Short: "List the files whose stripes are below their pool's protection",
		Long: `List the files with stripes below their pool's protection: stripes written
while drives or nodes were down, with units not placed or on too few nodes or
drives to survive what their pool could give them (the protection index,
kept with every stripe commit). For each: its path, LIN, the stripes below,
their data, the weakest tolerance they achieve against the target (how many
drives or nodes may fail), and since when.

A repair re-protects them; the cluster starts one by itself when drives or
nodes come back (see weft job events list), or start one with
weft job start repair. A stripe stays listed while the cluster cannot place
it better: bring the nodes back, or add drives, nodes or capacity.`,
		Example: `  weft file list --under-protected
  weft file list --under-protected --json | jq '.[].path'`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			if !under {
				return usageError{errors.New("file list: say what to list: --under-protected")}
			}
			page := func(cl *admin.Client, ctx context.Context, after meta.LIN) ([]admin.UnderProtectedFile, meta.LIN, error) {
				p, err := cl.UnderProtectedFiles(ctx, after, listPage)
				return p.Files, p.Next, err
			}
			return listPaged(c, g, page, "every stripe is at its pool's protection", func(w io.Writer, files []admin.UnderProtectedFile) error {
				t := newTable(w, "PATH", "LIN", "STRIPES", "BYTES", "MISSING", "ACHIEVED", "TARGET", "SINCE")
				for _, f := range files {
					achieved, target, since := f.Achieved.String(), f.Target.String(), sinceOf(f.Since)
					if f.Unknown == f.Stripes { // entries of format 1: units not placed
						achieved, target = "-", "-"
					}
					t.row(pathOr(f.Path), strconv.FormatUint(uint64(f.LIN), 10), strconv.Itoa(f.Stripes), humanBytes(int64(f.Bytes)),
						strconv.Itoa(f.Missing), achieved, target, since)
				}
				return t.flush()
			})
		},
	}
	cmd.Flags().BoolVar(&under, "under-protected", false, "list the files with stripes below their pool's protection")
	return cmd
}

func newFileLostCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "lost", Short: "The lost-data list: files with data no drive holds any more"}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the files with lost data, and the byte ranges lost",
		Long: `List the files with data the cluster cannot rebuild: stripes with fewer units
left than a read needs, for good (units missing or damaged, not merely on
drives that are down), as repair, integrityscan and mediascan found them.
For each: its path, LIN, the stripes lost, the byte ranges they held (first
and last byte), and since when. Reading those ranges gives an I/O error.

A file stays listed until it is deleted or the lost ranges are rewritten
(a write that replaces a whole stripe takes it off; truncating below it
too). Restore it from a backup, then delete or rewrite it.`,
		Example: `  weft file lost list
  weft file lost list --json | jq '.[] | {path, ranges}'`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(c *cobra.Command, _ []string) error {
			page := func(cl *admin.Client, ctx context.Context, after meta.LIN) ([]admin.LostFile, meta.LIN, error) {
				p, err := cl.LostFiles(ctx, after, listPage)
				return p.Files, p.Next, err
			}
			return listPaged(c, g, page, "no file has lost data", func(w io.Writer, files []admin.LostFile) error {
				t := newTable(w, "PATH", "LIN", "STRIPES", "LOST", "RANGES", "SINCE")
				for _, f := range files {
					rs := make([]string, len(f.Ranges))
					for i, r := range f.Ranges {
						rs[i] = r.String()
					}
					t.row(pathOr(f.Path), strconv.FormatUint(uint64(f.LIN), 10), strconv.Itoa(len(f.Stripes)), humanBytes(int64(f.Bytes)),
						strings.Join(rs, ","), sinceOf(f.Since))
				}
				return t.flush()
			})
		},
	})
	return cmd
}

// listPaged fetches every page of a list kept in LIN order (page returns
// the items after a LIN and the LIN to ask after next, 0 at the end) and
// prints them: as JSON with --json, empty if there are none, else with
// table.
func listPaged[T any](c *cobra.Command, g *globals, page func(cl *admin.Client, ctx context.Context, after meta.LIN) ([]T, meta.LIN, error),
	empty string, table func(w io.Writer, items []T) error) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	var items []T
	for after := meta.LIN(0); ; {
		got, next, err := page(cl, c.Context(), after)
		if err != nil {
			return err
		}
		items = append(items, got...)
		if next == 0 {
			break
		}
		after = next
	}
	w := c.OutOrStdout()
	if g.json {
		return printJSON(w, items)
	}
	if len(items) == 0 {
		fmt.Fprintln(w, empty)
		return nil
	}
	return table(w, items)
}

func pathOr(p string) string {
	if p == "" {
		return "<unlinked, still open>"
	}
	return p
}

func sinceOf(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
