package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/policy"
	"github.com/weftfs/weft/internal/tier"
)

// The tier job's phases (see Tier).

// tierScan is the scan phase: items are pages of linPage LINs.
type tierScan struct{ t *tierType }

func (*tierScan) Name() string { return "scan" }

// Split chooses the policy version (recorded for the later phases) and
// cuts the pages allocated so far.
func (s *tierScan) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := tierEnvOf(env)
	if err != nil {
		return nil, err
	}
	if _, err := tierDir(ctx, e.Meta(), j.Params); err != nil {
		return nil, err
	}
	// The version is chosen once: a Split run again (a new coordinator)
	// keeps it, so that every node of the job applies the same one.
	var v uint64
	if b, ok, err := e.JobData().GetData(ctx, j.ID, tierKeyPolicy); err != nil {
		return nil, err
	} else if ok {
		if v, err = decodeJobPolicy(b); err != nil {
			return nil, fmt.Errorf("tier: job %d: %w", j.ID, err)
		}
	} else {
		if v, _, err = s.t.resolvePolicy(ctx, e, j.Params); err != nil {
			return nil, err
		}
		if err := e.JobData().PutData(ctx, j.ID, tierKeyPolicy, encodeJobPolicy(v)); err != nil {
			return nil, err
		}
	}
	hi, tasks, err := linPages(ctx, e.Meta(), "pages", j.Parallelism)
	if err != nil {
		return nil, err
	}
	e.Log().Info("tier scan", "job", j.ID, "policy", v, "pages", hi)
	return tasks, nil
}

func (*tierScan) Items(_ context.Context, _ job.Env, _ string, from, to uint64, limit int) ([]uint64, error) {
	return pageItems(from, to, limit), nil
}

// Process evaluates one page's files and keeps what the rules act on.
func (s *tierScan) Process(ctx context.Context, env job.Env, j *job.Job, _ string, page uint64) (job.ItemResult, error) {
	e, err := tierEnvOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	ev, done, err := s.t.evaluator(ctx, e, j)
	if err != nil {
		return job.ItemResult{}, err
	}
	defer done()
	from := max(meta.LIN(page*linPage), meta.FirstLIN)
	inodes, _, err := e.Meta().ScanInodes(ctx, from, meta.LIN((page+1)*linPage), linPage)
	if err != nil {
		return job.ItemResult{}, err
	}
	rules := ev.Rules()
	res := job.ItemResult{Counts: map[string]int64{}}
	var acts, lists []tier.Candidate
	for i := range inodes {
		d, ok, err := ev.Eval(ctx, &inodes[i])
		if err != nil {
			return job.ItemResult{}, err
		}
		if !ok {
			continue
		}
		res.Items++
		res.Counts["files"]++
		for _, r := range d.Matched {
			res.Counts[ruleCount(r, "matched")]++
			res.Counts[ruleCount(r, "matched_b")] += d.Allocated
			if rules[r].Kind() == policy.KindList {
				lists = append(lists, tier.Candidate{LIN: d.LIN, Rule: r, Pool: d.Pool, Allocated: d.Allocated, Path: d.Path})
			}
		}
		if d.Act >= 0 {
			acts = append(acts, tier.Candidate{LIN: d.LIN, Rule: d.Act, Pool: d.Pool, Weight: d.Weight, Allocated: d.Allocated})
		}
	}
	for _, kv := range []struct {
		pfx string
		es  []tier.Candidate
	}{{tierPfxCandidates, acts}, {tierPfxLists, lists}} {
		var b []byte
		if len(kv.es) > 0 {
			b = tier.EncodeEntries(kv.es)
		}
		if err := putOrDelete(ctx, e.JobData(), j.ID, pageKey(kv.pfx, page), b); err != nil {
			return job.ItemResult{}, err
		}
	}
	return res, nil
}

// tierPlan is the plan phase: one task, one item.
type tierPlan struct {
	singleTask
	t *tierType
}

func (*tierPlan) Name() string { return "plan" }

