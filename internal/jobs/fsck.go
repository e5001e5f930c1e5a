package jobs

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// Fsck returns the fsck job type: the online checker of the namespace
// and its layout. It checks every directory entry against the inode it
// names and every inode's back-pointers, link count and reachability
// (meta's FsckEntries, FsckBackpointersRange and FsckLinksRange), then
// every unit of every stripe map against the block its drive holds, and
// each pool's usage counters (fsck_layout.go); it repairs each finding
// as it finds it (meta.FsckRepair, which re-checks in its own
// transaction and leaves alone what a client changed meanwhile; a unit
// is rebuilt through the restriper) unless dry-run=true. Phases:
//
//   - entries: items are directories (the root, then a LIN scan).
//     Entry-type findings are handled at once; an entry whose target
//     does not claim it is kept as job data ("u/TARGET/PARENT/NAME"),
//     for the links phase: it is a missing back-pointer, a dangling
//     entry or half of a wrong entry, and only the inodes tell which.
//   - backpointers: items are pages of linPage LINs, each checked in
//     one snapshot (meta.FsckBackpointersRange). Each inode's
//     back-pointers against their entries: stale-backpointer and
//     wrong-entry findings; a wrong entry's name is kept as job data
//     ("c/PARENT/NAME") so that the links phase does not count its
//     wrong target again.
//   - links: items are pages of linPage LINs (and one task for the
//     job data naming LINs outside them), each checked in one snapshot
//     (meta.FsckLinksRange). Each inode with the kept
//     entries naming it: missing-backpointer, link-count, unreachable
//     (linked into /lost+found as its LIN); a LIN with kept entries and
//     no inode: dangling-entry.
//   - stripes: items are regular files with stripes (a LIN scan): each
//     placed unit on a drive up against its block's header:
//     missing-unit, bad-header; other units counted "skipped".
//   - usage: one item: each pool's usage counters against its inodes
//     and stripe maps, in one snapshot: usage-counter.
//   - report: one item: the table per kind (found, repaired, changed
//     meanwhile, failed) and the first findings with their paths (kept
//     as job data "f/KIND/..." by the phases, at most fsckFirst per kind).
//
// Parameters: dry-run (true: find and report, change nothing), only
// (namespace: the first three phases; layout: stripes and usage; absent:
// all), speed (at most N checks a second per node, each directory entry,
// inode or unit checked counting one; 0 or absent: no limit). A phase
// of the half not asked for has no tasks.
//
// Counters (ItemResult.Counts): "checked" (entries, inodes, units,
// pools), "skipped" (units not checked), and per kind
// "KIND.found", "KIND.repaired", "KIND.changed" (no longer held when its
// repair re-checked it), "KIND.failed" (the repair failed: logged, the
// scan goes on), "lost" (stripes the stripes phase found lost). A job's
// counts may count an item twice after a crash or a steal; a repair is
// never made twice (the second finds nothing).
//
// The job belongs to the mark set, as DESIGN's table of job types has
// it: it never runs beside collect, integrityscan or multiscan. (Its
// checks would be right beside them — each reads one snapshot and each
// repair re-checks — but one namespace-wide scan at a time is kinder to
// the metadata store.)
func Fsck() job.Type { return newFsck() }

func newFsck() *fsckType {
	t := &fsckType{buckets: map[job.JobID]*fsckBucket{}, layout: newFsckLayoutDeps()}
	t.phases = []job.Phase{&fsckEntries{t}, &fsckBackpointers{t}, &fsckLinks{t}, &fsckStripes{t}, &fsckUsage{singleTask{"usage"}, t}, &fsckReport{singleTask{"report"}}}
	return t
}

// fsckFirst is how many findings of each kind the report lists.
const fsckFirst = 10

// fsckShownVersion is the version of the findings kept for the report.
const fsckShownVersion = 1

// Job data prefixes of an fsck job.
const (
	fsckPfxUnclaimed = "u/"
	fsckPfxClaimed   = "c/"
	fsckPfxFindings  = "f/"
)

// FsckEnv is what the fsck job needs of its node besides Env: the job's
// data, where one phase leaves what a later one reads.
type FsckEnv interface {
	Env
	JobData() TierData
}

