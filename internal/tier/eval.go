package tier

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/policy"
)

// How a file meets the rules, for the tier job and the dry run alike:
//
//   - Only regular files with a name are evaluated: directories,
//     symbolic links and special files hold no data to place or move,
//     and the rules do not delete them.
//   - A file with several names is evaluated once, by its first link
//     (the back-pointer meta lists first), so that its PATH_NAME is
//     stable between the dry run and the job.
//   - The first MIGRATE or DELETE rule, in the policy's order, whose
//     condition is TRUE acts on the file (Decision.Act): a file matched by
//     'cold' MIGRATE and a later 'scratch' DELETE is a migration
//     candidate, and is not deleted. A THRESHOLD rule's candidates that
//     its plan does not take stay where they are; they do not fall
//     through to later rules.
//   - Every LIST rule whose condition is TRUE lists the file.
//   - Extended attributes are read only when the policy reads them.

// Namespace is what the evaluation reads besides the inodes it is given:
// the directories a scan has not shown it, and extended attributes.
// *meta.Meta implements it.
type Namespace interface {
	GetInode(ctx context.Context, lin meta.LIN) (meta.Inode, error)
	GetXattr(ctx context.Context, lin meta.LIN, name string) ([]byte, error)
}

var _ Namespace = (*meta.Meta)(nil)

// Evaluator evaluates one policy over inodes, keeping the paths of the
// directories it has seen. It is not safe for concurrent use: each
// worker makes its own (they are cheap).
type Evaluator struct {
	pol      *policy.Policy
	rules    []*policy.Rule
	index    map[*policy.Rule]int
	ns       Namespace
	now      time.Time
	dir      string
	defaults map[string]string
	needs    policy.AttrSet
	// dirs are the directories seen: in the scan (Eval is given them),
	// or read to resolve a path. A directory's path is built from its
	// parent's, so each directory costs at most one read, none when the
	// scan showed it first (a directory's LIN is usually below its
	// files').
	dirs    map[meta.LIN]*dirInfo
	matched []*policy.Rule
	d       Decision
}

// dirInfo is a directory's first link and, once resolved, its path ("" is
// the root's; resolved tells it from not yet known).
type dirInfo struct {
	parent   meta.LIN
	name     string
	path     string
	resolved bool
}

// maxDepth bounds a walk to the root (a loop in a damaged namespace).
const maxDepth = 4096

// NewEvaluator returns an evaluator of pol at now over the files under
// dir ("" or "/": all; it must be clean and absolute otherwise), with
// defaults the protection of each pool by name (a file whose protection
// is its pool's default shows the pool's).
func NewEvaluator(pol *policy.Policy, ns Namespace, defaults map[string]string, dir string, now time.Time) *Evaluator {
	if dir == "" {
		dir = "/"
	}
	ev := &Evaluator{pol: pol, rules: pol.Rules(), index: map[*policy.Rule]int{}, ns: ns, now: now, dir: dir,
		defaults: defaults, dirs: map[meta.LIN]*dirInfo{meta.RootLIN: {resolved: true}}}
	for i, r := range ev.rules {
		ev.index[r] = i
	}
	ev.needs, _ = pol.Needs()
	return ev
}

// Rules returns the policy's rules; Decision's indexes are into it.
func (ev *Evaluator) Rules() []*policy.Rule { return ev.rules }

// Decision is what the policy says of one file.
type Decision struct {
	LIN meta.LIN
	// Path is the file's path by its first link.
	Path string
	// Pool is the pool its data is in; Allocated the bytes it takes
	// there, parity included.
	Pool      string
	Allocated int64
	// File is the policy's view of the file (all attributes known).
	File policy.File
	// Matched are the indexes of every rule that matches the file, in
	// the policy's order.
	Matched []int
	// Act is the index of the first MIGRATE or DELETE rule that matches
	// it, -1 if none does.
	Act int
	// Weight is Act's WEIGHT for the file when Act is a MIGRATE rule.
	Weight float64
}

