package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// Lost data: repair, integrityscan and mediascan each find stripes whose
// data is gone for good (restripe.ErrLost). That is a finding, not an
// item error: the scan goes on, the stripes go to the namespace's
// lost-data list (meta.Meta.RecordLost; `weft file lost list`), a file
// entering the list gets one data-lost event in the engine's event log,
// and the item counts them (countLost, in ItemResult.Errors as findings).
// Each job's last phase reports the list (lostReport).

// countLost names the counter of stripes found lost.
const countLost = "lost"

// recordLost lists the stripes of lin that j found lost and counts them
// in res; a file new to the list gets a data-lost event. A stripe already
// listed (a scan that ran before) is counted again but not re-listed.
func recordLost(ctx context.Context, e Env, j *job.Job, lin meta.LIN, stripes []meta.LostStripe, res *job.ItemResult) error {
	if len(stripes) == 0 {
		return nil
	}
	first, _, err := e.Meta().RecordLost(ctx, lin, stripes)
	if errors.Is(err, meta.ErrNotFound) {
		return nil // deleted meanwhile: nothing left to lose
	}
	if err != nil {
		return fmt.Errorf("recording the lost stripes of LIN %d: %w", lin, err)
	}
	if res.Counts == nil {
		res.Counts = map[string]int64{}
	}
	res.Counts[countLost] += int64(len(stripes))
	p := pathOf(ctx, e.Meta(), lin)
	idx := make([]string, 0, len(stripes))
	for _, s := range stripes {
		idx = append(idx, fmt.Sprint(s.Index))
	}
	res.Note = fmt.Sprintf("%s: data lost in stripes %s (%s); see weft file lost list", p, strings.Join(idx, ","), stripes[0].Reason)
	e.Log().Error("data lost: restore the file from a backup, then delete or rewrite it",
		"path", p, "lin", uint64(lin), "stripes", strings.Join(idx, ","), "job", j.ID, "reason", stripes[0].Reason)
	if !first {
		return nil
	}
	_, err = e.RecordEvent(ctx, job.Event{Kind: job.EventDataLost, Subject: p, Job: j.ID,
		Detail:  fmt.Sprintf("LIN %d: %d stripes (%s) found lost by %s job %d: %s", lin, len(stripes), strings.Join(idx, ","), j.Type, j.ID, stripes[0].Reason),
		Outcome: "listed in weft file lost list until the file is deleted or the lost ranges rewritten; restore it from a backup"})
	if err != nil {
		// The list has it; a missing event must not make the scan redo
		// the file.
		e.Log().Warn("recording a data-lost event", "path", p, "err", err)
	}
	return nil
}

// finding reports whether err, from repairing or verifying one file, is a
// finding of the scan rather than a failure: too few units readable (lost
// or on down drives), or surviving units that disagree. Those are counted
// and the scan goes on.
func finding(err error) bool {
	return errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrCorrupt) || errors.Is(err, restripe.ErrLost)
}

// lostReport is the last phase of the jobs that find lost data: one item
// that writes the lost-data list into the phase report's Summary, those
// this job found first marked, and a one-line Note.
type lostReport struct{ singleTask }

func (lostReport) Name() string { return "report" }

func (lostReport) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	sum, note, err := lostSummary(ctx, e.Meta(), j.Created)
	if err != nil {
		return job.ItemResult{}, err
	}
	return job.ItemResult{Items: 1, Note: note, Summary: sum}, nil
}

// maxLostRows bounds the files lostSummary lists.
const maxLostRows = 200

// lostSummary formats the lost-data list: a table of the first
// maxLostRows files (path, LIN, stripes, byte ranges, since; "*" for the
// files first found at or after since) and a one-line total.
func lostSummary(ctx context.Context, m *meta.Meta, since time.Time) (table, total string, err error) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	files, found, more := 0, 0, false
	for after := meta.LIN(0); ; {
		page, err := m.ListLost(ctx, after, 100)
		if err != nil {
			return "", "", err
		}
		for _, f := range page {
			after = f.LIN
			files++
			isNew := !f.Since.Before(since)
			if isNew {
				found++
			}
			if files > maxLostRows {
				more = true
				continue
			}
			if files == 1 {
				fmt.Fprintln(w, "NEW\tPATH\tLIN\tSTRIPES\tRANGES\tSINCE")
			}
			mark := ""
			if isNew {
				mark = "*"
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\n", mark, pathOf(ctx, m, f.LIN), f.LIN, len(f.Stripes), formatRanges(f.Ranges()), f.Since.UTC().Format(time.RFC3339))
		}
		if len(page) < 100 {
			break
		}
	}
	if more {
		fmt.Fprintf(w, "…\t%d more\t\t\t\t\n", files-maxLostRows)
	}
	w.Flush()
	if files == 0 {
		return "", "no file has lost data", nil
	}
	return b.String(), fmt.Sprintf("%d files with lost data (%d found by this job): weft file lost list", files, found), nil
}

// formatRanges formats byte ranges as "0-4194303,8388608-8390000", or
// "-" for none.
func formatRanges(rs []meta.ByteRange) string {
	if len(rs) == 0 {
		return "-"
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return strings.Join(out, ",")
}
