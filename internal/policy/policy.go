package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Kind is what a rule does.
type Kind uint8

const (
	// KindSetPool places new files: SET POOL 'p' [PROTECTION 's'].
	KindSetPool Kind = iota + 1
	// KindMigrate moves files between pools (or changes their
	// protection): MIGRATE [FROM POOL 'p'] ... TO POOL 'q'.
	KindMigrate
	// KindDelete deletes files: DELETE.
	KindDelete
	// KindList names files for a list: LIST 'name'.
	KindList
)

// String returns the kind as the language writes it ("SET POOL").
func (k Kind) String() string {
	switch k {
	case KindSetPool:
		return "SET POOL"
	case KindMigrate:
		return "MIGRATE"
	case KindDelete:
		return "DELETE"
	case KindList:
		return "LIST"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Policy is a parsed, checked and compiled policy: its rules in order and
// its macros. It is immutable and safe for concurrent use.
type Policy struct {
	stmts  []stmt
	rules  []*Rule
	needs  AttrSet
	xattrs []string
	envs   *envPool
}

// Rule is one rule of a policy. It is immutable and safe for concurrent
// use; its methods read its parameters.
type Rule struct {
	name      string
	generated bool
	index     int // 1-based, among the policy's rules
	kind      Kind
	pos       Pos

	pool, protection, from, list string
	hasThreshold                 bool
	high, low                    float64
	hasLimit                     bool
	limit                        float64
	where, weight                node

	cond  boolFn   // nil: no WHERE
	weigh numFn    // nil: no WEIGHT
	envs  *envPool // its policy's

	// Positions of the parameters, for the checker's messages; zero
	// when absent.
	namePos, poolPos, fromPos, protPos, listPos, thresholdPos Pos
}

// Placement is where a new file goes: the first SET POOL rule that
// matches it.
type Placement struct {
	// Rule is the matching rule's name.
	Rule string
	// Pool is the pool the file's data goes to.
	Pool string
	// Protection is the rule's PROTECTION, or "" for the pool's default.
	Protection string
}

// Parse parses, checks and compiles a policy's text. With a nil Catalog
// pools and protections are not checked (any name is accepted).
//
// A policy that is not valid returns an *Errors (wrapping ErrInvalid)
// listing every problem found, by position: syntax errors (what was
// expected, what was found, after what), type errors and unknown pools.
// Parse never panics and its work is bounded by the limits (MaxSourceBytes,
// MaxDepth, MaxHeight, MaxNodes, MaxTotalNodes) whatever the text.
func Parse(src string, cat Catalog) (*Policy, error) {
	if len(src) > MaxSourceBytes {
		return nil, &Errors{List: []Error{{Pos{1, 1},
			fmt.Sprintf("policy of %d bytes: at most %d are accepted", len(src), MaxSourceBytes)}}}
	}
	toks, lexErrs := lex(src)
	p := &parser{src: src, toks: toks, cat: cat, errs: lexErrs,
		macros: map[string]*define{}, names: map[string]Pos{}}
	p.parse()
	if len(p.errs) > 0 {
		return nil, sortErrors(p.errs)
	}
	pol := &Policy{stmts: p.stmts, rules: p.rules, envs: &envPool{}}
	xattrs := map[string]bool{}
	for _, r := range pol.rules {
		r.envs = pol.envs
		if r.where != nil {
			r.cond, _ = compileBool(r.where)
			pol.noteNeeds(r.where, xattrs)
		}
		if r.weight != nil {
			r.weigh, _ = compileNum(r.weight)
			pol.noteNeeds(r.weight, xattrs)
		}
		if r.kind == KindMigrate {
			pol.needs |= AttrPool
			if r.protection != "" {
				pol.needs |= AttrProtection
			}
		}
	}
	for x := range xattrs {
		pol.xattrs = append(pol.xattrs, x)
	}
	slices.Sort(pol.xattrs)
	return pol, nil
}

// sortErrors orders errors by position, drops a second error at the same
// position (the lexer's and the parser's view of one mistake) and keeps
// MaxErrors.
func sortErrors(errs []Error) *Errors {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Pos.less(errs[j].Pos) })
	out := errs[:0]
	for i, e := range errs {
		if i > 0 && e.Pos == errs[i-1].Pos {
			continue
		}
		out = append(out, e)
	}
	res := &Errors{List: out}
	if len(out) > MaxErrors {
		res.List, res.Omitted = out[:MaxErrors:MaxErrors], len(out)-MaxErrors
	}
	return res
}