// Eval evaluates the policy on in. ok is false when in is not evaluated:
// not a regular file, an inode without a name (unlinked, open), outside the
// evaluator's directory, or whose parent directory went away meanwhile.
// The Decision (its Matched slice) is valid until the next Eval.
// Errors are the namespace's, from reading a path.
func (ev *Evaluator) Eval(ctx context.Context, in *meta.Inode) (d *Decision, ok bool, err error) {
	if in.Type == meta.TypeDir && len(in.Links) > 0 {
		if _, ok := ev.dirs[in.LIN]; !ok {
			ev.dirs[in.LIN] = &dirInfo{parent: in.Links[0].Parent, name: in.Links[0].Name}
		}
	}
	if in.Type != meta.TypeFile || len(in.Links) == 0 {
		return nil, false, nil
	}
	parent, ok, err := ev.dirPath(ctx, in.Links[0].Parent)
	if err != nil || !ok {
		return nil, false, err // !ok: renamed or removed under the scan
	}
	fpath := parent + "/" + in.Links[0].Name
	if ev.dir != "/" && !strings.HasPrefix(fpath, ev.dir+"/") {
		return nil, false, nil
	}
	f := FileOf(in, fpath, ev.defaults)
	if ev.needs&policy.AttrXattrs != 0 && len(in.Xattrs) > 0 {
		lin, names := in.LIN, in.Xattrs
		f.Xattr = func(name string) (string, bool) {
			if !slices.Contains(names, name) {
				return "", false
			}
			v, err := ev.ns.GetXattr(ctx, lin, name)
			return string(v), err == nil
		}
	}
	d = &ev.d
	*d = Decision{LIN: in.LIN, Path: fpath, Pool: in.Pool, Allocated: int64(in.Allocated), File: f, Matched: d.Matched[:0], Act: -1}
	ev.matched = ev.pol.Matching(f, ev.now, ev.matched[:0])
	for _, r := range ev.matched {
		i := ev.index[r]
		d.Matched = append(d.Matched, i)
		if d.Act < 0 && (r.Kind() == policy.KindMigrate || r.Kind() == policy.KindDelete) {
			d.Act = i
			if r.Kind() == policy.KindMigrate {
				d.Weight = r.Weight(f, ev.now)
			}
		}
	}
	return d, true, nil
}

// dirPath returns directory lin's path ("" for the root), resolving it
// from the directories seen and reading the others; ok is false when a
// directory on the way is gone (or the walk is longer than maxDepth).
func (ev *Evaluator) dirPath(ctx context.Context, lin meta.LIN) (string, bool, error) {
	var chain []*dirInfo
	cur := lin
	for {
		d, ok := ev.dirs[cur]
		if !ok {
			in, err := ev.ns.GetInode(ctx, cur)
			if errors.Is(err, meta.ErrNotFound) || err == nil && (in.Type != meta.TypeDir || len(in.Links) == 0) {
				return "", false, nil
			}
			if err != nil {
				return "", false, err
			}
			d = &dirInfo{parent: in.Links[0].Parent, name: in.Links[0].Name}
			ev.dirs[cur] = d
		}
		if d.resolved {
			break
		}
		chain = append(chain, d)
		if len(chain) > maxDepth {
			return "", false, nil
		}
		cur = d.parent
	}
	for i := len(chain) - 1; i >= 0; i-- {
		d := chain[i]
		d.path, d.resolved = ev.dirs[d.parent].path+"/"+d.name, true
	}
	return ev.dirs[lin].path, true, nil
}

// Still reports whether rule i still matches the inode in at the
// evaluator's now: what the tier job checks right before it deletes a
// file, so that a file changed since the scan is not deleted on stale
// attributes. A file without a name does not match.
func (ev *Evaluator) Still(ctx context.Context, in *meta.Inode, i int) (bool, error) {
	d, ok, err := ev.Eval(ctx, in)
	if err != nil || !ok {
		return false, err
	}
	return slices.Contains(d.Matched, i), nil
}

// FileOf is what the policy knows of an inode read from the namespace
// with path p: every attribute, extended attributes only through
// File.Xattr (set by the caller when the policy reads them). A protection
// of zero is its pool's default from defaults; unknown if the pool has
// none.
func FileOf(in *meta.Inode, p string, defaults map[string]string) policy.File {
	prot := defaults[in.Pool]
	if !in.Protection.IsZero() {
		prot = in.Protection.String()
	}
	known := policy.AttrsAll
	if prot == "" {
		known &^= policy.AttrProtection
	}
	name := ""
	if len(in.Links) > 0 {
		name = in.Links[0].Name
	}
	return policy.File{
		Known: known, Path: p, Name: name,
		Size: int64(in.Size), Allocated: int64(in.Allocated),
		Access: in.Atime, Modify: in.Mtime, Change: in.Ctime, Create: in.Btime,
		UID: in.UID, GID: in.GID, Mode: ModeBits(in.Type) | in.Mode, Nlink: in.Nlink,
		Pool: in.Pool, Protection: prot,
	}
}

// ModeBits returns the POSIX S_IFMT bits of a file type (0 for an
// unknown one), as the policy's MODE shows them.
func ModeBits(t meta.FileType) uint32 {
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
