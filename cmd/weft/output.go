package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/admin"
)

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints aligned columns: a header row, then rows.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) { fmt.Fprintln(t.tw, strings.Join(cols, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }

// humanBytes formats n in binary units (KiB, MiB, …) with one decimal.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// percent formats part/whole as a percentage, "-" when whole is 0.
func percent(part, whole int64) string {
	if whole == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

// query runs one read-only admin call for command c and prints its answer:
// JSON with --json, else through render.
func query[T any](g *globals, c *cobra.Command, fetch func(*admin.Client, context.Context) (T, error), render func(io.Writer, T) error) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	v, err := fetch(cl, c.Context())
	if err != nil {
		return err
	}
	if g.json {
		return printJSON(c.OutOrStdout(), v)
	}
	return render(c.OutOrStdout(), v)
}