func fsckEnvOf(e job.Env) (FsckEnv, error) {
	x, ok := e.(FsckEnv)
	if !ok {
		return nil, fmt.Errorf("%w (got %T, the fsck job needs job data)", ErrEnv, e)
	}
	return x, nil
}

// fsckType is the fsck job type. Its state is the speed limit's token
// buckets, one per job on this node, and the layout phases' ways to the
// drives (with the drive list they cache).
type fsckType struct {
	phases []job.Phase
	layout *fsckLayoutDeps

	mu      sync.Mutex
	buckets map[job.JobID]*fsckBucket
}

var (
	_ job.Type         = (*fsckType)(nil)
	_ job.Defaulter    = (*fsckType)(nil)
	_ job.ParamChecker = (*fsckType)(nil)
	_ job.ParamLister  = (*fsckType)(nil)
)

func (*fsckType) Name() string          { return "fsck" }
func (*fsckType) Set() job.ExclusionSet { return job.SetMark }
func (t *fsckType) Phases() []job.Phase { return t.phases }

// Defaults: a check is background hygiene: low priority, low impact.
func (*fsckType) Defaults() (int, string) { return 6, "low" }

// ParamNames: see Fsck.
func (*fsckType) ParamNames() []string { return []string{"dry-run", "only", "speed"} }

// CheckParams checks dry-run, only and speed.
func (*fsckType) CheckParams(p map[string]string) error {
	if v, ok := p["dry-run"]; ok && v != "true" && v != "false" {
		return fmt.Errorf("%w: fsck dry-run=%q: want true or false", job.ErrInvalid, v)
	}
	switch v := p["only"]; v {
	case "", "namespace", "layout":
	default:
		return fmt.Errorf("%w: fsck only=%q: want namespace or layout (leave it out to check both)", job.ErrInvalid, v)
	}
	if _, err := fsckSpeed(p); err != nil {
		return err
	}
	return nil
}

func fsckSpeed(p map[string]string) (float64, error) {
	v, ok := p["speed"]
	if !ok || v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: fsck speed=%q: want a whole number of checks a second (0: no limit)", job.ErrInvalid, v)
	}
	return float64(n), nil
}

// fsckBucket paces one job's checks on this node: next is when the next
// check may start.
type fsckBucket struct {
	mu   sync.Mutex
	next time.Time
	used time.Time
}

// pace waits until n more checks of job j fit its speed parameter on
// this node (at once without one). Errors: ctx's.
func (t *fsckType) pace(ctx context.Context, j *job.Job, n int) error {
	speed, _ := fsckSpeed(j.Params)
	if speed <= 0 || n <= 0 {
		return nil
	}
	now := time.Now()
	t.mu.Lock()
	b := t.buckets[j.ID]
	if b == nil {
		b = &fsckBucket{}
		t.buckets[j.ID] = b
	}
	for id, o := range t.buckets { // forget the buckets of jobs gone quiet
		if id != j.ID && now.Sub(o.used) > time.Minute {
			delete(t.buckets, id)
		}
	}
	b.mu.Lock()
	start := b.next
	if start.Before(now) {
		start = now
	}
	b.next = start.Add(time.Duration(float64(n) / speed * float64(time.Second)))
	b.used = now
	b.mu.Unlock()
	t.mu.Unlock()
	if d := start.Sub(now); d > 0 {
		tm := time.NewTimer(d)
		defer tm.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tm.C:
		}
	}
	return nil
}

// fsckItem is one item's work: its counts, and the findings it handles
// with repair (meta.FsckRepair unless the phase sets another).
type fsckItem struct {
	e      FsckEnv
	j      *job.Job
	res    job.ItemResult
	full   map[meta.FsckKind]bool // kinds whose first findings are all kept
	repair func(context.Context, meta.FsckFinding) (bool, error)
}

func newFsckItem(e FsckEnv, j *job.Job) *fsckItem {
	return &fsckItem{e: e, j: j, res: job.ItemResult{Items: 1, Counts: map[string]int64{}}, repair: e.Meta().FsckRepair}
}

