package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits that keep every input cheap: no text makes Parse, the checker,
// the compiler or an evaluation recurse deeply, take long or use much
// memory. Macros are counted expanded, so DEFINEs that use each other
// twice cannot grow an expression exponentially.
const (
	// MaxSourceBytes is the longest policy text accepted.
	MaxSourceBytes = 256 << 10
	// MaxDepth is how deeply parentheses, NOTs, minus signs and function
	// calls may nest in the text.
	MaxDepth = 64
	// MaxHeight is the height of an expression's tree with its macros
	// expanded (a AND b AND c is one level; 1 + 2 + 3 is two).
	MaxHeight = 256
	// MaxNodes is the size of one expression with its macros expanded.
	MaxNodes = 10000
	// MaxTotalNodes is the size of all a policy's expressions with their
	// macros expanded, which bounds the compiled policy's memory.
	MaxTotalNodes = 200000
)

// maxFound stops parsing after so many problems: the text is no policy.
const maxFound = 200

// Catalog is what the checker asks of the cluster; the caller implements
// it (over the control plane's pools and erasure's protection specs), so
// that this package imports nothing of weft.
type Catalog interface {
	// PoolExists reports whether a pool of that name exists.
	PoolExists(name string) bool
	// ValidProtection returns nil for a protection spec the cluster
	// accepts ("ec:4+2", "mirror:3"), else an error saying why.
	ValidProtection(spec string) error
}

// bailout is raised (panic) to abandon a statement after a syntax error;
// statement() recovers it and skips to the next statement.
type bailout struct{}

// parser is a recursive-descent parser over the lexer's tokens. It also
// runs the checker on each statement as it completes, so that a macro's
// type is known where it is used.
type parser struct {
	src  string
	toks []token
	i    int
	tok  token
	cat  Catalog
	errs []Error

	depth    int                // nesting in the text (MaxDepth)
	total    int                // expanded size of all expressions (MaxTotalNodes)
	macros   map[string]*define // by lower-case name
	defining string             // lower-case name of the DEFINE being parsed
	names    map[string]Pos     // rule names
	nrules   int
	stmts    []stmt
	rules    []*Rule
}

// stmt is one statement of a policy: a rule or a DEFINE.
type stmt struct {
	rule *Rule
	def  *define
}

func (p *parser) next() {
	if p.i < len(p.toks)-1 {
		p.i++
	}
	p.tok = p.toks[p.i]
}

// peek returns the token after the current one.
func (p *parser) peek() token {
	if p.i+1 < len(p.toks) {
		return p.toks[p.i+1]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) errorAt(pos Pos, format string, args ...any) {
	p.errs = append(p.errs, Error{pos, fmt.Sprintf(format, args...)})
}

// failAt reports an error and abandons the statement.
func (p *parser) failAt(pos Pos, format string, args ...any) {
	p.errorAt(pos, format, args...)
	panic(bailout{})
}

// expected reports "expected WHAT [after AFTER], found TOKEN" at the
// current token and abandons the statement. A token the lexer already
// reported is not reported again.
func (p *parser) expected(what, after string) {
	if p.tok.kind != tIllegal {
		msg := "expected " + what
		if after != "" {
			msg += " after " + after
		}
		p.errorAt(p.tok.pos, "%s, found %s", msg, p.tok.describe())
	}
	panic(bailout{})
}

// prev spells the token before the current one, for "after" in messages.
func (p *parser) prev() string {
	if p.i == 0 {
		return ""
	}
	return p.spell(p.i-1, p.i)
}

// spell quotes the tokens [from, to) as canonically as tokens allow:
// keywords in capitals, one space between tokens but none inside
// parentheses or around commas ("MIGRATE FROM POOL 'fast' THRESHOLD(80,40)").
// Past 80 characters only the end is kept.
func (p *parser) spell(from, to int) string {
	var b strings.Builder
	for j := from; j < to && j < len(p.toks); j++ {
		t := p.toks[j]
		if j > from {
			pv := p.toks[j-1]
			tight := t.kind == tRParen || t.kind == tComma || pv.kind == tLParen || pv.kind == tComma ||
				t.kind == tLParen && pv.kind == tIdent
			if !tight {
				b.WriteByte(' ')
			}
		}
		b.WriteString(t.spell())
	}
	s := b.String()
	if n := utf8.RuneCountInString(s); n > 80 {
		r := []rune(s)
		s = "..." + string(r[n-77:])
	}
	return s
}

// expect consumes a token of kind k, or fails with "expected k after
// <the text from ctx>" (the previous token if ctx < 0).
func (p *parser) expect(k tokKind, ctx int) {
	if p.tok.kind != k {
		p.expected(`"`+punct[k]+`"`, p.after(ctx))
	}
	p.next()
}

// expectKw consumes keyword kw, or fails as expect does.
func (p *parser) expectKw(kw keyword, ctx int) {
	if p.tok.kind != tIdent || p.tok.kw != kw {
		p.expected(kw.String(), p.after(ctx))
	}
	p.next()
}

func (p *parser) after(ctx int) string {
	if ctx < 0 {
		return p.prev()
	}
	return p.spell(ctx, p.i)
}

// parse parses the whole text into p.stmts and p.rules.
func (p *parser) parse() {
	p.tok = p.toks[0]
	for p.tok.kind != tEOF && len(p.errs) < maxFound {
		p.statement()
	}
}

// statement parses one statement; after a syntax error it skips to the
// next RULE, DEFINE or ';'.
func (p *parser) statement() {
	start := p.i
	p.depth = 0
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(bailout); !ok {
				panic(r)
			}
			p.sync(start)
		}
	}()
	switch {
	case p.tok.kind == tSemi:
		p.next()
		return
	case p.tok.kw == kwRule:
		p.rule()
	case p.tok.kw == kwDefine:
		p.define()
	default:
		p.expected("RULE or DEFINE", "")
	}
	if p.tok.kind == tSemi {
		p.next()
	}
}

