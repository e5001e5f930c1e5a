package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// Relayout returns the relayout job type: it rewrites the files named by
// its "lins" parameter (LINs, "12,40") copy-on-write into the pool and
// with the protection their attributes name now (restripe.RelayoutFile),
// after weft file set-pool or set-protection changed them. A file's
// protection is its own if set, else its pool's. The files stay readable
// and writable meanwhile. Items are idempotent: a file already in place
// is only read. Phases: relayout (one task per file).
func Relayout() job.Type { return relayout{} }

type relayout struct{}

var (
	_ job.Type         = relayout{}
	_ job.Defaulter    = relayout{}
	_ job.ParamChecker = relayout{}
	_ job.ParamLister  = relayout{}
)

func (relayout) Name() string          { return "relayout" }
func (relayout) Set() job.ExclusionSet { return job.SetRestripe }
func (relayout) Phases() []job.Phase   { return []job.Phase{relayoutPhase{}} }

// Defaults: an administrator waits for it, ahead of background scans.
func (relayout) Defaults() (int, string) { return 4, "medium" }

// ParamNames: the files to rewrite.
func (relayout) ParamNames() []string { return []string{"lins"} }

// CheckParams: lins is a list of LINs.
func (relayout) CheckParams(p map[string]string) error {
	_, err := parseLINs(p["lins"])
	return err
}

// parseLINs parses "12,40" into sorted, distinct LINs. Errors wrap
// job.ErrInvalid.
func parseLINs(s string) ([]meta.LIN, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("%w: relayout needs lins=LIN[,LIN...] (weft file set-pool and set-protection start one for you)", job.ErrInvalid)
	}
	var out []meta.LIN
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%w: lins=%q: %q is not a LIN (the inode number stat shows)", job.ErrInvalid, s, f)
		}
		out = append(out, meta.LIN(n))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

type relayoutPhase struct{}

func (relayoutPhase) Name() string { return "relayout" }

func (relayoutPhase) Split(_ context.Context, _ job.Env, j *job.Job) ([]job.TaskSpec, error) {
	lins, err := parseLINs(j.Params["lins"])
	if err != nil {
		return nil, err
	}
	tasks := make([]job.TaskSpec, len(lins))
	for i, l := range lins {
		tasks[i] = job.TaskSpec{Scope: "file", From: uint64(l), To: uint64(l) + 1}
	}
	return tasks, nil
}

func (relayoutPhase) Items(_ context.Context, _ job.Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	if from < to && limit > 0 {
		return []uint64{from}, nil
	}
	return nil, nil
}

func (relayoutPhase) Process(ctx context.Context, env job.Env, _ *job.Job, _ string, item uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	return relayoutFile(ctx, e, meta.LIN(item))
}

// relayoutFile rewrites file lin into the pool and with the protection
// its attributes name now (restripe.RelayoutFile), and says what it did.
// A file deleted meanwhile is done; a file whose protection does not fit
// its data is counted as an error with its path. Other errors are
// returned: the namespace's, client.ErrUnavailable (too few drives in
// the pool), client.ErrConflict (a writer kept changing a stripe).
func relayoutFile(ctx context.Context, e Env, lin meta.LIN) (job.ItemResult, error) {
	attr, err := e.Meta().GetAttr(ctx, lin)
	if errors.Is(err, meta.ErrNotFound) {
		return job.ItemResult{Items: 1, Note: fmt.Sprintf("LIN %d: deleted before it was rewritten", lin)}, nil
	}
	if err != nil {
		return job.ItemResult{}, err
	}
	spec := attr.Protection.String()
	if attr.Protection.IsZero() {
		p, err := e.Cluster().GetPool(ctx, attr.Pool)
		if err != nil {
			return job.ItemResult{}, fmt.Errorf("%s: %w", pathOf(ctx, e.Meta(), lin), err)
		}
		spec = p.Protection
	}
	g, err := client.FileGeometry(attr, spec, 0)
	if err != nil {
		return job.ItemResult{Items: 1, Errors: 1, Note: fmt.Sprintf("%s: %v", pathOf(ctx, e.Meta(), lin), err)}, nil
	}
	r, err := e.Restriper().RelayoutFile(ctx, lin, g)
	if errors.Is(err, meta.ErrNotFound) {
		return job.ItemResult{Items: 1}, nil
	}
	if err != nil {
		return job.ItemResult{}, fmt.Errorf("%s: %w", pathOf(ctx, e.Meta(), lin), err)
	}
	res := job.ItemResult{Items: 1, Bytes: r.BytesWritten, Errors: int64(r.UnderProtected),
		Note: fmt.Sprintf("%s: %d of %d stripes rewritten into pool %s as %s", pathOf(ctx, e.Meta(), lin), r.Rewritten, r.Stripes, attr.Pool, spec)}
	if r.UnderProtected > 0 {
		res.Note += fmt.Sprintf(", %d below their protection (repair completes them)", r.UnderProtected)
	}
	e.Log().Info("relayout", "lin", uint64(lin), "pool", attr.Pool, "protection", spec, "rewritten", r.Rewritten, "stripes", r.Stripes)
	return res, nil
}
