package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/policy"
	"github.com/weftfs/weft/internal/tier"
)

// Tier returns the tier job type: it applies the installed pool policy's
// MIGRATE, DELETE and LIST rules to the namespace, as weft policy test
// predicts (both decide through package tier). Phases:
//
//   - scan: a LIN scan in pages of linPage LINs. Each page's regular
//     files are evaluated (tier.Evaluator, at the job's creation time)
//     and what the rules act on is kept as job data: the MIGRATE and
//     DELETE candidates under "c/PAGE", the LIST entries under "l/PAGE"
//     (package tier's entries record, versioned); the policy version
//     the job applies under "policy" (encodeJobPolicy, versioned).
//   - plan: one item. Every candidate is read back in LIN order and the
//     migrations planned against the pools' usage now
//     (tier.PlanMigrations: THRESHOLD, WEIGHT order, LIMIT); the files to
//     move and to delete are written under "t/PAGE", and the plan, per
//     rule and source pool, is the phase's summary. With dry-run=true
//     nothing is written and the job ends after the report.
//   - act: a LIN scan over the "t/" entries. A file to move is moved to
//     the rule's TO POOL (and PROTECTION, if it names one) copy-on-write
//     (restripe.RelayoutFile): clients keep reading and writing it. A
//     file whose pool changed since the scan is left alone. A file to
//     delete is deleted (every name) only if the rule still matches it
//     as it is now: a file changed since the scan is not deleted on stale
//     attributes.
//   - report: one item. Each LIST rule's files are written, one path per
//     line in LIN order, to /.weft/lists/NAME.JOB in the namespace; the
//     summary is a table per rule: files and bytes matched, selected,
//     done, errors.
//
// Parameters: policy (a version from weft policy history; default the
// one installed when the scan starts), path (a directory: only files
// under it; default /), dry-run (true: scan and plan only).
//
// Items are idempotent: a page scanned twice writes the same data, a file
// already in its target pool is only read, a deleted file is gone. The
// job belongs to the restripe set (it moves blocks) and frees space.
func Tier() job.Type { return newTier() }

func newTier() *tierType {
	t := &tierType{pols: map[uint64]*policy.Policy{}, jobs: map[job.JobID]*tierJobCache{}}
	t.phases = []job.Phase{&tierScan{t}, &tierPlan{singleTask{"plan"}, t}, &tierAct{t}, &tierReport{singleTask{"report"}, t}}
	return t
}

// Job data keys of a tier job.
const (
	tierKeyPolicy     = "policy"
	tierKeyPlan       = "plan"
	tierPfxCandidates = "c/"
	tierPfxLists      = "l/"
	tierPfxTakes      = "t/"
)

// TierListDir is the directory the tier job writes LIST rules' files in.
const TierListDir = "/.weft/lists"

// TierEnv is what the tier job needs of its node besides Env: the job's
// data (job.Engine implements TierData) and a file client to write the
// lists with.
type TierEnv interface {
	Env
	JobData() TierData
	Files() *client.Client
}

// TierData is the job engine's per-job data (job.Engine's methods).
type TierData interface {
	PutData(ctx context.Context, id job.JobID, k string, v []byte) error
	GetData(ctx context.Context, id job.JobID, k string) ([]byte, bool, error)
	DeleteData(ctx context.Context, id job.JobID, k string) error
	ListData(ctx context.Context, id job.JobID, prefix, after string, limit int) ([]job.DataEntry, error)
}

var _ TierData = (*job.Engine)(nil)

func tierEnvOf(e job.Env) (TierEnv, error) {
	x, ok := e.(TierEnv)
	if !ok {
		return nil, fmt.Errorf("%w (got %T, the tier job needs job data and a file client)", ErrEnv, e)
	}
	return x, nil
}

// tierType is the tier job type. It caches parsed policy versions (they
// never change) and, per job, the version the job applies (recorded once,
// by its scan's Split) and evaluators (which cache directory paths).
type tierType struct {
	phases []job.Phase

	mu   sync.Mutex
	pols map[uint64]*policy.Policy
	jobs map[job.JobID]*tierJobCache
}

