package jobs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// TreeDelete returns the treedelete job type: it deletes the directory
// tree named by its "path" parameter ("/scratch/run42") in parallel while
// clients keep working elsewhere. Phases:
//
//   - files: a LIN scan over [FirstLIN, LINBound) that unlinks, for every
//     non-directory, each of its names whose directory lies inside the
//     tree. A hard link from outside the tree keeps the file alive; only
//     the names inside the tree go. Data is freed through meta's delete
//     queue when the last link goes.
//   - dirs: one task that walks the tree from its root post-order,
//     removing whatever is left (entries created meanwhile included) and
//     the directories bottom-up, the tree's root last.
//
// The tree's root is resolved once per phase (in Split) and carried as a
// LIN in the task scope ("tree:<LIN>"), so a directory later created under
// the same path is never touched by tasks already split. Every item is
// idempotent: a name already gone (meta.ErrNotFound) counts as done.
//
// Limitation: the namespace has no tree lock; a directory renamed out of
// the tree while the job runs may lose entries removed before the rename
// was seen. Process re-checks back-pointers right before it deletes, which
// narrows but does not close that window.
func TreeDelete() job.Type { return treeDelete{} }

type treeDelete struct{}

var (
	_ job.Type         = treeDelete{}
	_ job.Defaulter    = treeDelete{}
	_ job.SpaceSaver   = treeDelete{}
	_ job.ParamChecker = treeDelete{}
)

func (treeDelete) Name() string          { return "treedelete" }
func (treeDelete) Set() job.ExclusionSet { return job.SetNone }
func (treeDelete) Phases() []job.Phase {
	return []job.Phase{treeFiles{}, treeDirs{}}
}

// Defaults: an administrator's clean-up, ahead of background scans.
func (treeDelete) Defaults() (int, string) { return 4, "medium" }

// FreesSpace is true: deleting a tree is how space comes back.
func (treeDelete) FreesSpace() bool { return true }

// CheckParams validates "path": absolute, and not the root. Whether it
// names a directory is checked when the job starts (Split).
func (treeDelete) CheckParams(params map[string]string) error {
	_, err := treePath(params)
	return err
}

// treeDirsRetries bounds the passes the dirs phase makes over a tree that
// clients keep filling.
const treeDirsRetries = 5

// treeScopePrefix prefixes a task scope carrying the tree root's LIN.
const treeScopePrefix = "tree:"

// treePath returns the cleaned "path" parameter or an error wrapping
// job.ErrInvalid.
func treePath(params map[string]string) (string, error) {
	p, ok := params["path"]
	if !ok || p == "" {
		return "", fmt.Errorf("%w: treedelete needs path=/dir/to/delete", job.ErrInvalid)
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: treedelete path %q is not absolute: give it from the namespace root, e.g. /scratch/run42", job.ErrInvalid, p)
	}
	c := path.Clean(p)
	if c == "/" {
		return "", fmt.Errorf("%w: treedelete path %q is the namespace root: refusing to delete everything; name a directory below it", job.ErrInvalid, p)
	}
	return c, nil
}

// resolveTree resolves the job's path from the root, component by
// component without following symlinks, and returns the directory's LIN.
// Errors wrap job.ErrInvalid (bad path, not a directory) or meta.ErrNotFound
// (missing).
func resolveTree(ctx context.Context, m *meta.Meta, params map[string]string) (meta.LIN, error) {
	p, err := treePath(params)
	if err != nil {
		return 0, err
	}
	cur := meta.Attr{LIN: meta.RootLIN, Type: meta.TypeDir}
	for _, name := range strings.Split(p[1:], "/") {
		if cur.Type != meta.TypeDir {
			return 0, fmt.Errorf("%w: treedelete path %q: a component before %q is a %s, not a directory", job.ErrInvalid, p, name, cur.Type)
		}
		if cur, err = m.Lookup(ctx, cur.LIN, name); err != nil {
			return 0, fmt.Errorf("treedelete path %q: %q: %w", p, name, err)
		}
	}
	if cur.Type != meta.TypeDir {
		return 0, fmt.Errorf("%w: treedelete path %q is a %s, not a directory: remove it with rm", job.ErrInvalid, p, cur.Type)
	}
	return cur.LIN, nil
}

func treeScope(root meta.LIN) string { return treeScopePrefix + strconv.FormatUint(uint64(root), 10) }

// parseTreeScope returns the tree root's LIN carried by scope.
func parseTreeScope(scope string) (meta.LIN, error) {
	s, ok := strings.CutPrefix(scope, treeScopePrefix)
	if ok {
		if v, err := strconv.ParseUint(s, 10, 64); err == nil && v >= uint64(meta.FirstLIN) {
			return meta.LIN(v), nil
		}
	}
	return 0, fmt.Errorf("%w: treedelete task scope %q: want %s<LIN>", job.ErrInvalid, scope, treeScopePrefix)
}

// ancestry answers "is directory d inside the tree rooted at root" (d ==
// root counts), walking back-pointers up and caching each directory's
// answer. It lives for one Items or Process call: the namespace changes.
type ancestry struct {
	m     *meta.Meta
	root  meta.LIN
	known map[meta.LIN]bool
}