// noteNeeds adds the attributes and extended attributes n reads.
func (p *Policy) noteNeeds(n node, xattrs map[string]bool) {
	walk(n, func(n node) {
		switch n := n.(type) {
		case *attrRef:
			p.needs |= attrs[n.a].set
		case *call:
			if n.fn == fnXattr {
				p.needs |= AttrXattrs
				xattrs[n.args[0].(*strLit).v] = true
			}
		}
	})
}

// walk calls f on n and every node below it, macros expanded.
func walk(n node, f func(node)) {
	f(n)
	switch n := n.(type) {
	case *macroRef:
		if !n.def.bad {
			walk(n.def.body, f)
		}
	case *call:
		for _, x := range n.args {
			walk(x, f)
		}
	case *neg:
		walk(n.x, f)
	case *not:
		walk(n.x, f)
	case *arith:
		walk(n.x, f)
		walk(n.y, f)
	case *compare:
		walk(n.x, f)
		walk(n.y, f)
	case *logic:
		for _, x := range n.xs {
			walk(x, f)
		}
	case *like:
		walk(n.x, f)
		walk(n.pat, f)
	case *in:
		walk(n.x, f)
		for _, x := range n.list {
			walk(x, f)
		}
	case *between:
		walk(n.x, f)
		walk(n.lo, f)
		walk(n.hi, f)
	case *isNull:
		walk(n.x, f)
	case *caseExpr:
		for _, w := range n.whens {
			walk(w.cond, f)
			walk(w.then, f)
		}
		if n.els != nil {
			walk(n.els, f)
		}
	}
}

// Rules returns the policy's rules in order (a new slice; the rules are
// shared and immutable).
func (p *Policy) Rules() []*Rule { return slices.Clone(p.rules) }

// Rule returns the rule of that name (a generated name, "rule#3", names
// an unnamed rule).
func (p *Policy) Rule(name string) (*Rule, bool) {
	for _, r := range p.rules {
		if r.name == name {
			return r, true
		}
	}
	return nil, false
}

// Needs returns the attributes the policy's conditions and weights read
// (MIGRATE rules also read POOL_NAME, and PROTECTION when they name one)
// and the names of the extended attributes they read, sorted: a caller
// may leave the others unknown without changing any result.
func (p *Policy) Needs() (AttrSet, []string) { return p.needs, slices.Clone(p.xattrs) }

// Place returns where a new file goes: the first SET POOL rule whose
// condition is TRUE for f at now. ok is false when none is: the caller
// then uses its default pool. f is typically known as AttrsAtCreate.
func (p *Policy) Place(f File, now time.Time) (pl Placement, ok bool) {
	r, ok := p.First(KindSetPool, f, now)
	if !ok {
		return Placement{}, false
	}
	return Placement{Rule: r.name, Pool: r.pool, Protection: r.protection}, true
}

// First returns the first rule of kind k that matches f at now (see
// Rule.Match). How rules of different kinds combine is the caller's: the
// tier job, for instance, may apply the first MIGRATE and the first
// DELETE rule.
func (p *Policy) First(k Kind, f File, now time.Time) (*Rule, bool) {
	e := p.envs.get(&f, now)
	defer p.envs.put(e)
	for _, r := range p.rules {
		if r.kind == k && r.match(e) {
			return r, true
		}
	}
	return nil, false
}

