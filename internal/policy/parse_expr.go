package policy

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The expression grammar, lowest precedence first:
//
//	or      = and { OR and }
//	and     = not { AND not }
//	not     = NOT not | cmp
//	cmp     = sum [ cmpop sum | [NOT] LIKE sum [ESCAPE string]
//	              | [NOT] IN "(" or { "," or } ")" | [NOT] BETWEEN sum AND sum
//	              | IS [NOT] NULL ]
//	sum     = product { ("+" | "-") product }
//	product = unary { ("*" | "/") unary }
//	unary   = ("-" | "+") unary | primary
//	primary = number | string | TRUE | FALSE | INTERVAL ... | TIMESTAMP string
//	        | "(" or ")" | CASE ... END | name [ "(" or ")" ]
//
// Every recursion passes through or, the NOT of not or the sign of unary,
// which count the depth (MaxDepth).

// exprTop parses a whole expression (a WHERE condition, a WEIGHT, a
// macro's body) and enforces the limits on its expanded size.
func (p *parser) exprTop() node {
	pos := p.tok.pos
	n := p.or()
	b := n.base()
	switch {
	case b.height > MaxHeight:
		p.failAt(pos, "expression too deep (%d levels with its macros expanded, at most %d): use IN or fewer nested operations", b.height, MaxHeight)
	case b.size > MaxNodes:
		p.failAt(pos, "expression too large (%d terms with its macros expanded, at most %d)", b.size, MaxNodes)
	}
	p.total += b.size
	if p.total > MaxTotalNodes {
		p.failAt(pos, "policy too large (more than %d terms with its macros expanded)", MaxTotalNodes)
	}
	return n
}

func (p *parser) enter() {
	p.depth++
	if p.depth > MaxDepth {
		p.failAt(p.tok.pos, "expression nested too deeply (more than %d levels)", MaxDepth)
	}
}

func (p *parser) leave() { p.depth-- }

func (p *parser) or() node {
	p.enter()
	defer p.leave()
	return p.logic(kwOr, p.and)
}

func (p *parser) and() node { return p.logic(kwAnd, p.not) }

// logic parses operand { kw operand } into one logic node.
func (p *parser) logic(kw keyword, operand func() node) node {
	x := operand()
	if p.tok.kw != kw {
		return x
	}
	n := &logic{or: kw == kwOr, xs: []node{x}}
	n.pos = p.tok.pos
	for p.tok.kw == kw {
		p.next()
		n.xs = append(n.xs, operand())
	}
	n.shape(n.xs...)
	return n
}

func (p *parser) not() node {
	if p.tok.kw != kwNot {
		return p.cmp()
	}
	pos := p.tok.pos
	p.next()
	p.enter()
	defer p.leave()
	n := &not{x: p.not()}
	n.pos = pos
	n.shape(n.x)
	return n
}

// cmpStart reports whether the current token starts a comparison.
func (p *parser) cmpStart() bool {
	switch p.tok.kind {
	case tEq, tNe, tLt, tLe, tGt, tGe:
		return true
	}
	switch p.tok.kw {
	case kwLike, kwIn, kwBetween, kwIs:
		return true
	case kwNot:
		switch p.peek().kw {
		case kwLike, kwIn, kwBetween:
			return true
		}
	}
	return false
}

func (p *parser) cmp() node {
	x := p.sum()
	if !p.cmpStart() {
		return x
	}
	n := p.cmpTail(x)
	if p.cmpStart() {
		p.failAt(p.tok.pos, "comparisons do not chain: write a < b AND b < c")
	}
	return n
}