// Process plans the migrations over every candidate and writes the
// files to move and to delete per page (nothing with dry-run=true).
func (p *tierPlan) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	e, err := tierEnvOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	_, pol, err := p.t.jobPolicy(ctx, e, j.ID)
	if err != nil {
		return job.ItemResult{}, err
	}
	rules := pol.Rules()
	var migrate, del []tier.Candidate
	err = eachEntry(ctx, e.JobData(), j.ID, tierPfxCandidates, func(_ uint64, es []tier.Candidate) error {
		for _, c := range es {
			if c.Rule < 0 || c.Rule >= len(rules) {
				return fmt.Errorf("tier: candidate LIN %d names rule %d of %d", c.LIN, c.Rule, len(rules))
			}
			if rules[c.Rule].Kind() == policy.KindMigrate {
				migrate = append(migrate, c)
			} else {
				del = append(del, c)
			}
		}
		return nil
	})
	if err != nil {
		return job.ItemResult{}, err
	}
	pools, err := e.Cluster().ListPools(ctx)
	if err != nil {
		return job.ItemResult{}, err
	}
	groups, space, err := tier.PlanMigrations(rules, tier.PoolsOf(pools), migrate)
	if err != nil {
		return job.ItemResult{}, err
	}
	res := job.ItemResult{Items: 1, Counts: map[string]int64{}}
	takes := map[uint64][]tier.Candidate{}
	for _, g := range groups {
		for _, m := range g.Moves {
			takes[uint64(m.LIN)/linPage] = append(takes[uint64(m.LIN)/linPage], m)
			res.Counts[ruleCount(g.Rule, "selected")]++
			res.Counts[ruleCount(g.Rule, "selected_b")] += m.Allocated
		}
	}
	for _, d := range del {
		takes[uint64(d.LIN)/linPage] = append(takes[uint64(d.LIN)/linPage], d)
		res.Counts[ruleCount(d.Rule, "selected")]++
		res.Counts[ruleCount(d.Rule, "selected_b")] += d.Allocated
	}
	res.Summary = planSummary(rules, groups, del, space)
	if j.Params["dry-run"] == "true" {
		res.Note = "dry run: nothing moved or deleted"
		return res, nil
	}
	// A plan made again (the item processed twice) replaces the first.
	err = eachEntry(ctx, e.JobData(), j.ID, tierPfxTakes, func(page uint64, _ []tier.Candidate) error {
		if _, ok := takes[page]; ok {
			return nil
		}
		return e.JobData().DeleteData(ctx, j.ID, pageKey(tierPfxTakes, page))
	})
	if err != nil {
		return job.ItemResult{}, err
	}
	for page, es := range takes {
		slices.SortStableFunc(es, func(a, b tier.Candidate) int { return int(a.LIN) - int(b.LIN) })
		if err := e.JobData().PutData(ctx, j.ID, pageKey(tierPfxTakes, page), tier.EncodeEntries(es)); err != nil {
			return job.ItemResult{}, err
		}
	}
	e.Log().Info("tier plan", "job", j.ID, "moves", len(migrate), "groups", len(groups), "deletes", len(del))
	return res, nil
}

