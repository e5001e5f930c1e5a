package admin

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/policy"
	"github.com/weftfs/weft/internal/tier"
)

// The dry run of weft policy test: what a policy would do to the files
// under a directory, changing nothing.
//
// It scans the inodes in LIN order (meta.ScanInodes, pages of
// dryRunPage: one snapshot read per page, not one read per file) and
// evaluates each regular file under the directory asked as the tier job
// does (package tier: by its first link, the first MIGRATE or DELETE
// rule that matches acting on it, every matching LIST rule listing it;
// extended attributes read only when the policy reads them).
//
// What each rule would do:
//   - SET POOL: the files it would place if they were created now (by
//     what is known at creation: the first SET POOL rule that matches
//     with AttrsAtCreate), and how many of them are elsewhere now;
//   - MIGRATE: per source pool, tier.PlanMigrations decides from the
//     pools' usage now (THRESHOLD, WEIGHT order, LIMIT), rules in the
//     policy's order, each seeing the usage the earlier ones would leave;
//   - DELETE: the files it acts on;
//   - LIST: every file it matches.
//
// Bound: the scan stops after MaxFiles files or when ctx ends (the
// handler gives it dryRunBudget, under the CLI's 30 s request timeout);
// the report then says Complete false and how far it got, and its counts
// cover the files scanned. A namespace of millions of files is therefore
// sampled by LIN, not timed out with nothing to show.

// dryRunPage is how many inodes one scan reads.
const dryRunPage = 1000

// DryRunSamples is how many paths each rule reports; MaxDryRunSamples
// how many with PolicyTestRequest.Files.
const (
	DryRunSamples    = 10
	MaxDryRunSamples = 100_000
)

// PolicyNamespace is what the dry run reads of the namespace;
// *meta.Meta implements it.
type PolicyNamespace interface {
	ScanInodes(ctx context.Context, from, to meta.LIN, limit int) ([]meta.Inode, meta.LIN, error)
	GetInode(ctx context.Context, lin meta.LIN) (meta.Inode, error)
	Lookup(ctx context.Context, parent meta.LIN, name string) (meta.Attr, error)
	GetXattr(ctx context.Context, lin meta.LIN, name string) ([]byte, error)
}

var _ PolicyNamespace = (*meta.Meta)(nil)

// PolicyTestRequest is the body of POST /v1/policy/test: the policy to
// try (not installed; "" tries the installed one), the directory whose
// files it is tried on ("" or "/": all), and at most how many files to
// scan (0: DefaultDryRunFiles).
type PolicyTestRequest struct {
	Text     string `json:"text,omitempty"`
	Path     string `json:"path,omitempty"`
	MaxFiles int    `json:"max_files,omitempty"`
	// Files lists every file each rule selects in its Samples (up to
	// MaxDryRunSamples), not only the first DryRunSamples.
	Files bool `json:"files,omitempty"`
}

// DefaultDryRunFiles bounds a dry run's scan when the request does not.
const DefaultDryRunFiles = 5_000_000

// PoolSpaceView is a pool's size and use, before and after a dry run's
// migrations.
type PoolSpaceView struct {
	Pool       string `json:"pool"`
	Size       int64  `json:"size_bytes"`
	Used       int64  `json:"used_bytes"`
	UsedAfter  int64  `json:"used_after_bytes"`
	Protection string `json:"protection"`
}

// MigrationView is what a MIGRATE rule moves out of one source pool.
type MigrationView struct {
	From      string `json:"from"`
	To        string `json:"to"`
	Triggered bool   `json:"triggered"`
	// Candidates are the files the rule matched in the pool (before
	// THRESHOLD and LIMIT).
	Candidates int   `json:"candidates"`
	Files      int   `json:"files"`
	Bytes      int64 `json:"bytes"`
	// Skipped are candidates left because the target would pass its
	// LIMIT.
	Skipped int    `json:"skipped"`
	Stop    string `json:"stop"`
}