// tierJobCache is what a node keeps of one tier job it works for.
type tierJobCache struct {
	version uint64
	evals   sync.Pool // *tier.Evaluator
}

// maxCachedJobs bounds tierType.jobs: the oldest job's cache goes first
// (a job that ended; one still running reads its version again).
const maxCachedJobs = 4

var (
	_ job.Type           = (*tierType)(nil)
	_ job.Defaulter      = (*tierType)(nil)
	_ job.SpaceSaver     = (*tierType)(nil)
	_ job.ParamChecker   = (*tierType)(nil)
	_ job.ParamLister    = (*tierType)(nil)
	_ job.ParamValidator = (*tierType)(nil)
)

func (*tierType) Name() string          { return "tier" }
func (*tierType) Set() job.ExclusionSet { return job.SetRestripe }
func (t *tierType) Phases() []job.Phase { return t.phases }

// Defaults: background work, at the low impact policy.
func (*tierType) Defaults() (int, string) { return 5, "low" }

// FreesSpace: moving files out of a full pool is how it gets space back.
func (*tierType) FreesSpace() bool { return true }

// ParamNames: see Tier.
func (*tierType) ParamNames() []string { return []string{"policy", "path", "dry-run"} }

// CheckParams checks the parameters' syntax.
func (*tierType) CheckParams(p map[string]string) error {
	if v, ok := p["policy"]; ok {
		if n, err := strconv.ParseUint(v, 10, 64); err != nil || n == 0 {
			return fmt.Errorf("%w: policy=%q: want a version number from weft policy history (1, 2, ...)", job.ErrInvalid, v)
		}
	}
	if v, ok := p["dry-run"]; ok && v != "true" && v != "false" {
		return fmt.Errorf("%w: dry-run=%q: want true or false", job.ErrInvalid, v)
	}
	if v, ok := p["path"]; ok && (v == "" || v[0] != '/') {
		return fmt.Errorf("%w: path=%q: want an absolute directory of the namespace, e.g. /projects", job.ErrInvalid, v)
	}
	return nil
}

// ValidateParams refuses a job with no policy to apply, or a path that
// is not a directory.
func (t *tierType) ValidateParams(ctx context.Context, env job.Env, p map[string]string) error {
	e, err := envOf(env)
	if err != nil {
		return err
	}
	if _, _, err := t.resolvePolicy(ctx, e, p); err != nil {
		return err
	}
	_, err = tierDir(ctx, e.Meta(), p)
	return err
}

// resolvePolicy returns the version the parameters name, or the
// installed one.
func (t *tierType) resolvePolicy(ctx context.Context, e Env, p map[string]string) (uint64, *policy.Policy, error) {
	var v uint64
	if s, ok := p["policy"]; ok {
		v, _ = strconv.ParseUint(s, 10, 64)
	}
	ip, err := e.Cluster().Policy(ctx, v)
	if errors.Is(err, cluster.ErrNotFound) {
		if v == 0 {
			return 0, nil, fmt.Errorf("%w: no policy is installed: install one with weft policy install FILE", job.ErrInvalid)
		}
		return 0, nil, fmt.Errorf("%w: policy=%d: %w", job.ErrInvalid, v, err)
	}
	if err != nil {
		return 0, nil, err
	}
	pol, err := t.policyOf(ip.Version, ip.Text)
	return ip.Version, pol, err
}

// policyOf parses version v's text once. Pools are not checked: one
// deleted since the install has no space, so no rule moves files to it.
func (t *tierType) policyOf(v uint64, text string) (*policy.Policy, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pols[v]; p != nil {
		return p, nil
	}
	p, err := policy.Parse(text, nil)
	if err != nil {
		return nil, fmt.Errorf("tier: installed policy version %d does not parse: %w", v, err)
	}
	t.pols[v] = p
	return p, nil
}