// handle counts findings and, unless the job is a dry run, repairs them.
// A repair that fails is counted and logged, and the scan goes on; only
// ctx's end stops it (the item runs again).
func (it *fsckItem) handle(ctx context.Context, fs []meta.FsckFinding) error {
	dry := it.j.Params["dry-run"] == "true"
	m := it.e.Meta()
	for _, f := range fs {
		k := string(f.Kind)
		it.res.Counts[k+".found"]++
		it.res.Errors++
		outcome := "dry run: not repaired"
		if !dry {
			ok, err := it.repair(ctx, f)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case err != nil:
				it.res.Counts[k+".failed"]++
				outcome = "repair failed: " + err.Error()
				it.e.Log().Warn("fsck: repair failed", "job", it.j.ID, "finding", f.String(), "err", err)
			case ok:
				it.res.Counts[k+".repaired"]++
				outcome = "repaired"
			default:
				it.res.Counts[k+".changed"]++
				outcome = "changed meanwhile: left alone"
			}
		}
		p := fsckPath(ctx, m, f)
		it.res.Note = fmt.Sprintf("%s %s: %s (%s)", f.Kind, p, f.Detail, outcome)
		it.e.Log().Info("fsck finding", "job", it.j.ID, "kind", f.Kind, "path", p, "lin", f.LIN, "pool", f.Pool, "detail", f.Detail, "outcome", outcome)
		if err := it.keepFirst(ctx, f, p, outcome); err != nil {
			return err
		}
	}
	return nil
}

// fsckShown is one finding as the report lists it, kept as job data
// (JSON; V is its version, fsckShownVersion: a report reading another
// version skips the entry rather than misreading it).
type fsckShown struct {
	V       int           `json:"v"`
	Kind    meta.FsckKind `json:"kind"`
	Path    string        `json:"path"`
	LIN     meta.LIN      `json:"lin"`
	Detail  string        `json:"detail"`
	Outcome string        `json:"outcome"`
}

// keepFirst keeps f as job data for the report if fewer than fsckFirst
// of its kind are kept (workers racing may keep a few more).
func (it *fsckItem) keepFirst(ctx context.Context, f meta.FsckFinding, p, outcome string) error {
	if it.full[f.Kind] {
		return nil
	}
	d := it.e.JobData()
	pfx := fsckPfxFindings + string(f.Kind) + "/"
	kept, err := d.ListData(ctx, it.j.ID, pfx, "", fsckFirst)
	if err != nil {
		return err
	}
	if len(kept) >= fsckFirst {
		if it.full == nil {
			it.full = map[meta.FsckKind]bool{}
		}
		it.full[f.Kind] = true
		return nil
	}
	b, err := json.Marshal(fsckShown{V: fsckShownVersion, Kind: f.Kind, Path: p, LIN: f.LIN, Detail: f.Detail, Outcome: outcome})
	if err != nil {
		return err
	}
	return d.PutData(ctx, it.j.ID, pfx+fsckShownKey(f), b)
}

// fsckShownKey is the key of a finding kept for the report, after
// "f/KIND/": LIN, then the entry's parent and hex name, or the unit's
// stripe and unit index; the hex pool for a usage finding.
func fsckShownKey(f meta.FsckFinding) string {
	switch f.Kind {
	case meta.FsckUsageCounter:
		return "pool/" + hex.EncodeToString([]byte(f.Pool))
	case meta.FsckMissingUnit, meta.FsckBadHeader:
		return fmt.Sprintf("%016x/%016x/%04x", f.LIN, f.Stripe, f.Unit)
	}
	return fmt.Sprintf("%016x/%016x/%s", f.LIN, f.Parent, hex.EncodeToString([]byte(f.Name)))
}

// fsckPath is the path a finding is about: its entry's, or its inode's;
// for a usage finding, its pool.
func fsckPath(ctx context.Context, m *meta.Meta, f meta.FsckFinding) string {
	if f.Kind == meta.FsckUsageCounter {
		return fmt.Sprintf("(pool %q)", f.Pool)
	}
	if f.Name == "" {
		return pathOf(ctx, m, f.LIN)
	}
	dir := pathOf(ctx, m, f.Parent)
	if dir == "/" {
		return "/" + f.Name
	}
	return dir + "/" + f.Name
}

// fsckEntries is the entries phase: items are directories.
type fsckEntries struct{ t *fsckType }

func (*fsckEntries) Name() string { return "entries" }