func (p *parser) sync(start int) {
	if p.i == start {
		p.next()
	}
	for p.tok.kind != tEOF && p.tok.kw != kwRule && p.tok.kw != kwDefine {
		if p.tok.kind == tSemi {
			p.next()
			return
		}
		p.next()
	}
}

// atStatementEnd reports whether the current token ends a statement.
func (p *parser) atStatementEnd() bool {
	return p.tok.kind == tEOF || p.tok.kind == tSemi || p.tok.kw == kwRule || p.tok.kw == kwDefine
}

// orList joins alternatives for a message: "A, B or C".
func orList(xs []string) string {
	if len(xs) == 1 {
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// rule parses RULE ['name'] action [WHERE condition].
func (p *parser) rule() {
	p.nrules++
	start := p.i
	r := &Rule{pos: p.tok.pos, index: p.nrules}
	p.next()
	if p.tok.kind == tString {
		r.name, r.namePos = p.tok.text, p.tok.pos
		p.next()
	}
	act := p.i
	var more []string // clauses that may still follow the action
	switch p.tok.kw {
	case kwSet:
		r.kind = KindSetPool
		p.next()
		p.expectKw(kwPool, act)
		r.pool, r.poolPos = p.stringArg("a pool name in quotes", act)
		if p.tok.kw == kwProtection {
			p.next()
			r.protection, r.protPos = p.stringArg("a protection in quotes, like 'ec:4+2'", act)
		} else {
			more = append(more, "PROTECTION")
		}
	case kwMigrate:
		more = p.migrate(r, act)
	case kwDelete:
		r.kind = KindDelete
		p.next()
	case kwList:
		r.kind = KindList
		p.next()
		r.list, r.listPos = p.stringArg("a list name in quotes", act)
	default:
		p.expected("SET POOL, MIGRATE, DELETE or LIST", p.spell(start, p.i))
	}
	if p.tok.kw == kwWhere {
		where := p.i
		p.next()
		r.where = p.exprTop()
		if !p.atStatementEnd() {
			p.expected("AND, OR or the next RULE", p.spell(where, p.i))
		}
	} else if !p.atStatementEnd() {
		p.expected(orList(append(more, "WHERE", "the next RULE")), p.spell(act, p.i))
	}
	p.finishRule(r)
}

// stringArg consumes a string literal, or fails expecting what.
func (p *parser) stringArg(what string, ctx int) (string, Pos) {
	if p.tok.kind != tString {
		p.expected(what, p.after(ctx))
	}
	s, pos := p.tok.text, p.tok.pos
	p.next()
	return s, pos
}

// migrateClauses are MIGRATE's clauses in their canonical order.
var migrateClauses = [...]keyword{kwFrom, kwThreshold, kwWeight, kwTo, kwProtection, kwLimit}

// migrate parses MIGRATE and its clauses, which may come in any order,
// each at most once; it returns the clauses not given, for the message
// of what may follow.
func (p *parser) migrate(r *Rule, act int) (more []string) {
	r.kind = KindMigrate
	p.next()
	seen := map[keyword]bool{}
	for slices.Contains(migrateClauses[:], p.tok.kw) {
		kw, pos := p.tok.kw, p.tok.pos
		if seen[kw] {
			p.errorAt(pos, "%s given twice in one rule", kw)
		}
		seen[kw] = true
		p.next()
		switch kw {
		case kwFrom:
			p.expectKw(kwPool, act)
			r.from, r.fromPos = p.stringArg("a pool name in quotes", act)
		case kwTo:
			p.expectKw(kwPool, act)
			r.pool, r.poolPos = p.stringArg("a pool name in quotes", act)
		case kwProtection:
			r.protection, r.protPos = p.stringArg("a protection in quotes, like 'ec:4+2'", act)
		case kwThreshold:
			p.expect(tLParen, act)
			high := p.percent("THRESHOLD", act)
			p.expect(tComma, act)
			low := p.percent("THRESHOLD", act)
			p.expect(tRParen, act)
			if high < low {
				p.errorAt(pos, "THRESHOLD(%s,%s): the high mark is below the low mark (migration starts above the first and stops at the second)", fmtNum(high), fmtNum(low))
			}
			r.hasThreshold, r.high, r.low, r.thresholdPos = true, high, low, pos
		case kwWeight:
			p.expect(tLParen, act)
			r.weight = p.exprTop()
			p.expect(tRParen, act)
		case kwLimit:
			p.expect(tLParen, act)
			r.limit = p.percent("LIMIT", act)
			r.hasLimit = true
			p.expect(tRParen, act)
		}
	}
	if !seen[kwTo] {
		p.expected("TO POOL", p.spell(act, p.i))
	}
	for _, kw := range migrateClauses {
		if !seen[kw] {
			s := kw.String()
			if kw == kwFrom {
				s = "FROM POOL"
			}
			more = append(more, s)
		}
	}
	return more
}

// percent consumes a number from 0 to 100 (a THRESHOLD or LIMIT).
func (p *parser) percent(clause string, ctx int) float64 {
	if p.tok.kind != tNumber {
		p.expected("a percentage (0 to 100)", p.after(ctx))
	}
	t := p.tok
	p.next()
	if isLetter(p.src[t.end-1]) {
		p.errorAt(t.pos, "%s takes percentages (0 to 100), not sizes: %s", clause, t.text)
	} else if t.num > 100 {
		p.errorAt(t.pos, "%s takes percentages from 0 to 100, found %s", clause, t.text)
	}
	return t.num
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// finishRule checks a parsed rule (names, types, pools) and adds it.
func (p *parser) finishRule(r *Rule) {
	p.checkRule(r)
	switch {
	case r.namePos == Pos{}:
		r.name, r.generated = "rule#"+strconv.Itoa(r.index), true
	case r.name == "":
		p.errorAt(r.namePos, "a rule's name cannot be empty: leave it out to have one generated")
	case isGeneratedName(r.name):
		p.errorAt(r.namePos, "rule name %s is reserved for unnamed rules: choose another", quoteShort(r.name))
	}
	if prev, dup := p.names[r.name]; dup && r.name != "" {
		at := r.namePos
		if r.generated {
			at = r.pos
		}
		p.errorAt(at, "rule name %s is already used by the rule at %s: names must be unique", quoteShort(r.name), prev)
	} else {
		p.names[r.name] = r.pos
	}
	p.rules = append(p.rules, r)
	p.stmts = append(p.stmts, stmt{rule: r})
}

// isGeneratedName reports whether name has the form of a generated one,
// "rule#N".
func isGeneratedName(name string) bool {
	n, ok := strings.CutPrefix(name, "rule#")
	if !ok || n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if !isDigit(n[i]) {
			return false
		}
	}
	return true
}

// define parses DEFINE(name, expression). The macro is registered even
// when its body fails, marked bad, so that its uses raise no more errors.
func (p *parser) define() {
	start := p.i
	p.next()
	p.expect(tLParen, start)
	if p.tok.kind != tIdent {
		p.expected("a macro name", p.spell(start, p.i))
	}
	if p.tok.kw != kwNone {
		p.failAt(p.tok.pos, "%s is a keyword and cannot name a macro", p.tok.kw)
	}
	name, pos := p.tok.text, p.tok.pos
	key := strings.ToLower(name)
	register := true
	if _, ok := lookupAttr(name); ok {
		p.errorAt(pos, "%s is an attribute and cannot name a macro", strings.ToUpper(name))
		register = false
	} else if _, ok := lookupFunction(name); ok {
		p.errorAt(pos, "%s is a function and cannot name a macro", strings.ToUpper(name))
		register = false
	} else if old, ok := p.macros[key]; ok {
		p.errorAt(pos, "macro %s is already defined at %s", name, old.pos)
		register = false
	}
	d := &define{name: name, pos: pos, bad: true}
	defer func() {
		p.defining = ""
		if register {
			p.macros[key] = d
		}
	}()
	p.next()
	p.expect(tComma, start)
	p.defining = key
	body := p.exprTop()
	p.expect(tRParen, start)
	d.body = body
	d.bad = p.check(body) == tyInvalid
	p.stmts = append(p.stmts, stmt{def: d})
}
