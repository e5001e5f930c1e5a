package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// fsckReport is the fsck job's report phase: one item that sums the
// earlier phases' counters per kind and lists the first findings kept.
type fsckReport struct{ singleTask }

func (*fsckReport) Name() string { return "report" }

// Process writes the summary: the table per kind, then the findings kept.
func (*fsckReport) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	e, err := fsckEnvOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	counts := map[string]int64{}
	checked := map[string]int64{}
	for _, rep := range j.Reports {
		for _, s := range rep.Scopes {
			for k, n := range s.Counts {
				counts[k] += n
				if k == "checked" || k == "skipped" {
					checked[rep.Name+"."+k] += n
				}
			}
		}
	}
	var shown []fsckShown
	for _, k := range fsckKinds(j.Params) {
		kept, err := e.JobData().ListData(ctx, j.ID, fsckPfxFindings+string(k)+"/", "", fsckFirst)
		if err != nil {
			return job.ItemResult{}, err
		}
		for _, d := range kept {
			var f fsckShown
			if err := json.Unmarshal(d.Value, &f); err != nil {
				return job.ItemResult{}, fmt.Errorf("fsck: job %d data %s: %w", j.ID, d.Key, err)
			}
			if f.V == fsckShownVersion {
				shown = append(shown, f)
			}
		}
	}
	return job.ItemResult{Items: 1, Summary: fsckSummary(j.Params, checked, counts, shown)}, nil
}

// fsckKinds returns the kinds of findings of the halves a job with
// parameters p checks, in report order.
func fsckKinds(p map[string]string) []meta.FsckKind {
	var out []meta.FsckKind
	ns, layout := fsckOnly(p)
	if ns {
		out = append(out, meta.FsckKinds()...)
	}
	if layout {
		out = append(out, meta.FsckLayoutKinds()...)
	}
	return out
}

// fsckSummary is the job's report: what was checked (checked has
// "PHASE.checked" and "PHASE.skipped"), the table per kind (found,
// repaired, changed meanwhile, failed) and the first findings.
func fsckSummary(p map[string]string, checked, c map[string]int64, shown []fsckShown) string {
	var b bytes.Buffer
	ns, layout := fsckOnly(p)
	var parts []string
	if ns {
		parts = append(parts, fmt.Sprintf("%d directory entries, %d inodes' back-pointers, %d inodes' links",
			checked["entries.checked"], checked["backpointers.checked"], checked["links.checked"]))
	}
	if layout {
		parts = append(parts, fmt.Sprintf("%d units' blocks (%d skipped: unplaced, or on drives down or not answering), %d pools' usage",
			checked["stripes.checked"], checked["stripes.skipped"], checked["usage.checked"]))
	}
	b.WriteString("checked " + strings.Join(parts, "; "))
	if p["dry-run"] == "true" {
		b.WriteString(" (dry run: nothing repaired)")
	}
	b.WriteString("\n\n")
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tFOUND\tREPAIRED\tCHANGED\tFAILED")
	var found int64
	for _, k := range fsckKinds(p) {
		get := func(what string) int64 { return c[string(k)+"."+what] }
		found += get("found")
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", k, get("found"), get("repaired"), get("changed"), get("failed"))
	}
	w.Flush()
	if found == 0 {
		what := "the namespace and its layout are"
		switch {
		case !layout:
			what = "the namespace is"
		case !ns:
			what = "the layout is"
		}
		b.WriteString("\nno findings: " + what + " consistent\n")
		return b.String()
	}
	fmt.Fprintf(&b, "\nfirst findings (at most %d of each kind):\n", fsckFirst)
	w = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tPATH\tLIN\tDETAIL\tOUTCOME")
	for _, f := range shown {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", f.Kind, f.Path, f.LIN, f.Detail, f.Outcome)
	}
	w.Flush()
	return b.String()
}