// cmpTail parses the comparison that follows x.
func (p *parser) cmpTail(x node) node {
	pos := p.tok.pos
	switch k := p.tok.kind; k {
	case tEq, tNe, tLt, tLe, tGt, tGe:
		p.next()
		n := &compare{op: k, x: x, y: p.sum()}
		n.pos = pos
		n.shape(n.x, n.y)
		return n
	}
	if p.tok.kw == kwIs {
		p.next()
		n := &isNull{x: x}
		if p.tok.kw == kwNot {
			n.not = true
			p.next()
		}
		p.expectKw(kwNull, -1)
		n.pos = pos
		n.shape(x)
		return n
	}
	negated := p.tok.kw == kwNot
	if negated {
		p.next()
	}
	switch p.tok.kw {
	case kwLike:
		p.next()
		n := &like{not: negated, x: x, pat: p.sum()}
		if p.tok.kw == kwEscape {
			p.next()
			epos := p.tok.pos
			n.esc, _ = p.stringArg("the escape character in quotes, like ESCAPE '\\'", -1)
			if utf8.RuneCountInString(n.esc) != 1 {
				p.errorAt(epos, "ESCAPE takes one character, found %s", quoteShort(n.esc))
			}
		}
		n.pos = pos
		n.shape(n.x, n.pat)
		return n
	case kwIn:
		p.next()
		p.expect(tLParen, -1)
		n := &in{not: negated, x: x}
		if p.tok.kind == tRParen {
			p.failAt(p.tok.pos, "IN needs at least one value: IN ('a', 'b')")
		}
		for {
			n.list = append(n.list, p.or())
			if p.tok.kind != tComma {
				break
			}
			p.next()
		}
		p.expect(tRParen, -1)
		n.pos = pos
		n.shape(append([]node{x}, n.list...)...)
		return n
	case kwBetween:
		p.next()
		n := &between{not: negated, x: x, lo: p.sum()}
		p.expectKw(kwAnd, -1)
		n.hi = p.sum()
		n.pos = pos
		n.shape(n.x, n.lo, n.hi)
		return n
	}
	p.expected("LIKE, IN or BETWEEN", "NOT")
	return nil
}

func (p *parser) sum() node {
	x := p.product()
	for p.tok.kind == tPlus || p.tok.kind == tMinus {
		n := &arith{op: p.tok.kind, x: x}
		n.pos = p.tok.pos
		p.next()
		n.y = p.product()
		n.shape(n.x, n.y)
		x = n
	}
	return x
}

func (p *parser) product() node {
	x := p.unary()
	for p.tok.kind == tStar || p.tok.kind == tSlash {
		n := &arith{op: p.tok.kind, x: x}
		n.pos = p.tok.pos
		p.next()
		n.y = p.unary()
		n.shape(n.x, n.y)
		x = n
	}
	return x
}

func (p *parser) unary() node {
	if p.tok.kind != tMinus && p.tok.kind != tPlus {
		return p.primary()
	}
	minus, pos := p.tok.kind == tMinus, p.tok.pos
	p.next()
	p.enter()
	defer p.leave()
	x := p.unary()
	if !minus {
		return x
	}
	n := &neg{x: x}
	n.pos = pos
	n.shape(x)
	return n
}

func (p *parser) primary() node {
	t := p.tok
	switch t.kind {
	case tNumber:
		p.next()
		n := &numLit{v: t.num, text: t.text}
		n.pos = t.pos
		n.shape()
		return n
	case tString:
		p.next()
		n := &strLit{v: t.text}
		n.pos = t.pos
		n.shape()
		return n
	case tLParen:
		p.next()
		x := p.or()
		p.expect(tRParen, -1)
		return x
	case tIdent:
		switch t.kw {
		case kwNone, kwProtection: // PROTECTION is also an attribute
			return p.name()
		case kwTrue, kwFalse:
			p.next()
			n := &boolLit{v: t.kw == kwTrue}
			n.pos = t.pos
			n.shape()
			return n
		case kwInterval:
			return p.interval()
		case kwTimestamp:
			return p.timestamp()
		case kwCase:
			return p.caseExpr()
		case kwNull:
			p.failAt(t.pos, "NULL is not a value: test for it with IS NULL or IS NOT NULL")
		}
	}
	p.expected("an expression", p.prev())
	return nil
}