// RuleResult is what one rule would do.
type RuleResult struct {
	Rule string `json:"rule"`
	Kind string `json:"kind"`
	// Pool is a SET POOL's pool or a MIGRATE's TO POOL; List a LIST's
	// list.
	Pool string `json:"pool,omitempty"`
	List string `json:"list,omitempty"`
	// Matched and MatchedBytes are the files whose condition is TRUE for
	// this rule (every rule counts the files it matches, whatever
	// earlier rules took), and their allocated bytes.
	Matched      int   `json:"matched"`
	MatchedBytes int64 `json:"matched_bytes"`
	// Selected and SelectedBytes are the files this rule acts on: for
	// SET POOL those it would place at creation (first match with
	// creation attributes), for MIGRATE those it moves, for DELETE those
	// it deletes, for LIST those it lists.
	Selected      int   `json:"selected"`
	SelectedBytes int64 `json:"selected_bytes"`
	// Elsewhere counts, for SET POOL, selected files not in its pool now.
	Elsewhere  int             `json:"elsewhere,omitempty"`
	Migrations []MigrationView `json:"migrations,omitempty"`
	// Samples are the paths of the first files selected.
	Samples []string `json:"samples,omitempty"`
}

// PolicyTestReport is the answer of POST /v1/policy/test.
type PolicyTestReport struct {
	// Version is the installed version tried, 0 for a text given.
	Version uint64 `json:"version,omitempty"`
	Path    string `json:"path"`
	// Scanned counts inodes read; Files the files under Path evaluated.
	Scanned int   `json:"scanned"`
	Files   int   `json:"files"`
	Bytes   int64 `json:"bytes"`
	// Complete is false when the scan stopped early (MaxFiles or the
	// time budget): counts then cover the inodes below NextLIN.
	Complete bool            `json:"complete"`
	NextLIN  meta.LIN        `json:"next_lin,omitempty"`
	Seconds  float64         `json:"seconds"`
	Rules    []RuleResult    `json:"rules"`
	Pools    []PoolSpaceView `json:"pools"`
	// Unplaced counts files no SET POOL rule would place (they keep
	// their parent directory's pool).
	Unplaced int `json:"unplaced"`
}