func newAncestry(m *meta.Meta, root meta.LIN) *ancestry {
	return &ancestry{m: m, root: root, known: map[meta.LIN]bool{}}
}

// inside reports whether directory d is root or below it. A directory that
// is gone, or a walk longer than maxPathDepth, counts as outside: never
// delete on doubt.
func (a *ancestry) inside(ctx context.Context, d meta.LIN) (bool, error) {
	var walked []meta.LIN
	ans := false
	cur := d
	for i := 0; ; i++ {
		if cur == a.root {
			ans = true
			break
		}
		if cur == meta.RootLIN || i == maxPathDepth {
			break
		}
		if v, ok := a.known[cur]; ok {
			ans = v
			break
		}
		walked = append(walked, cur)
		in, err := a.m.GetInode(ctx, cur)
		if errors.Is(err, meta.ErrNotFound) {
			break
		}
		if err != nil {
			return false, err
		}
		if in.Type != meta.TypeDir || len(in.Links) == 0 {
			break
		}
		cur = in.Links[0].Parent
	}
	for _, w := range walked {
		a.known[w] = ans
	}
	return ans, nil
}

// anyInside reports whether one of in's names lies in a directory inside
// the tree.
func (a *ancestry) anyInside(ctx context.Context, in meta.Inode) (bool, error) {
	for _, l := range in.Links {
		ok, err := a.inside(ctx, l.Parent)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// treeFiles is the files phase: items are LINs of non-directories with a
// name inside the tree.
type treeFiles struct{}

func (treeFiles) Name() string { return "files" }

// Split resolves the path and splits the LIN space; a missing path or a
// non-directory fails the job with the path in the error.
func (treeFiles) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	root, err := resolveTree(ctx, e.Meta(), j.Params)
	if err != nil {
		return nil, err
	}
	tasks, err := splitLINs(ctx, e.Meta(), j.Parallelism)
	if err != nil {
		return nil, err
	}
	for i := range tasks {
		tasks[i].Scope = treeScope(root)
	}
	return tasks, nil
}

// Items lists non-directories in [from, to) with a name inside the tree.
func (treeFiles) Items(ctx context.Context, env job.Env, scope string, from, to uint64, limit int) ([]uint64, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	root, err := parseTreeScope(scope)
	if err != nil {
		return nil, err
	}
	m := e.Meta()
	anc := newAncestry(m, root)
	var out []uint64
	next := meta.LIN(from)
	for next != 0 && uint64(next) < to && len(out) < limit {
		inodes, after, err := m.ScanInodes(ctx, next, meta.LIN(to), min(scanPage, limit-len(out)+1))
		if err != nil {
			return nil, err
		}
		for _, in := range inodes {
			if len(out) == limit {
				return out, nil
			}
			if in.Type == meta.TypeDir {
				continue
			}
			ok, err := anc.anyInside(ctx, in)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, uint64(in.LIN))
			}
		}
		next = after
	}
	return out, nil
}

// Process unlinks each name of the item that lies inside the tree, as the
// inode's back-pointers show them now. Items counts names removed.
func (treeFiles) Process(ctx context.Context, env job.Env, _ *job.Job, scope string, item uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	root, err := parseTreeScope(scope)
	if err != nil {
		return job.ItemResult{}, err
	}
	m := e.Meta()
	in, err := m.GetInode(ctx, meta.LIN(item))
	if errors.Is(err, meta.ErrNotFound) {
		return job.ItemResult{}, nil // already deleted
	}
	if err != nil {
		return job.ItemResult{}, err
	}
	if in.Type == meta.TypeDir {
		return job.ItemResult{}, nil // the dirs phase's
	}
	anc := newAncestry(m, root)
	var res job.ItemResult
	for _, l := range in.Links {
		ok, err := anc.inside(ctx, l.Parent)
		if err != nil {
			return res, err
		}
		if !ok {
			continue
		}
		switch err := m.Unlink(ctx, l.Parent, l.Name); {
		case err == nil:
			res.Items++
		case errors.Is(err, meta.ErrNotFound), errors.Is(err, meta.ErrIsDir):
			// Gone already, or the name now is a directory: the dirs
			// phase removes it.
		default:
			return res, fmt.Errorf("treedelete: unlink %q in directory LIN %d: %w", l.Name, l.Parent, err)
		}
	}
	return res, nil
}

// treeDirs is the dirs phase: one task, one item (0), which removes what is
// left of the tree bottom-up.
type treeDirs struct{}

func (treeDirs) Name() string { return "dirs" }

// Split resolves the path again; a path already gone (an earlier run
// finished) leaves nothing to do.
func (treeDirs) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	root, err := resolveTree(ctx, e.Meta(), j.Params)
	if errors.Is(err, meta.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// The files phase fixed the tree by its root's LIN; this phase finds
	// the root by path again. A directory born after the job was submitted
	// is not the tree it named (that one was moved away): never empty it.
	if a, err := e.Meta().GetAttr(ctx, root); err == nil && !j.Created.IsZero() && a.Btime.After(j.Created) {
		return nil, fmt.Errorf("%w: %s now names a directory created after the job started (the tree it named was moved away): not deleting it",
			job.ErrInvalid, j.Params["path"])
	}
	return []job.TaskSpec{{Scope: treeScope(root), From: 0, To: 1}}, nil
}