// Matching appends to dst every rule that matches f at now (see
// Rule.Match), in the policy's order, and returns the extended slice. It
// evaluates the file once for all rules (names, modes and the like are
// computed once): the tier job's scan, which passes the same dst[:0] for
// each file, allocates only the strings MODE, LOWER and UPPER make.
func (p *Policy) Matching(f File, now time.Time, dst []*Rule) []*Rule {
	e := p.envs.get(&f, now)
	defer p.envs.put(e)
	for _, r := range p.rules {
		if r.match(e) {
			dst = append(dst, r)
		}
	}
	return dst
}

// Match reports whether the rule applies to f at now: its WHERE
// condition is TRUE (not FALSE, not UNKNOWN), or it has none. A MIGRATE
// rule also requires f's pool to be known, to be its FROM POOL if it
// names one, and f not to be where the rule would put it already (in its
// TO POOL with its PROTECTION, or any protection if it names none; with
// the protection unknown that is UNKNOWN, so no match).
func (r *Rule) Match(f File, now time.Time) bool {
	e := r.envs.get(&f, now)
	defer r.envs.put(e)
	return r.match(e)
}

func (r *Rule) match(e *env) bool {
	if r.kind == KindMigrate {
		f := &e.f
		if f.Known&AttrPool == 0 || r.from != "" && f.Pool != r.from {
			return false
		}
		if f.Pool == r.pool && (r.protection == "" || f.Known&AttrProtection == 0 || f.Protection == r.protection) {
			return false
		}
	}
	return r.cond == nil || r.cond(e) == triTrue
}

// Weight returns the rule's WEIGHT for f at now: 0 for a rule without one
// (or not a MIGRATE rule), and 0 when the weight is NULL.
func (r *Rule) Weight(f File, now time.Time) float64 {
	if r.weigh == nil {
		return 0
	}
	e := r.envs.get(&f, now)
	defer r.envs.put(e)
	v, ok := r.weigh(e)
	if !ok {
		return 0
	}
	return v
}

// Name returns the rule's name: the one it was given, or "rule#N" for
// the N-th rule of the policy if it has none.
func (r *Rule) Name() string { return r.name }

// Generated reports whether the rule's name was generated.
func (r *Rule) Generated() bool { return r.generated }

// Kind returns what the rule does.
func (r *Rule) Kind() Kind { return r.kind }

// Pos returns where the rule starts in the policy's text.
func (r *Rule) Pos() Pos { return r.pos }

// Pool returns the pool a SET POOL or MIGRATE rule puts files in (its
// SET POOL or TO POOL), or "".
func (r *Rule) Pool() string { return r.pool }

// Protection returns the rule's PROTECTION, or "" (the pool's default).
func (r *Rule) Protection() string { return r.protection }

// From returns a MIGRATE rule's FROM POOL, or "" (files of any pool).
func (r *Rule) From() string { return r.from }

// Threshold returns a MIGRATE rule's THRESHOLD(high, low) in percent;
// ok is false when it has none.
func (r *Rule) Threshold() (high, low float64, ok bool) { return r.high, r.low, r.hasThreshold }

// Limit returns a MIGRATE rule's LIMIT in percent; ok is false when it
// has none (the target may fill up to 100%).
func (r *Rule) Limit() (pct float64, ok bool) { return r.limit, r.hasLimit }

// List returns a LIST rule's list name, or "".
func (r *Rule) List() string { return r.list }

// Condition returns the rule's WHERE condition printed canonically, or
// "" if it has none.
func (r *Rule) Condition() string {
	if r.where == nil {
		return ""
	}
	return exprString(r.where)
}

// WeightExpr returns a MIGRATE rule's WEIGHT expression printed
// canonically, or "" if it has none.
func (r *Rule) WeightExpr() string {
	if r.weight == nil {
		return ""
	}
	return exprString(r.weight)
}

// String prints the rule canonically, on one line.
func (r *Rule) String() string {
	var b strings.Builder
	writeRule(&b, r)
	return b.String()
}