// DryRun evaluates pol over the files under req.Path in ns against the
// pools' usage (cluster.ListPools), changing nothing; req.Text is not
// read (pol is it). See the comment above for what it counts. Errors:
// meta.ErrNotFound / meta.ErrNotDir for the path, and the namespace's
// read errors; running out of budget is not an error.
func DryRun(ctx context.Context, ns PolicyNamespace, pol *policy.Policy, pools []cluster.Pool, req PolicyTestRequest, now time.Time) (PolicyTestReport, error) {
	start := time.Now()
	maxFiles := req.MaxFiles
	if maxFiles <= 0 {
		maxFiles = DefaultDryRunFiles
	}
	samples := DryRunSamples
	if req.Files {
		samples = MaxDryRunSamples
	}
	select1 := func(res *RuleResult, alloc int64, p string) {
		res.Selected++
		res.SelectedBytes += alloc
		if len(res.Samples) < samples {
			res.Samples = append(res.Samples, p)
		}
	}
	dir := path.Clean("/" + req.Path)
	if err := checkDir(ctx, ns, dir); err != nil {
		return PolicyTestReport{}, err
	}
	rep := PolicyTestReport{Path: dir, Complete: true}
	defaults := map[string]string{}
	for _, p := range pools {
		defaults[p.Name] = p.Protection
	}
	ev := tier.NewEvaluator(pol, ns, defaults, dir, now)
	rules := ev.Rules()
	index := map[*policy.Rule]int{}
	for i, r := range rules {
		index[r] = i
		rep.Rules = append(rep.Rules, RuleResult{Rule: r.Name(), Kind: r.Kind().String(), Pool: r.Pool(), List: r.List()})
	}
	var cands []tier.Candidate
	from := meta.FirstLIN
scan:
	for from != 0 {
		if ctx.Err() != nil || rep.Scanned >= maxFiles {
			rep.Complete, rep.NextLIN = false, from
			break
		}
		page, next, err := ns.ScanInodes(ctx, from, 0, min(dryRunPage, maxFiles-rep.Scanned))
		if err != nil {
			if ctx.Err() != nil {
				rep.Complete, rep.NextLIN = false, from
				break scan
			}
			return rep, err
		}
		for i := range page {
			in := &page[i]
			if rep.Scanned >= maxFiles {
				rep.Complete, rep.NextLIN = false, in.LIN
				break scan
			}
			rep.Scanned++
			d, ok, err := ev.Eval(ctx, in)
			if err != nil && ctx.Err() != nil {
				// The budget ran out reading a directory: a partial
				// report, as when it runs out between pages.
				rep.Scanned--
				rep.Complete, rep.NextLIN = false, in.LIN
				break scan
			}
			if err != nil {
				return rep, err
			}
			if !ok {
				continue
			}
			rep.Files++
			rep.Bytes += d.Allocated
			for _, i := range d.Matched {
				res := &rep.Rules[i]
				res.Matched++
				res.MatchedBytes += d.Allocated
				if rules[i].Kind() == policy.KindList {
					select1(res, d.Allocated, d.Path)
				}
			}
			if d.Act >= 0 {
				switch rules[d.Act].Kind() {
				case policy.KindDelete:
					select1(&rep.Rules[d.Act], d.Allocated, d.Path)
				case policy.KindMigrate:
					cands = append(cands, tier.Candidate{LIN: d.LIN, Rule: d.Act, Pool: d.Pool, Weight: d.Weight, Allocated: d.Allocated, Path: d.Path})
				}
			}
			cf := d.File
			cf.Known = policy.AttrsAtCreate
			if pl, ok := pol.Place(cf, now); ok {
				r, _ := pol.Rule(pl.Rule)
				res := &rep.Rules[index[r]]
				select1(res, d.Allocated, d.Path)
				if d.Pool != pl.Pool {
					res.Elsewhere++
				}
			} else {
				rep.Unplaced++
			}
		}
		from = next
	}
	groups, space, err := tier.PlanMigrations(rules, tier.PoolsOf(pools), cands)
	if err != nil {
		return rep, err
	}
	for _, g := range groups {
		res := &rep.Rules[g.Rule]
		res.Migrations = append(res.Migrations, MigrationView{From: g.From, To: g.To, Triggered: g.Triggered,
			Candidates: g.Candidates, Files: len(g.Moves), Bytes: g.Bytes, Skipped: g.Skipped, Stop: g.Stop.String()})
		for _, m := range g.Moves {
			select1(res, m.Allocated, m.Path)
		}
	}
	prot := map[string]string{}
	for _, p := range pools {
		prot[p.Name] = p.Protection
	}
	for _, s := range space[:len(pools)] {
		rep.Pools = append(rep.Pools, PoolSpaceView{Pool: s.Name, Size: s.Size, Used: s.Used, UsedAfter: s.UsedAfter, Protection: prot[s.Name]})
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// checkDir resolves dir from the root, refusing what is not a directory.
func checkDir(ctx context.Context, ns PolicyNamespace, dir string) error {
	cur := meta.RootLIN
	for _, name := range strings.Split(strings.Trim(dir, "/"), "/") {
		if name == "" {
			continue
		}
		a, err := ns.Lookup(ctx, cur, name)
		if err != nil {
			return fmt.Errorf("policy test --path %s: %w", dir, err)
		}
		if a.Type != meta.TypeDir {
			return fmt.Errorf("%w: policy test --path %s: %s is a %s, not a directory", meta.ErrNotDir, dir, name, a.Type)
		}
		cur = a.LIN
	}
	return nil
}