// Items returns the single item 0 when the range holds it.
func (treeDirs) Items(_ context.Context, _ job.Env, scope string, from, to uint64, limit int) ([]uint64, error) {
	if _, err := parseTreeScope(scope); err != nil {
		return nil, err
	}
	if from == 0 && to > 0 && limit > 0 {
		return []uint64{0}, nil
	}
	return nil, nil
}

// Process empties the tree post-order and removes its root, retrying up to
// treeDirsRetries passes while clients add entries; a tree still not empty
// then is reported in Errors and Note, not failed. Items counts entries
// removed (files and directories).
func (treeDirs) Process(ctx context.Context, env job.Env, _ *job.Job, scope string, _ uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	root, err := parseTreeScope(scope)
	if err != nil {
		return job.ItemResult{}, err
	}
	m := e.Meta()
	var res job.ItemResult
	for pass := 0; pass < treeDirsRetries; pass++ {
		in, err := m.GetInode(ctx, root)
		if errors.Is(err, meta.ErrNotFound) {
			return res, nil // removed by an earlier run of this item
		}
		if err != nil {
			return res, err
		}
		if in.Type != meta.TypeDir || len(in.Links) == 0 {
			return res, fmt.Errorf("%w: treedelete root LIN %d is a %s with %d links, not a linked directory", meta.ErrCorrupt, root, in.Type, len(in.Links))
		}
		n, err := clearDir(ctx, m, root, 0)
		res.Items += n
		if err != nil {
			return res, err
		}
		parent := in.Links[0]
		switch err := m.Rmdir(ctx, parent.Parent, parent.Name); {
		case err == nil:
			res.Items++
			return res, nil
		case errors.Is(err, meta.ErrNotFound):
			return res, nil
		case errors.Is(err, meta.ErrNotEmpty):
			continue // created meanwhile: another pass
		default:
			return res, fmt.Errorf("treedelete: rmdir %q in directory LIN %d: %w", parent.Name, parent.Parent, err)
		}
	}
	res.Errors++
	res.Note = fmt.Sprintf("tree LIN %d still not empty after %d passes: clients keep creating entries in it; stop them and run treedelete again", root, treeDirsRetries)
	return res, nil
}

// clearDir removes every entry below directory dir, post-order, and
// returns how many it removed. A subdirectory that stays non-empty (a
// client adding entries) is left for the caller's next pass. Before it
// descends into a subdirectory it checks the subdirectory still names dir
// as its parent, so a directory renamed out of the tree is left alone.
func clearDir(ctx context.Context, m *meta.Meta, dir meta.LIN, depth int) (int64, error) {
	if depth >= maxPathDepth {
		return 0, fmt.Errorf("%w: treedelete: directory LIN %d is deeper than %d levels", meta.ErrCorrupt, dir, maxPathDepth)
	}
	var removed int64
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		ents, next, err := m.ReadDir(ctx, dir, after, meta.DefaultReadDirLimit)
		if errors.Is(err, meta.ErrNotFound) {
			return removed, nil
		}
		if err != nil {
			return removed, err
		}
		for _, de := range ents {
			if de.Type != meta.TypeDir {
				switch err := m.Unlink(ctx, dir, de.Name); {
				case err == nil:
					removed++
				case errors.Is(err, meta.ErrNotFound), errors.Is(err, meta.ErrIsDir):
				default:
					return removed, fmt.Errorf("treedelete: unlink %q in directory LIN %d: %w", de.Name, dir, err)
				}
				continue
			}
			if still, err := linkedAt(ctx, m, de.LIN, dir, de.Name); err != nil || !still {
				if err != nil {
					return removed, err
				}
				continue
			}
			n, err := clearDir(ctx, m, de.LIN, depth+1)
			removed += n
			if err != nil {
				return removed, err
			}
			switch err := m.Rmdir(ctx, dir, de.Name); {
			case err == nil:
				removed++
			case errors.Is(err, meta.ErrNotFound), errors.Is(err, meta.ErrNotEmpty), errors.Is(err, meta.ErrNotDir):
				// Gone, refilled (next pass) or replaced by a file (next pass).
			default:
				return removed, fmt.Errorf("treedelete: rmdir %q in directory LIN %d: %w", de.Name, dir, err)
			}
		}
		if next == "" {
			return removed, nil
		}
		after = next
	}
}

// linkedAt reports whether directory lin is still named name in parent.
func linkedAt(ctx context.Context, m *meta.Meta, lin, parent meta.LIN, name string) (bool, error) {
	in, err := m.GetInode(ctx, lin)
	if errors.Is(err, meta.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return in.Type == meta.TypeDir && len(in.Links) > 0 && in.Links[0] == meta.Link{Parent: parent, Name: name}, nil
}
