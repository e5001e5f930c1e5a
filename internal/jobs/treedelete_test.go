package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// metaEnv is a jobs.Env with only a namespace.
type metaEnv struct{ m *meta.Meta }

var _ Env = metaEnv{}

func (metaEnv) Node() string                                                   { return "n1" }
func (metaEnv) Log() *slog.Logger                                              { return slog.New(slog.DiscardHandler) }
func (e metaEnv) Meta() *meta.Meta                                             { return e.m }
func (metaEnv) Restriper() *restripe.Restriper                                 { return nil }
func (metaEnv) Cluster() *cluster.Store                                        { return nil }
func (metaEnv) RecordEvent(_ context.Context, ev job.Event) (job.Event, error) { return ev, nil }
func (metaEnv) Blocks(context.Context, string) (*block.Client, error) {
	return nil, errors.New("test env: no block service")
}

type processed struct {
	phase job.Phase
	scope string
	item  uint64
}

// runPhase runs one phase as the engine would (Split, then Items pages and
// Process per task) and returns the summed result (counters summed, the
// last note and summary) and the items processed.
func runPhase(t *testing.T, env Env, j *job.Job, ph job.Phase) (job.ItemResult, []processed) {
	t.Helper()
	tasks, err := ph.Split(bg, env, j)
	if err != nil {
		t.Fatalf("%s: split: %v", ph.Name(), err)
	}
	var sum job.ItemResult
	var done []processed
	const limit = 7
	for _, tk := range tasks {
		for from := tk.From; ; {
			items, err := ph.Items(bg, env, tk.Scope, from, tk.To, limit)
			if err != nil {
				t.Fatalf("%s: items: %v", ph.Name(), err)
			}
			for _, it := range items {
				r, err := ph.Process(bg, env, j, tk.Scope, it)
				if err != nil {
					t.Fatalf("%s: process %d: %v", ph.Name(), it, err)
				}
				sum.Items += r.Items
				sum.Errors += r.Errors
				for k, v := range r.Counts {
					if sum.Counts == nil {
						sum.Counts = map[string]int64{}
					}
					sum.Counts[k] += v
				}
				if r.Note != "" {
					sum.Note = r.Note
				}
				if r.Summary != "" {
					sum.Summary = r.Summary
				}
				done = append(done, processed{ph, tk.Scope, it})
			}
			if len(items) < limit {
				break
			}
			from = items[len(items)-1] + 1
		}
	}
	return sum, done
}