// name parses an attribute, a macro or a function call. An unknown name
// is reported and stands as an invalid expression, so that the rest of
// the expression is still checked.
func (p *parser) name() node {
	t := p.tok
	p.next()
	if p.tok.kind == tLParen {
		return p.call(t)
	}
	if a, ok := lookupAttr(t.text); ok {
		n := &attrRef{a: a}
		n.pos = t.pos
		n.shape()
		return n
	}
	key := strings.ToLower(t.text)
	if d, ok := p.macros[key]; ok {
		n := &macroRef{def: d}
		n.pos = t.pos
		n.shape()
		if !d.bad {
			n.height, n.size = d.body.base().height+1, d.body.base().size+1
		}
		return n
	}
	switch later := p.definedLater(key); {
	case key == p.defining:
		p.errorAt(t.pos, "macro %s cannot use itself", t.text)
	case later != Pos{}:
		p.errorAt(t.pos, "macro %s is used before its DEFINE at %s: define it first", t.text, later)
	case isFunction(t.text):
		p.errorAt(t.pos, "%s is a function: %s(...)", strings.ToUpper(t.text), strings.ToUpper(t.text))
	default:
		p.errorAt(t.pos, "unknown name %s%s", t.text, p.suggest(t.text))
	}
	return badNode(t.pos)
}

// definedLater returns the position of a DEFINE of key after the
// current token, or the zero Pos.
func (p *parser) definedLater(key string) Pos {
	for j := p.i; j+2 < len(p.toks); j++ {
		if p.toks[j].kw == kwDefine && p.toks[j+1].kind == tLParen && strings.EqualFold(p.toks[j+2].text, key) {
			return p.toks[j+2].pos
		}
	}
	return Pos{}
}

func isFunction(name string) bool { _, ok := lookupFunction(name); return ok }

// badNode stands for an expression whose error is already reported.
func badNode(pos Pos) node {
	n := &macroRef{def: &define{bad: true}}
	n.pos = pos
	n.shape()
	return n
}

// call parses NAME(arguments); t is the name.
func (p *parser) call(t token) node {
	fn, ok := lookupFunction(t.text)
	switch {
	case ok:
	case isAttr(t.text):
		p.errorAt(t.pos, "%s is an attribute, not a function: write it without parentheses", strings.ToUpper(t.text))
	default:
		p.errorAt(t.pos, "unknown function %s%s", t.text, p.suggest(t.text))
	}
	p.next() // (
	p.enter()
	defer p.leave()
	var args []node
	if p.tok.kind != tRParen {
		for {
			args = append(args, p.or())
			if p.tok.kind != tComma {
				break
			}
			p.next()
		}
	}
	p.expect(tRParen, -1)
	if !ok {
		return badNode(t.pos)
	}
	if len(args) != 1 {
		p.errorAt(t.pos, "%s takes one argument, found %d", functions[fn].name, len(args))
		return badNode(t.pos)
	}
	n := &call{fn: fn, args: args}
	n.pos = t.pos
	n.shape(args...)
	return n
}

func isAttr(name string) bool { _, ok := lookupAttr(name); return ok }

// suggest returns "; did you mean X?" for the known name nearest to
// name, if one is near.
func (p *parser) suggest(name string) string {
	if len(name) > 40 {
		return ""
	}
	best, bestD := "", 3
	try := func(cand string) {
		if d := editDistance(strings.ToUpper(name), strings.ToUpper(cand)); d < bestD {
			best, bestD = cand, d
		}
	}
	for _, a := range attrs {
		try(a.name)
	}
	for _, f := range functions {
		try(f.name)
	}
	for _, d := range p.macros {
		if !d.bad {
			try(d.name)
		}
	}
	if best == "" || bestD > 1 && len(name) < 7 {
		return ""
	}
	return "; did you mean " + best + "?"
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		diag := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			diag, row[j] = row[j], min(row[j]+1, row[j-1]+1, diag+cost)
		}
	}
	return row[len(b)]
}

