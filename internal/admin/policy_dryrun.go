package admin

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/policy"
)

// The dry run of weft policy test: what a policy would do to the files
// under a directory, changing nothing.
//
// It scans the inodes in LIN order (meta.ScanInodes, pages of
// dryRunPage: one snapshot read per page, not one read per file), takes
// each file's path from its first link (a file with several names is
// evaluated once, by its first one), and keeps the files under the
// directory asked. Directories are walked, not evaluated: they hold no
// data to place, move or delete. Each file is evaluated once for every
// rule (Policy.Matching) with all its attributes known; extended
// attributes are read only when the policy reads them.
//
// What each rule would do:
//   - SET POOL: the files it would place if they were created now (by
//     what is known at creation: the first SET POOL rule that matches
//     with AttrsAtCreate), and how many of them are elsewhere now;
//   - MIGRATE: a file is moved by the first MIGRATE rule that matches it
//     (as the tier job does); per source pool the rule's Plan decides
//     from the pools' usage now (THRESHOLD, WEIGHT order, LIMIT); rules
//     plan in the policy's order, each seeing the usage the earlier
//     ones would leave;
//   - DELETE: the first DELETE rule that matches a file deletes it;
//   - LIST: every LIST rule that matches a file lists it.
//
// Bound: the scan stops after MaxFiles files or when ctx ends (the
// handler gives it dryRunBudget, under the CLI's 30 s request timeout);
// the report then says Complete false and how far it got, and its counts
// cover the files scanned. A namespace of millions of files is therefore
// sampled by LIN, not timed out with nothing to show.

// dryRunPage is how many inodes one scan reads.
const dryRunPage = 1000

// dryRunSamples is how many paths each rule reports.
const dryRunSamples = 10