// planSummary is the plan phase's table: per MIGRATE rule and source
// pool what it takes and why it stops, per DELETE rule the files, and the
// pools' use before and after.
func planSummary(rules []*policy.Rule, groups []tier.Group, del []tier.Candidate, space []tier.Space) string {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RULE\tKIND\tFROM\tTO\tCANDIDATES\tSELECTED\tMIB\tSTOP")
	for _, g := range groups {
		fmt.Fprintf(w, "%s\tMIGRATE\t%s\t%s\t%d\t%d\t%.1f\t%s\n", rules[g.Rule].Name(), g.From, g.To, g.Candidates, len(g.Moves), float64(g.Bytes)/(1<<20), g.Stop)
	}
	type acc struct {
		n     int
		bytes int64
	}
	dels := map[int]*acc{}
	for _, d := range del {
		if dels[d.Rule] == nil {
			dels[d.Rule] = &acc{}
		}
		dels[d.Rule].n++
		dels[d.Rule].bytes += d.Allocated
	}
	for i, r := range rules {
		if a := dels[i]; a != nil {
			fmt.Fprintf(w, "%s\tDELETE\t-\t-\t%d\t%d\t%.1f\t-\n", r.Name(), a.n, a.n, float64(a.bytes)/(1<<20))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "POOL\tSIZE MIB\tUSED MIB\tUSE%\tPLANNED MIB\tPLANNED USE%")
	for _, s := range space {
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%s\t%.1f\t%s\n", s.Name, mibs(s.Size), mibs(s.Used), pct(s.Used, s.Size), mibs(s.UsedAfter), pct(s.UsedAfter, s.Size))
	}
	w.Flush()
	return b.String()
}

func mibs(n int64) float64 { return float64(n) / (1 << 20) }

func pct(n, of int64) string {
	if of <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", float64(n)*100/float64(of))
}

// tierAct is the act phase: items are the LINs of the files to move or
// delete, over the "t/" pages.
type tierAct struct{ t *tierType }

func (*tierAct) Name() string { return "act" }

func (*tierAct) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := tierEnvOf(env)
	if err != nil {
		return nil, err
	}
	if j.Params["dry-run"] == "true" {
		return nil, nil
	}
	// Tasks over the pages that have work, about the same number of
	// pages each: the files that move may be a few pages of a large
	// namespace.
	var work []uint64
	err = eachEntry(ctx, e.JobData(), j.ID, tierPfxTakes, func(page uint64, _ []tier.Candidate) error {
		work = append(work, page)
		return nil
	})
	if err != nil || len(work) == 0 {
		return nil, err
	}
	n := max(1, min(j.Parallelism, len(work)))
	var out []job.TaskSpec
	for i := 0; i < n; i++ {
		a, b := work[i*len(work)/n], work[(i+1)*len(work)/n-1]
		// Items has no job: the scope carries its id.
		out = append(out, job.TaskSpec{Scope: actScope(j.ID), From: max(a*linPage, uint64(meta.FirstLIN)), To: (b + 1) * linPage})
	}
	return out, nil
}

// actScope is the act phase's scope: "job:ID".
func actScope(id job.JobID) string { return "job:" + strconv.FormatUint(uint64(id), 10) }

func parseActScope(scope string) (job.JobID, error) {
	s, ok := strings.CutPrefix(scope, "job:")
	n, err := strconv.ParseUint(s, 10, 64)
	if !ok || err != nil || n == 0 {
		return 0, fmt.Errorf("%w: tier act task scope %q: want job:ID", job.ErrInvalid, scope)
	}
	return job.JobID(n), nil
}

// Items lists the LINs in [from, to) of the "t/" pages.
func (*tierAct) Items(ctx context.Context, env job.Env, scope string, from, to uint64, limit int) ([]uint64, error) {
	e, err := tierEnvOf(env)
	if err != nil {
		return nil, err
	}
	id, err := parseActScope(scope)
	if err != nil {
		return nil, err
	}
	after := ""
	if p := from / linPage; p > 0 {
		after = pageKey(tierPfxTakes, p-1)
	}
	var out []uint64
	last := (to - 1) / linPage
	for {
		batch, err := e.JobData().ListData(ctx, id, tierPfxTakes, after, 16)
		if err != nil {
			return nil, err
		}
		for _, b := range batch {
			page, err := pageOf(b.Key, tierPfxTakes)
			if err != nil {
				return nil, fmt.Errorf("tier: job %d data key %q: %w", id, b.Key, err)
			}
			if page > last {
				return out, nil
			}
			es, err := tier.DecodeEntries(nil, b.Value)
			if err != nil {
				return nil, fmt.Errorf("tier: job %d data %s: %w", id, b.Key, err)
			}
			for _, c := range es {
				l := uint64(c.LIN)
				if l >= from && l < to && (len(out) == 0 || out[len(out)-1] != l) {
					if len(out) == limit {
						return out, nil
					}
					out = append(out, l)
				}
			}
			after = b.Key
		}
		if len(batch) < 16 {
			return out, nil
		}
	}
}

