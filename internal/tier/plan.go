package tier

import (
	"cmp"
	"slices"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/policy"
)

// Candidate is a file a MIGRATE rule acts on (Decision.Act), as the
// planner needs it.
type Candidate struct {
	LIN meta.LIN
	// Rule is the index of the MIGRATE rule in the policy's rules.
	Rule int
	// Pool is the pool the file is in; Weight the rule's WEIGHT for it;
	// Allocated the bytes it takes there.
	Pool      string
	Weight    float64
	Allocated int64
	// Path is the file's path, when the caller keeps it ("" otherwise).
	Path string
}

// Pool is a pool's size and the bytes used in it, as the thresholds see
// them (cluster.Pool's TotalBytes and UsedBytes).
type Pool struct {
	Name       string
	Size, Used int64
}

// PoolsOf is the pools' space as the thresholds see it: the bytes weft's
// blocks take on the drives in service (UsedBytes) against their capacity
// (TotalBytes), as weft pool list shows USE%.
func PoolsOf(pools []cluster.Pool) []Pool {
	out := make([]Pool, len(pools))
	for i, p := range pools {
		out[i] = Pool{Name: p.Name, Size: p.TotalBytes, Used: p.UsedBytes}
	}
	return out
}

// Space is a pool's usage before and after the planned migrations.
type Space struct {
	Pool
	UsedAfter int64
}

// Group is what one MIGRATE rule moves out of one source pool.
type Group struct {
	// Rule is the rule's index; From the source pool, To the rule's TO
	// POOL.
	Rule     int
	From, To string
	// Candidates is how many files the rule acts on in From.
	Candidates int
	policy.Plan
	// Moves are the candidates the plan takes, highest weight first.
	Moves []Candidate
}

// PlanMigrations plans every MIGRATE rule's moves over cands, which must
// be in LIN order (as a scan reads them; equal weights keep that order).
// Rules plan in the policy's order and, within a rule, source pools by
// name; each sees the usage the earlier ones leave (Rule.Plan: THRESHOLD,
// WEIGHT order, LIMIT). A pool missing from pools has size 0: it neither
// triggers nor takes anything. It returns the groups with candidates, and
// every pool's space (pools first in their order, then pools only the
// rules name).
func PlanMigrations(rules []*policy.Rule, pools []Pool, cands []Candidate) ([]Group, []Space, error) {
	space := map[string]*Space{}
	var order []string
	poolOf := func(name string) *Space {
		if s, ok := space[name]; ok {
			return s
		}
		s := &Space{Pool: Pool{Name: name}}
		space[name], order = s, append(order, name)
		return s
	}
	for _, p := range pools {
		s := poolOf(p.Name)
		s.Pool, s.UsedAfter = p, p.Used
	}
	type key struct {
		rule int
		pool string
	}
	byKey := map[key][]Candidate{}
	for _, c := range cands {
		k := key{c.Rule, c.Pool}
		byKey[k] = append(byKey[k], c)
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.rule, b.rule), cmp.Compare(a.pool, b.pool))
	})
	var groups []Group
	pc := []policy.Candidate{}
	for _, k := range keys {
		if k.rule < 0 || k.rule >= len(rules) {
			continue
		}
		r := rules[k.rule]
		cs := byKey[k]
		src, dst := poolOf(k.pool), poolOf(r.Pool())
		pc = pc[:0]
		for _, c := range cs {
			pc = append(pc, policy.Candidate{Weight: c.Weight, Allocated: c.Allocated})
		}
		pl, err := r.Plan(policy.PoolSpace{Size: src.Size, Used: src.UsedAfter}, policy.PoolSpace{Size: dst.Size, Used: dst.UsedAfter}, pc)
		if err != nil {
			return nil, nil, err
		}
		g := Group{Rule: k.rule, From: k.pool, To: r.Pool(), Candidates: len(cs), Plan: pl}
		for _, t := range pl.Take {
			g.Moves = append(g.Moves, cs[t])
		}
		if src != dst {
			src.UsedAfter, dst.UsedAfter = pl.SourceUsed, pl.TargetUsed
		}
		groups = append(groups, g)
	}
	out := make([]Space, len(order))
	for i, n := range order {
		out[i] = *space[n]
	}
	return groups, out, nil
}