// Split checks the parameters (a job submitted before a check existed
// still fails cleanly) and cuts the LIN space, with one task for the
// root.
func (p *fsckEntries) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := fsckEnvOf(env)
	if err != nil {
		return nil, err
	}
	if err := p.t.CheckParams(j.Params); err != nil {
		return nil, err
	}
	if ns, _ := fsckOnly(j.Params); !ns {
		return nil, nil
	}
	tasks, err := splitLINs(ctx, e.Meta(), j.Parallelism)
	if err != nil {
		return nil, err
	}
	// The root is below meta.FirstLIN, where the LIN scan starts.
	root := job.TaskSpec{Scope: "root", From: uint64(meta.RootLIN), To: uint64(meta.RootLIN) + 1}
	return append([]job.TaskSpec{root}, tasks...), nil
}

// Items lists the directories in [from, to).
func (*fsckEntries) Items(ctx context.Context, env job.Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	return listInodes(ctx, e.Meta(), from, to, limit, func(in meta.Inode) bool { return in.Type == meta.TypeDir })
}

// Process checks one directory's entries, a page at a time.
func (p *fsckEntries) Process(ctx context.Context, env job.Env, j *job.Job, _ string, item uint64) (job.ItemResult, error) {
	e, err := fsckEnvOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	it := newFsckItem(e, j)
	dir := meta.LIN(item)
	for after := ""; ; {
		page, err := e.Meta().FsckEntries(ctx, dir, after, 0)
		if err != nil {
			return job.ItemResult{}, err
		}
		// Each entry is a check (the directory's own, if empty): a
		// speed in directories would not bind on a namespace of a few
		// large ones. Paced after the read, the next page waits.
		if err := p.t.pace(ctx, j, max(page.Checked, 1)); err != nil {
			return job.ItemResult{}, err
		}
		it.res.Counts["checked"] += int64(page.Checked)
		if err := it.handle(ctx, page.Findings); err != nil {
			return job.ItemResult{}, err
		}
		for _, u := range page.Unclaimed {
			if err := e.JobData().PutData(ctx, j.ID, unclaimedKey(u), nil); err != nil {
				return job.ItemResult{}, err
			}
		}
		if page.Next == "" {
			return it.res, nil
		}
		after = page.Next
	}
}

// Keys of the job data: LINs as 16 hex digits (so that keys sort by
// LIN), names hex-encoded (any byte but '/' and NUL may be in a name).
func unclaimedKey(u meta.EntryRef) string {
	return fmt.Sprintf("%s%016x/%016x/%s", fsckPfxUnclaimed, u.LIN, u.Parent, hex.EncodeToString([]byte(u.Name)))
}

func claimedKey(parent meta.LIN, name string) string {
	return fmt.Sprintf("%s%016x/%s", fsckPfxClaimed, parent, hex.EncodeToString([]byte(name)))
}

func parseUnclaimed(k string) (meta.EntryRef, error) {
	f := strings.Split(strings.TrimPrefix(k, fsckPfxUnclaimed), "/")
	if len(f) != 3 {
		return meta.EntryRef{}, fmt.Errorf("fsck: job data key %q: want u/TARGET/PARENT/NAME", k)
	}
	lin, err1 := strconv.ParseUint(f[0], 16, 64)
	parent, err2 := strconv.ParseUint(f[1], 16, 64)
	name, err3 := hex.DecodeString(f[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return meta.EntryRef{}, fmt.Errorf("fsck: job data key %q: %w", k, err)
	}
	return meta.EntryRef{LIN: meta.LIN(lin), Parent: meta.LIN(parent), Name: string(name)}, nil
}

// fsckBackpointers is the backpointers phase: items are pages of LINs.
type fsckBackpointers struct{ t *fsckType }

func (*fsckBackpointers) Name() string { return "backpointers" }

func (*fsckBackpointers) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	if ns, _ := fsckOnly(j.Params); !ns {
		return nil, nil
	}
	_, tasks, err := linPages(ctx, e.Meta(), "pages", j.Parallelism)
	return tasks, err
}

func (*fsckBackpointers) Items(_ context.Context, _ job.Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	return pageItems(from, to, limit), nil
}