// PolicyNamespace is what the dry run reads of the namespace;
// *meta.Meta implements it.
type PolicyNamespace interface {
	ScanInodes(ctx context.Context, from, to meta.LIN, limit int) ([]meta.Inode, meta.LIN, error)
	Path(ctx context.Context, lin meta.LIN) (string, error)
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

// DryRun evaluates pol over the files under dir in ns against the pools'
// usage (cluster.ListPools), changing nothing. See the comment above for
// what it counts. Errors: meta.ErrNotFound / meta.ErrNotDir for dir, and
// the namespace's read errors; running out of budget is not an error.
func DryRun(ctx context.Context, ns PolicyNamespace, pol *policy.Policy, pools []cluster.Pool, dir string, maxFiles int, now time.Time) (PolicyTestReport, error) {
	start := time.Now()
	if maxFiles <= 0 {
		maxFiles = DefaultDryRunFiles
	}
	dir = path.Clean("/" + dir)
	if err := checkDir(ctx, ns, dir); err != nil {
		return PolicyTestReport{}, err
	}
	rules := pol.Rules()
	rep := PolicyTestReport{Path: dir, Complete: true, Rules: make([]RuleResult, len(rules))}
	index := map[*policy.Rule]int{}
	for i, r := range rules {
		index[r] = i
		rep.Rules[i] = RuleResult{Rule: r.Name(), Kind: r.Kind().String(), Pool: r.Pool(), List: r.List()}
	}
	defaults := map[string]string{}
	for _, p := range pools {
		defaults[p.Name] = p.Protection
	}
	needs, _ := pol.Needs()
	type cand struct {
		c    policy.Candidate
		path string
	}
	type srcKey struct {
		rule int
		pool string
	}
	cands := map[srcKey][]cand{}
	var srcOrder []srcKey
	dirs := map[meta.LIN]string{meta.RootLIN: ""}
	var matched []*policy.Rule
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
			if in.Type == meta.TypeDir || len(in.Links) == 0 {
				continue
			}
			parent, ok := dirs[in.Links[0].Parent]
			if !ok {
				p, err := ns.Path(ctx, in.Links[0].Parent)
				if errors.Is(err, meta.ErrNotFound) {
					continue // renamed or removed under the scan
				}
				if err != nil {
					return rep, err
				}
				if p == "/" {
					p = ""
				}
				parent, dirs[in.Links[0].Parent] = p, p
			}
			fpath := parent + "/" + in.Links[0].Name
			if dir != "/" && !strings.HasPrefix(fpath, dir+"/") {
				continue
			}
			f := fileOf(in, fpath, defaults)
			if needs&policy.AttrXattrs != 0 && len(in.Xattrs) > 0 {
				lin, names := in.LIN, in.Xattrs
				f.Xattr = func(name string) (string, bool) {
					if !slices.Contains(names, name) {
						return "", false
					}
					v, err := ns.GetXattr(ctx, lin, name)
					return string(v), err == nil
				}
			}
			alloc := int64(in.Allocated)
			rep.Files++
			rep.Bytes += alloc
			matched = pol.Matching(f, now, matched[:0])
			firstMigrate, firstDelete := -1, -1
			for _, r := range matched {
				i := index[r]
				res := &rep.Rules[i]
				res.Matched++
				res.MatchedBytes += alloc
				switch r.Kind() {
				case policy.KindMigrate:
					if firstMigrate < 0 {
						firstMigrate = i
					}
				case policy.KindDelete:
					if firstDelete < 0 {
						firstDelete = i
					}
				case policy.KindList:
					select1(res, alloc, fpath)
				}
			}
			if firstDelete >= 0 {
				select1(&rep.Rules[firstDelete], alloc, fpath)
			}
			if firstMigrate >= 0 {
				r := rules[firstMigrate]
				k := srcKey{firstMigrate, f.Pool}
				if _, ok := cands[k]; !ok {
					srcOrder = append(srcOrder, k)
				}
				cands[k] = append(cands[k], cand{policy.Candidate{Weight: r.Weight(f, now), Allocated: alloc}, fpath})
			}
			cf := f
			cf.Known = policy.AttrsAtCreate
			if pl, ok := pol.Place(cf, now); ok {
				r, _ := pol.Rule(pl.Rule)
				res := &rep.Rules[index[r]]
				select1(res, alloc, fpath)
				if f.Pool != pl.Pool {
					res.Elsewhere++
				}
			} else {
				rep.Unplaced++
			}
		}
		from = next
	}
	// Plan the migrations in the policy's order, each on the usage the
	// earlier ones leave.
	space := map[string]*PoolSpaceView{}
	for _, p := range pools {
		space[p.Name] = &PoolSpaceView{Pool: p.Name, Size: p.TotalBytes, Used: p.UsedBytes, UsedAfter: p.UsedBytes, Protection: p.Protection}
	}
	poolOf := func(name string) *PoolSpaceView {
		if s, ok := space[name]; ok {
			return s
		}
		s := &PoolSpaceView{Pool: name} // a pool gone since: size 0, takes nothing
		space[name] = s
		return s
	}
	for i, r := range rules {
		if r.Kind() != policy.KindMigrate {
			continue
		}
		for _, k := range srcOrder {
			if k.rule != i {
				continue
			}
			cs := cands[k]
			src, dst := poolOf(k.pool), poolOf(r.Pool())
			pc := make([]policy.Candidate, len(cs))
			for j, c := range cs {
				pc[j] = c.c
			}
			pl, err := r.Plan(policy.PoolSpace{Size: src.Size, Used: src.UsedAfter}, policy.PoolSpace{Size: dst.Size, Used: dst.UsedAfter}, pc)
			if err != nil {
				return rep, err
			}
			res := &rep.Rules[i]
			res.Migrations = append(res.Migrations, MigrationView{From: k.pool, To: r.Pool(), Triggered: pl.Triggered,
				Candidates: len(cs), Files: len(pl.Take), Bytes: pl.Bytes, Skipped: pl.Skipped, Stop: pl.Stop.String()})
			for _, t := range pl.Take {
				select1(res, cs[t].c.Allocated, cs[t].path)
			}
			if src != dst {
				src.UsedAfter, dst.UsedAfter = pl.SourceUsed, pl.TargetUsed
			}
		}
	}
	for _, p := range pools {
		rep.Pools = append(rep.Pools, *space[p.Name])
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// select1 counts a file a rule acts on, keeping the first paths.
func select1(res *RuleResult, alloc int64, p string) {
	res.Selected++
	res.SelectedBytes += alloc
	if len(res.Samples) < dryRunSamples {
		res.Samples = append(res.Samples, p)
	}
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

// fileOf is what the policy knows of an inode read from the namespace:
// everything but extended attributes (set by the caller when the policy
// reads them). A protection of zero is its pool's default, named.
func fileOf(in *meta.Inode, p string, defaults map[string]string) policy.File {
	prot := defaults[in.Pool]
	if !in.Protection.IsZero() {
		prot = in.Protection.String()
	}
	known := policy.AttrsAll &^ policy.AttrXattrs
	if prot == "" {
		known &^= policy.AttrProtection
	}
	return policy.File{
		Known: known | policy.AttrXattrs, Path: p, Name: in.Links[0].Name,
		Size: int64(in.Size), Allocated: int64(in.Allocated),
		Access: in.Atime, Modify: in.Mtime, Change: in.Ctime, Create: in.Btime,
		UID: in.UID, GID: in.GID, Mode: modeBits(in.Type) | in.Mode, Nlink: in.Nlink,
		Pool: in.Pool, Protection: prot,
	}
}

// modeBits returns the POSIX S_IFMT bits of a file type (0 for an
// unknown one), as the policy's MODE shows them.
func modeBits(t meta.FileType) uint32 {
	switch t {
	case meta.TypeFile:
		return 0o100000
	case meta.TypeDir:
		return 0o040000
	case meta.TypeSymlink:
		return 0o120000
	case meta.TypeFIFO:
		return 0o010000
	case meta.TypeSocket:
		return 0o140000
	case meta.TypeCharDev:
		return 0o020000
	case meta.TypeBlockDev:
		return 0o060000
	}
	return 0
}