// The job data "policy": the policy version the job applies, chosen when
// its scan splits, as "1 VERSION" (the record's format version 1, a
// space, the decimal version). A newer format is refused, not misread.

func encodeJobPolicy(v uint64) []byte { return []byte("1 " + strconv.FormatUint(v, 10)) }

func decodeJobPolicy(b []byte) (uint64, error) {
	f, rest, ok := strings.Cut(string(b), " ")
	if !ok || f != "1" {
		return 0, fmt.Errorf("%w: policy record %q: format %q, this binary reads 1", tier.ErrNewerRecord, b, f)
	}
	v, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%w: policy record %q", tier.ErrCorruptRecord, b)
	}
	return v, nil
}

// jobPolicy returns the job's cache (the version the scan's Split
// recorded as job data "policy", read once per node) and the policy.
func (t *tierType) jobPolicy(ctx context.Context, e TierEnv, id job.JobID) (*tierJobCache, *policy.Policy, error) {
	t.mu.Lock()
	jc := t.jobs[id]
	t.mu.Unlock()
	if jc == nil {
		b, ok, err := e.JobData().GetData(ctx, id, tierKeyPolicy)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, fmt.Errorf("tier: job %d has no policy version recorded (its scan did not split)", id)
		}
		v, err := decodeJobPolicy(b)
		if err != nil {
			return nil, nil, fmt.Errorf("tier: job %d: %w", id, err)
		}
		t.mu.Lock()
		if jc = t.jobs[id]; jc == nil {
			if len(t.jobs) >= maxCachedJobs {
				delete(t.jobs, slices.Min(slices.Collect(maps.Keys(t.jobs))))
			}
			jc = &tierJobCache{version: v}
			t.jobs[id] = jc
		}
		t.mu.Unlock()
	}
	t.mu.Lock()
	p := t.pols[jc.version]
	t.mu.Unlock()
	if p != nil {
		return jc, p, nil
	}
	ip, err := e.Cluster().Policy(ctx, jc.version)
	if err != nil {
		return nil, nil, err
	}
	p, err = t.policyOf(jc.version, ip.Text)
	return jc, p, err
}

// evaluator returns an evaluator of job j's policy and the function that
// gives it back. Evaluators of one job share nothing but are reused, so
// that directory paths are looked up once per node, not once per page.
func (t *tierType) evaluator(ctx context.Context, e TierEnv, j *job.Job) (*tier.Evaluator, func(), error) {
	jc, pol, err := t.jobPolicy(ctx, e, j.ID)
	if err != nil {
		return nil, nil, err
	}
	sp := &jc.evals
	ev, _ := sp.Get().(*tier.Evaluator)
	if ev == nil {
		pools, err := e.Cluster().ListPools(ctx)
		if err != nil {
			return nil, nil, err
		}
		defaults := map[string]string{}
		for _, p := range pools {
			defaults[p.Name] = p.Protection
		}
		dir, err := tierDirPath(j.Params)
		if err != nil {
			return nil, nil, err
		}
		ev = tier.NewEvaluator(pol, e.Meta(), defaults, dir, j.Created)
	}
	return ev, func() { sp.Put(ev) }, nil
}

// tierDirPath returns the path parameter, cleaned ("/" without one).
func tierDirPath(p map[string]string) (string, error) {
	d, ok := p["path"]
	if !ok {
		return "/", nil
	}
	if d == "" || d[0] != '/' {
		return "", fmt.Errorf("%w: path=%q: want an absolute directory", job.ErrInvalid, d)
	}
	return path.Clean(d), nil
}

// tierDir resolves the path parameter to a directory.
func tierDir(ctx context.Context, m *meta.Meta, p map[string]string) (meta.LIN, error) {
	d, err := tierDirPath(p)
	if err != nil {
		return 0, err
	}
	cur := meta.Attr{LIN: meta.RootLIN, Type: meta.TypeDir}
	for _, name := range strings.Split(strings.Trim(d, "/"), "/") {
		if name == "" {
			continue
		}
		if cur.Type != meta.TypeDir {
			break
		}
		cur, err = m.Lookup(ctx, cur.LIN, name)
		if errors.Is(err, meta.ErrNotFound) {
			return 0, fmt.Errorf("%w: path=%s: no such directory", job.ErrInvalid, d)
		}
		if err != nil {
			return 0, err
		}
	}
	if cur.Type != meta.TypeDir {
		return 0, fmt.Errorf("%w: path=%s is not a directory", job.ErrInvalid, d)
	}
	return cur.LIN, nil
}