// Process checks the back-pointers of one page's inodes (one snapshot).
func (p *fsckBackpointers) Process(ctx context.Context, env job.Env, j *job.Job, _ string, page uint64) (job.ItemResult, error) {
	e, err := fsckEnvOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	n, fs, err := e.Meta().FsckBackpointersRange(ctx, meta.LIN(page*linPage), meta.LIN((page+1)*linPage))
	if err != nil {
		return job.ItemResult{}, err
	}
	if err := p.t.pace(ctx, j, n); err != nil {
		return job.ItemResult{}, err
	}
	it := newFsckItem(e, j)
	it.res.Counts["checked"] += int64(n)
	for _, f := range fs {
		if f.Kind == meta.FsckWrongEntry {
			if err := e.JobData().PutData(ctx, j.ID, claimedKey(f.Parent, f.Name), nil); err != nil {
				return job.ItemResult{}, err
			}
		}
	}
	if err := it.handle(ctx, fs); err != nil {
		return job.ItemResult{}, err
	}
	return it.res, nil
}

// fsckLinks is the links phase: items are pages of LINs, and one task
// ("stray:LO:HI") for the entries kept naming LINs outside pages
// [LO, HI).
type fsckLinks struct{ t *fsckType }

func (*fsckLinks) Name() string { return "links" }

func (*fsckLinks) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	if ns, _ := fsckOnly(j.Params); !ns {
		return nil, nil
	}
	hi, tasks, err := linPages(ctx, e.Meta(), "pages", j.Parallelism)
	if err != nil {
		return nil, err
	}
	return append(tasks, job.TaskSpec{Scope: fmt.Sprintf("stray:%d:%d", 0, hi), From: 0, To: 1}), nil
}

func (*fsckLinks) Items(_ context.Context, _ job.Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	return pageItems(from, to, limit), nil
}

// Process checks the links of one page's inodes, with the entries kept
// naming them (one snapshot); or, for the stray task, the entries kept
// naming LINs outside the pages.
func (p *fsckLinks) Process(ctx context.Context, env job.Env, j *job.Job, scope string, page uint64) (job.ItemResult, error) {
	e, err := fsckEnvOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	from, to := meta.LIN(page*linPage), meta.LIN((page+1)*linPage)
	stray := strings.HasPrefix(scope, "stray:")
	if stray {
		var lo, hi uint64
		if _, err := fmt.Sscanf(scope, "stray:%d:%d", &lo, &hi); err != nil {
			return job.ItemResult{}, fmt.Errorf("fsck: task scope %q: %w", scope, err)
		}
		from, to = meta.LIN(lo*linPage), meta.LIN(hi*linPage)
	}
	hints, err := p.hints(ctx, e, j, from, to, stray)
	if err != nil {
		return job.ItemResult{}, err
	}
	if stray {
		from, to = 0, 0 // only the hints' LINs
	}
	n, fs, err := e.Meta().FsckLinksRange(ctx, from, to, hints)
	if err != nil {
		return job.ItemResult{}, err
	}
	if err := p.t.pace(ctx, j, n); err != nil {
		return job.ItemResult{}, err
	}
	it := newFsckItem(e, j)
	it.res.Counts["checked"] += int64(n)
	if err := it.handle(ctx, fs); err != nil {
		return job.ItemResult{}, err
	}
	return it.res, nil
}

// hints returns the entries kept by the entries phase naming LINs in
// [from, to) (outside it, with outside), less those a wrong-entry finding
// explained.
func (*fsckLinks) hints(ctx context.Context, e FsckEnv, j *job.Job, from, to meta.LIN, outside bool) (map[meta.LIN][]meta.Link, error) {
	d := e.JobData()
	out := map[meta.LIN][]meta.Link{}
	after := ""
	if !outside && from > 0 {
		after = fmt.Sprintf("%s%016x", fsckPfxUnclaimed, from-1) + "/~"
	}
	for {
		batch, err := d.ListData(ctx, j.ID, fsckPfxUnclaimed, after, 256)
		if err != nil {
			return nil, err
		}
		for _, b := range batch {
			after = b.Key
			u, err := parseUnclaimed(b.Key)
			if err != nil {
				return nil, err
			}
			in := u.LIN >= from && u.LIN < to
			if !outside && !in {
				return out, nil
			}
			if outside && in {
				continue
			}
			_, claimed, err := d.GetData(ctx, j.ID, claimedKey(u.Parent, u.Name))
			if err != nil {
				return nil, err
			}
			if !claimed {
				out[u.LIN] = append(out[u.LIN], meta.Link{Parent: u.Parent, Name: u.Name})
			}
		}
		if len(batch) < 256 {
			return out, nil
		}
	}
}