// Process moves or deletes one file as the plan decided.
func (a *tierAct) Process(ctx context.Context, env job.Env, j *job.Job, _ string, item uint64) (job.ItemResult, error) {
	e, err := tierEnvOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	lin := meta.LIN(item)
	b, ok, err := e.JobData().GetData(ctx, j.ID, pageKey(tierPfxTakes, item/linPage))
	if err != nil || !ok {
		return job.ItemResult{}, err
	}
	es, err := tier.DecodeEntries(nil, b)
	if err != nil {
		return job.ItemResult{}, fmt.Errorf("tier: job %d page %d: %w", j.ID, item/linPage, err)
	}
	i := slices.IndexFunc(es, func(c tier.Candidate) bool { return c.LIN == lin })
	if i < 0 {
		return job.ItemResult{}, nil
	}
	c := es[i]
	_, pol, err := a.t.jobPolicy(ctx, e, j.ID)
	if err != nil {
		return job.ItemResult{}, err
	}
	rules := pol.Rules()
	if c.Rule < 0 || c.Rule >= len(rules) {
		return job.ItemResult{}, fmt.Errorf("tier: LIN %d names rule %d of %d", lin, c.Rule, len(rules))
	}
	if rules[c.Rule].Kind() == policy.KindDelete {
		return a.remove(ctx, e, j, c)
	}
	return a.move(ctx, e, c, rules[c.Rule])
}

// move moves c's file to r's pool and protection, unless it left c.Pool
// since the scan.
func (a *tierAct) move(ctx context.Context, e TierEnv, c tier.Candidate, r *policy.Rule) (job.ItemResult, error) {
	m := e.Meta()
	res := job.ItemResult{Items: 1, Counts: map[string]int64{}}
	attr, err := m.GetAttr(ctx, c.LIN)
	if errors.Is(err, meta.ErrNotFound) {
		res.Counts[ruleCount(c.Rule, "gone")]++
		return res, nil
	}
	if err != nil {
		return job.ItemResult{}, err
	}
	if attr.Pool != c.Pool {
		res.Counts[ruleCount(c.Rule, "changed")]++
		res.Note = fmt.Sprintf("%s: in pool %s now, not %s as scanned: left alone", pathOf(ctx, m, c.LIN), attr.Pool, c.Pool)
		return res, nil
	}
	want, mask := attr, meta.SetPool
	want.Pool = r.Pool()
	if s := r.Protection(); s != "" {
		p, err := meta.ParseProtection(s)
		if err != nil {
			return job.ItemResult{}, fmt.Errorf("tier: rule %s: PROTECTION %q: %w", r.Name(), s, err)
		}
		want.Protection, mask = p, mask|meta.SetProtection
	}
	if _, err := m.SetAttr(ctx, c.LIN, mask, want); errors.Is(err, meta.ErrNotFound) {
		res.Counts[ruleCount(c.Rule, "gone")]++
		return res, nil
	} else if err != nil {
		return job.ItemResult{}, err
	}
	// The attributes name the target now: a failed rewrite is retried
	// from here (the engine retries the item; RelayoutFile is idempotent).
	rr, err := relayoutFile(ctx, e, c.LIN)
	if err != nil {
		return job.ItemResult{}, err
	}
	res.Bytes, res.Errors, res.Note = rr.Bytes, rr.Errors, rr.Note
	res.Counts[ruleCount(c.Rule, "files")]++
	res.Counts[ruleCount(c.Rule, "bytes")] += c.Allocated
	return res, nil
}

// remove deletes c's file (every name of it) if the rule still matches
// it now.
func (a *tierAct) remove(ctx context.Context, e TierEnv, j *job.Job, c tier.Candidate) (job.ItemResult, error) {
	m := e.Meta()
	res := job.ItemResult{Items: 1, Counts: map[string]int64{}}
	in, err := m.GetInode(ctx, c.LIN)
	if errors.Is(err, meta.ErrNotFound) {
		res.Counts[ruleCount(c.Rule, "gone")]++
		return res, nil
	}
	if err != nil {
		return job.ItemResult{}, err
	}
	ev, done, err := a.t.evaluator(ctx, e, j)
	if err != nil {
		return job.ItemResult{}, err
	}
	still, err := ev.Still(ctx, &in, c.Rule)
	done()
	if err != nil {
		return job.ItemResult{}, err
	}
	if !still {
		res.Counts[ruleCount(c.Rule, "changed")]++
		res.Note = fmt.Sprintf("LIN %d: changed since the scan, no longer matched: kept", c.LIN)
		return res, nil
	}
	for _, l := range in.Links {
		at, err := m.Lookup(ctx, l.Parent, l.Name)
		if errors.Is(err, meta.ErrNotFound) || err == nil && at.LIN != c.LIN {
			continue // renamed over or removed meanwhile
		}
		if err != nil {
			return job.ItemResult{}, err
		}
		if err := m.Unlink(ctx, l.Parent, l.Name); err != nil && !errors.Is(err, meta.ErrNotFound) {
			return job.ItemResult{}, fmt.Errorf("tier: delete %q in directory LIN %d: %w", l.Name, l.Parent, err)
		}
	}
	res.Counts[ruleCount(c.Rule, "files")]++
	res.Counts[ruleCount(c.Rule, "bytes")] += c.Allocated
	return res, nil
}