func mustDir(t *testing.T, m *meta.Meta, parent meta.LIN, name string) meta.LIN {
	t.Helper()
	a, err := m.Mkdir(bg, parent, name, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	return a.LIN
}

func mustFile(t *testing.T, m *meta.Meta, parent meta.LIN, name string) meta.LIN {
	t.Helper()
	a, err := m.Create(bg, parent, name, meta.NewInode{Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	return a.LIN
}

func TestTreeDelete(t *testing.T) {
	m := newMeta(t)
	env := metaEnv{m}
	scratch := mustDir(t, m, meta.RootLIN, "scratch")
	tree := mustDir(t, m, scratch, "run42")
	keep := mustDir(t, m, scratch, "keep")
	sibling := mustDir(t, m, scratch, "run42x") // a name sharing the prefix

	files := 0
	for i := range 4 {
		d := mustDir(t, m, tree, fmt.Sprintf("d%d", i))
		for j := range 4 {
			e := mustDir(t, m, d, fmt.Sprintf("e%d", j))
			for k := range 15 {
				mustFile(t, m, e, fmt.Sprintf("f%02d", k))
				files++
			}
		}
		mustFile(t, m, d, "top")
		mustDir(t, m, d, "empty")
	}
	if _, err := m.Symlink(bg, tree, "link", "/scratch/keep"); err != nil {
		t.Fatal(err)
	}
	var outside []meta.LIN
	for k := range 20 {
		outside = append(outside, mustFile(t, m, keep, fmt.Sprintf("k%02d", k)), mustFile(t, m, sibling, fmt.Sprintf("s%02d", k)))
	}
	// A hard link from outside into the tree, and one from the tree out.
	shared := mustFile(t, m, keep, "shared")
	if _, err := m.Link(bg, shared, tree, "shared-in-tree"); err != nil {
		t.Fatal(err)
	}
	d1, err := m.Lookup(bg, tree, "d1")
	if err != nil {
		t.Fatal(err)
	}
	fromTree := mustFile(t, m, d1.LIN, "born-inside")
	if _, err := m.Link(bg, fromTree, keep, "from-tree"); err != nil {
		t.Fatal(err)
	}

	tp := TreeDelete()
	if err := tp.(job.ParamChecker).CheckParams(map[string]string{"path": "/scratch/run42"}); err != nil {
		t.Fatalf("CheckParams: %v", err)
	}
	j := &job.Job{Type: tp.Name(), Params: map[string]string{"path": "/scratch/./run42/"}, Parallelism: 5}
	phases := tp.Phases()
	if len(phases) != 2 || phases[0].Name() != "files" || phases[1].Name() != "dirs" {
		t.Fatalf("phases: %v", phases)
	}

	res, done := runPhase(t, env, j, phases[0])
	// Files, tops, the symlink, the link into the tree, born-inside.
	if want := int64(files + 4 + 1 + 1 + 1); res.Items != want {
		t.Fatalf("files phase removed %d names, want %d", res.Items, want)
	}
	// A client creates a file in the tree between the phases.
	d2, err := m.Lookup(bg, tree, "d2")
	if err != nil {
		t.Fatal(err)
	}
	mustFile(t, m, d2.LIN, "late")

	j.Phase = 1
	res, more := runPhase(t, env, j, phases[1])
	if res.Errors != 0 {
		t.Fatalf("dirs phase reported %d errors", res.Errors)
	}
	// 4 d + 16 e + 4 empty + late + the root.
	if want := int64(4 + 16 + 4 + 1 + 1); res.Items != want {
		t.Fatalf("dirs phase removed %d entries, want %d", res.Items, want)
	}
	done = append(done, more...)

	// Idempotency: processing every item again changes nothing.
	for _, p := range done {
		r, err := p.phase.Process(bg, env, j, p.scope, p.item)
		if err != nil || r.Items != 0 {
			t.Fatalf("%s: reprocess %d: %+v, %v", p.phase.Name(), p.item, r, err)
		}
	}
	// Running the dirs phase again finds nothing to do; the files phase
	// refuses a path that is gone.
	if tasks, err := phases[1].Split(bg, env, j); err != nil || len(tasks) != 0 {
		t.Fatalf("dirs split after delete: %v, %v", tasks, err)
	}
	if _, err := phases[0].Split(bg, env, j); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("files split after delete: %v", err)
	}

	if _, err := m.Lookup(bg, scratch, "run42"); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("tree still there: %v", err)
	}
	if _, err := m.GetInode(bg, tree); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("tree root inode still there: %v", err)
	}
	for _, l := range outside {
		if _, err := m.GetInode(bg, l); err != nil {
			t.Fatalf("outside file LIN %d: %v", l, err)
		}
	}
	for _, l := range []meta.LIN{shared, fromTree} {
		in, err := m.GetInode(bg, l)
		if err != nil {
			t.Fatalf("hard-linked LIN %d: %v", l, err)
		}
		if in.Nlink != 1 || len(in.Links) != 1 || in.Links[0].Parent != keep {
			t.Fatalf("hard-linked LIN %d: nlink %d links %+v, want one link in keep", l, in.Nlink, in.Links)
		}
	}
	for _, name := range []string{"shared", "from-tree", "k00"} {
		if _, err := m.Lookup(bg, keep, name); err != nil {
			t.Fatalf("keep/%s: %v", name, err)
		}
	}
	if ents, _, err := m.ReadDir(bg, sibling, "", 0); err != nil || len(ents) != 20 {
		t.Fatalf("sibling: %d entries, %v", len(ents), err)
	}
}

func TestTreeDeleteBadPaths(t *testing.T) {
	m := newMeta(t)
	env := metaEnv{m}
	dir := mustDir(t, m, meta.RootLIN, "dir")
	mustFile(t, m, dir, "file")
	if _, err := m.Symlink(bg, meta.RootLIN, "sym", "/dir"); err != nil {
		t.Fatal(err)
	}
	tp := TreeDelete()
	for _, p := range []string{"", "/", "//", "/dir/..", "relative/dir"} {
		err := tp.(job.ParamChecker).CheckParams(map[string]string{"path": p})
		if !errors.Is(err, job.ErrInvalid) {
			t.Errorf("CheckParams(%q) = %v, want ErrInvalid", p, err)
		}
	}
	files := tp.Phases()[0]
	for _, c := range []struct {
		path string
		want error
	}{
		{"/", job.ErrInvalid},
		{"/dir/file", job.ErrInvalid},
		{"/dir/file/x", job.ErrInvalid},
		{"/sym", job.ErrInvalid},
		{"/missing", meta.ErrNotFound},
		{"/dir/missing", meta.ErrNotFound},
	} {
		j := &job.Job{Params: map[string]string{"path": c.path}, Parallelism: 2}
		if _, err := files.Split(bg, env, j); !errors.Is(err, c.want) {
			t.Errorf("Split(%q) = %v, want %v", c.path, err, c.want)
		}
	}
	if _, err := files.Items(bg, env, "lin", 16, 100, 10); !errors.Is(err, job.ErrInvalid) {
		t.Errorf("Items with a bad scope: %v", err)
	}
	// Nothing was deleted.
	if _, err := m.Lookup(bg, dir, "file"); err != nil {
		t.Fatal(err)
	}
}

func TestTreeDeleteType(t *testing.T) {
	tp := TreeDelete()
	if tp.Name() != "treedelete" || tp.Set() != job.SetNone {
		t.Fatalf("name %q set %v", tp.Name(), tp.Set())
	}
	if !tp.(job.SpaceSaver).FreesSpace() {
		t.Fatal("treedelete must keep running in low-space mode")
	}
	if p, pol := tp.(job.Defaulter).Defaults(); p != 4 || pol != "medium" {
		t.Fatalf("defaults %d %q", p, pol)
	}
}