func pageKey(pfx string, page uint64) string { return fmt.Sprintf("%s%016x", pfx, page) }

// pageOf returns the page a data key names.
func pageOf(key, pfx string) (uint64, error) {
	return strconv.ParseUint(key[len(pfx):], 16, 64)
}

// putOrDelete stores b under k, or deletes k when b is nil, so that a
// page processed again after its files changed leaves no stale entries.
func putOrDelete(ctx context.Context, d TierData, id job.JobID, k string, b []byte) error {
	if b == nil {
		return d.DeleteData(ctx, id, k)
	}
	return d.PutData(ctx, id, k, b)
}

// eachEntry calls fn for every entry under pfx of job id's data, in key
// (and so LIN) order, with the entry's page.
func eachEntry(ctx context.Context, d TierData, id job.JobID, pfx string, fn func(page uint64, es []tier.Candidate) error) error {
	after := ""
	var es []tier.Candidate
	for {
		batch, err := d.ListData(ctx, id, pfx, after, 64)
		if err != nil {
			return err
		}
		for _, b := range batch {
			page, err := pageOf(b.Key, pfx)
			if err != nil {
				return fmt.Errorf("tier: job %d data key %q: %w", id, b.Key, err)
			}
			if es, err = tier.DecodeEntries(es[:0], b.Value); err != nil {
				return fmt.Errorf("tier: job %d data %s: %w", id, b.Key, err)
			}
			if err := fn(page, es); err != nil {
				return err
			}
			after = b.Key
		}
		if len(batch) < 64 {
			return nil
		}
	}
}

// ruleCount names a per-rule counter: "r3.files".
func ruleCount(i int, what string) string { return "r" + strconv.Itoa(i) + "." + what }

// writeNamespaceFile writes data as the file p of the namespace (its
// directories made as needed, mode 0700; the file mode 0600, owned by
// root), replacing a file of that name: the report phase writes a list
// again when its item is processed again.
func writeNamespaceFile(ctx context.Context, e TierEnv, p string, data []byte) error {
	m := e.Meta()
	dir, name := path.Split(path.Clean(p))
	cur := meta.RootLIN
	for _, d := range strings.Split(strings.Trim(dir, "/"), "/") {
		if d == "" {
			continue
		}
		a, err := m.Lookup(ctx, cur, d)
		if errors.Is(err, meta.ErrNotFound) {
			a, err = m.Mkdir(ctx, cur, d, 0o700)
			if errors.Is(err, meta.ErrExists) {
				a, err = m.Lookup(ctx, cur, d)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
		if a.Type != meta.TypeDir {
			return fmt.Errorf("%w: %s in %s is a %s, not a directory: move it away", meta.ErrNotDir, d, dir, a.Type)
		}
		cur = a.LIN
	}
	if err := m.Unlink(ctx, cur, name); err != nil && !errors.Is(err, meta.ErrNotFound) {
		return fmt.Errorf("replacing %s: %w", p, err)
	}
	a, err := m.Create(ctx, cur, name, meta.NewInode{Mode: 0o600})
	if err != nil {
		return fmt.Errorf("creating %s: %w", p, err)
	}
	f, err := e.Files().OpenAttr(ctx, a, true)
	if err != nil {
		return err
	}
	const chunk = 4 << 20
	for off := 0; off < len(data); off += chunk {
		if _, err := f.WriteAt(ctx, data[off:min(off+chunk, len(data))], int64(off)); err != nil {
			f.Close(ctx)
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return f.Close(ctx)
}