// tierReport is the report phase: one item that writes the lists and
// sums the job per rule.
type tierReport struct {
	singleTask
	t *tierType
}

func (*tierReport) Name() string { return "report" }

// Process writes each LIST rule's file and the per-rule table.
func (r *tierReport) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	e, err := tierEnvOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	jc, pol, err := r.t.jobPolicy(ctx, e, j.ID)
	if err != nil {
		return job.ItemResult{}, err
	}
	rules := pol.Rules()
	lists := map[string]*bytes.Buffer{}
	var names []string
	err = eachEntry(ctx, e.JobData(), j.ID, tierPfxLists, func(_ uint64, es []tier.Candidate) error {
		for _, c := range es {
			if c.Rule < 0 || c.Rule >= len(rules) {
				return fmt.Errorf("tier: list entry LIN %d names rule %d of %d", c.LIN, c.Rule, len(rules))
			}
			name := rules[c.Rule].List()
			if lists[name] == nil {
				lists[name] = &bytes.Buffer{}
				names = append(names, name)
			}
			lists[name].WriteString(c.Path)
			lists[name].WriteByte('\n')
		}
		return nil
	})
	if err != nil {
		return job.ItemResult{}, err
	}
	files := map[string]string{}
	for _, name := range names {
		p := fmt.Sprintf("%s/%s.%d", TierListDir, name, j.ID)
		if err := writeNamespaceFile(ctx, e, p, lists[name].Bytes()); err != nil {
			return job.ItemResult{}, fmt.Errorf("tier: list %s: %w", name, err)
		}
		files[name] = p
	}
	counts := map[string]int64{}
	for _, rep := range j.Reports {
		for _, s := range rep.Scopes {
			for k, n := range s.Counts {
				counts[k] += n
			}
		}
	}
	res := job.ItemResult{Items: 1, Summary: ruleSummary(jc.version, rules, counts, files, j.Params["dry-run"] == "true")}
	return res, nil
}

// ruleSummary is the job's table per rule: files (and MiB) matched,
// selected (planned to act on), done, and those left because they
// changed or went away since the scan; then the lists written.
func ruleSummary(v uint64, rules []*policy.Rule, c map[string]int64, files map[string]string, dry bool) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "policy version %d, %d files evaluated", v, c["files"])
	if dry {
		b.WriteString(" (dry run: nothing moved or deleted)")
	}
	b.WriteString("\n\n")
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RULE\tKIND\tMATCHED\tMATCHED MIB\tSELECTED\tDONE\tDONE MIB\tCHANGED\tGONE")
	for i, r := range rules {
		if r.Kind() == policy.KindSetPool {
			continue
		}
		get := func(k string) int64 { return c[ruleCount(i, k)] }
		if r.Kind() == policy.KindList {
			// A list selects and writes every file it matches.
			get = func(k string) int64 {
				switch k {
				case "selected", "files":
					k = "matched"
				case "bytes":
					k = "matched_b"
				}
				return c[ruleCount(i, k)]
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%.1f\t%d\t%d\t%.1f\t%d\t%d\n", r.Name(), r.Kind(), get("matched"), mibs(get("matched_b")),
			get("selected"), get("files"), mibs(get("bytes")), get("changed"), get("gone"))
	}
	w.Flush()
	if len(files) > 0 {
		b.WriteString("\nlists:\n")
		var names []string
		for n := range files {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			fmt.Fprintf(&b, "  %s: %s\n", n, files[n])
		}
	}
	return b.String()
}