// interval parses INTERVAL 'n' UNIT (n may also be written unquoted).
func (p *parser) interval() node {
	pos := p.tok.pos
	p.next()
	n := &intervalLit{}
	n.pos = pos
	n.shape()
	switch t := p.tok; t.kind {
	case tString:
		v, ok := parseDecimal(t.text)
		if !ok {
			p.failAt(t.pos, "INTERVAL takes a number in quotes and a unit after it, like INTERVAL '2' DAYS; found %s", quoteShort(t.text))
		}
		n.n, n.text = v, fmtNum(v)
	case tNumber:
		if isLetter(p.src[t.end-1]) {
			p.failAt(t.pos, "an INTERVAL counts time units, not bytes: INTERVAL '2' DAYS")
		}
		n.n, n.text = t.num, t.text
	default:
		p.expected("a number in quotes, like INTERVAL '2' DAYS", "INTERVAL")
	}
	num := p.i
	p.next()
	u, ok := lookupUnit(p.tok.text)
	if p.tok.kind != tIdent || p.tok.kw != kwNone || !ok {
		p.expected("DAYS, HOURS, MINUTES or SECONDS", "INTERVAL "+p.spell(num, num+1))
	}
	p.next()
	n.unit = u
	if s := n.n * unitSeconds[u]; s > maxNumber || s < -maxNumber {
		p.errorAt(pos, "INTERVAL '%s' %s is too long", n.text, unitNames[u])
	}
	return n
}

// parseDecimal parses an optionally signed decimal number: 2, -1.5,
// +0.25 (spaces around it allowed). The length bound leaves room for the
// canonical spelling of any float64 (fmtNum), which must parse again.
func parseDecimal(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if len(s) == 0 || len(s) > 400 {
		return 0, false
	}
	digits := strings.TrimLeft(s, "+-")
	if len(s)-len(digits) > 1 || digits == "" || !isDigit(digits[0]) || !isDigit(digits[len(digits)-1]) {
		return 0, false
	}
	dot := false
	for i := 0; i < len(digits); i++ {
		switch c := digits[i]; {
		case c == '.' && !dot:
			dot = true
		case !isDigit(c):
			return 0, false
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// timestampLayouts are the forms TIMESTAMP accepts; fractional seconds
// are accepted after the seconds in every form that has them, and a
// time without a zone is UTC.
var timestampLayouts = []string{
	"2006-01-02 15:04:05Z07:00", "2006-01-02T15:04:05Z07:00",
	"2006-01-02 15:04:05", "2006-01-02T15:04:05",
	"2006-01-02 15:04Z07:00", "2006-01-02T15:04Z07:00",
	"2006-01-02 15:04", "2006-01-02T15:04",
	"2006-01-02",
}

// timestamp parses TIMESTAMP 'YYYY-MM-DD[ HH:MM[:SS[.frac]]][zone]'.
func (p *parser) timestamp() node {
	pos := p.tok.pos
	p.next()
	s, spos := p.stringArg("a time in quotes, like TIMESTAMP '2026-01-02 03:04:05'", -1)
	n := &timeLit{}
	n.pos = pos
	n.shape()
	for _, l := range timestampLayouts {
		if t, err := time.Parse(l, strings.TrimSpace(s)); err == nil {
			if y := t.UTC().Year(); y < 1 || y > 9999 {
				break
			}
			n.t = t.UTC()
			return n
		}
	}
	p.errorAt(spos, "TIMESTAMP %s is not a time: write TIMESTAMP '2026-01-02 03:04:05' (UTC), or add a zone: '2026-01-02 03:04:05+02:00'", quoteShort(s))
	return badNode(pos)
}

// caseExpr parses CASE WHEN c THEN v {WHEN c THEN v} [ELSE v] END.
func (p *parser) caseExpr() node {
	n := &caseExpr{}
	n.pos = p.tok.pos
	start := p.i
	p.next()
	p.enter()
	defer p.leave()
	if p.tok.kw != kwWhen {
		p.expected("WHEN (CASE WHEN condition THEN value ... END)", "CASE")
	}
	var kids []node
	for p.tok.kw == kwWhen {
		p.next()
		w := when{cond: p.or()}
		p.expectKw(kwThen, -1)
		w.then = p.or()
		n.whens = append(n.whens, w)
		kids = append(kids, w.cond, w.then)
	}
	if p.tok.kw == kwElse {
		p.next()
		n.els = p.or()
		kids = append(kids, n.els)
	}
	if p.tok.kw != kwEnd {
		p.expected("WHEN, ELSE or END", p.spell(start, start+1)+" ... "+p.prev())
	}
	p.next()
	n.shape(kids...)
	return n
}
