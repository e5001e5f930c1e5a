package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// fsckReport is the fsck job's report phase: one item that sums the
// earlier phases' counters per kind and lists the first findings kept.
type fsckReport struct{}

func (*fsckReport) Name() string { return "report" }

func (*fsckReport) Split(context.Context, job.Env, *job.Job) ([]job.TaskSpec, error) {
	return []job.TaskSpec{{Scope: "report", From: 0, To: 1}}, nil
}

func (*fsckReport) Items(_ context.Context, _ job.Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	if from < to && limit > 0 {
		return []uint64{from}, nil
	}
	return nil, nil
}

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
				if k == "checked" {
					checked[rep.Name] += n
				}
			}
		}
	}
	var shown []fsckShown
	for _, k := range meta.FsckKinds() {
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
	return job.ItemResult{Items: 1, Summary: fsckSummary(checked, counts, shown, j.Params["dry-run"] == "true")}, nil
}

// fsckSummary is the job's report: what was checked, the table per kind
// (found, repaired, changed meanwhile, failed) and the first findings.
func fsckSummary(checked, c map[string]int64, shown []fsckShown, dry bool) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "checked %d directory entries, %d inodes' back-pointers, %d inodes' links",
		checked["entries"], checked["backpointers"], checked["links"])
	if dry {
		b.WriteString(" (dry run: nothing repaired)")
	}
	b.WriteString("\n\n")
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tFOUND\tREPAIRED\tCHANGED\tFAILED")
	var found int64
	for _, k := range meta.FsckKinds() {
		get := func(what string) int64 { return c[string(k)+"."+what] }
		found += get("found")
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", k, get("found"), get("repaired"), get("changed"), get("failed"))
	}
	w.Flush()
	if found == 0 {
		b.WriteString("\nno findings: the namespace is consistent\n")
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
