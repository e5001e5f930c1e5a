package policy

import (
	"unicode/utf8"
)

// The checker gives every expression its static type and reports what
// does not type (a string compared with a number, an interval where a
// number is due), and checks a rule's parameters against each other and
// against the Catalog. An expression already invalid raises no further
// errors, so that one mistake gives one message.
//
// Type rules:
//
//	number ± * / number           number
//	timestamp - timestamp         interval
//	timestamp ± interval          timestamp (and interval + timestamp)
//	interval ± interval           interval
//	interval * number, / number   interval (and number * interval)
//	interval / interval           number
//	- number, - interval          the same
//	comparisons, IN, BETWEEN      two sides of one type, not conditions
//	LIKE                          strings
//	AND, OR, NOT, WHERE           conditions
//	WEIGHT                        a number

// check types n and its children (not a macro's body, checked at its
// DEFINE) and returns n's type.
func (p *parser) check(n node) typ {
	b := n.base()
	switch n := n.(type) {
	case *numLit:
		b.typ = tyNum
	case *strLit:
		b.typ = tyStr
	case *boolLit:
		b.typ = tyBool
	case *intervalLit:
		b.typ = tyInterval
	case *timeLit:
		b.typ = tyTime
	case *attrRef:
		b.typ = attrs[n.a].typ
	case *macroRef:
		if !n.def.bad {
			b.typ = n.def.body.base().typ
		}
	case *call:
		b.typ = p.checkCall(n)
	case *neg:
		switch t := p.check(n.x); t {
		case tyNum, tyInterval:
			b.typ = t
		case tyInvalid:
		default:
			p.errorAt(n.pos, "minus applies to numbers and intervals, not to %s", p.show(n.x))
		}
	case *arith:
		b.typ = p.checkArith(n)
	case *not:
		p.wantBool(n.x, "NOT")
		b.typ = tyBool
	case *logic:
		op := "AND"
		if n.or {
			op = "OR"
		}
		for _, x := range n.xs {
			p.wantBool(x, op)
		}
		b.typ = tyBool
	case *compare:
		p.checkSameType(n.pos, "compare", n.x, n.y)
		b.typ = tyBool
	case *like:
		p.checkLike(n)
		b.typ = tyBool
	case *in:
		tx := p.check(n.x)
		for _, y := range n.list {
			p.check(y)
			if tx != tyInvalid {
				p.checkPair(y.base().pos, "compare", n.x, y)
			}
		}
		b.typ = tyBool
	case *between:
		p.check(n.x)
		p.check(n.lo)
		p.check(n.hi)
		p.checkPair(n.pos, "compare", n.x, n.lo)
		p.checkPair(n.pos, "compare", n.x, n.hi)
		b.typ = tyBool
	case *isNull:
		p.check(n.x)
		b.typ = tyBool
	case *caseExpr:
		b.typ = p.checkCase(n)
	}
	return b.typ
}

// show describes an expression for a message: its text (shortened) and
// its type, "FILE_SIZE (a number)".
func (p *parser) show(n node) string {
	s := exprString(n)
	if r := []rune(s); len(r) > 40 {
		s = string(r[:37]) + "..."
	}
	return s + " (" + n.base().typ.name() + ")"
}

// wantBool reports x if it is not a condition.
func (p *parser) wantBool(x node, op string) {
	if t := p.check(x); t != tyBool && t != tyInvalid {
		p.errorAt(x.base().pos, "%s takes conditions, found %s%s", op, p.show(x), boolHint(x))
	}
}

// boolHint suggests a condition for a value where one is due.
func boolHint(x node) string {
	if x.base().typ == tyStr {
		return ": compare it, as in NAME = 'x' or NAME LIKE '%.log'"
	}
	return ": compare it, as in FILE_SIZE > 1G"
}

// checkSameType checks both operands (already unchecked) and that they
// can be compared.
func (p *parser) checkSameType(pos Pos, verb string, x, y node) {
	p.check(x)
	p.check(y)
	p.checkPair(pos, verb, x, y)
}

// checkPair reports two checked operands that cannot be compared.
func (p *parser) checkPair(pos Pos, verb string, x, y node) {
	tx, ty := x.base().typ, y.base().typ
	switch {
	case tx == tyInvalid || ty == tyInvalid:
	case tx == tyBool || ty == tyBool:
		p.errorAt(pos, "cannot %s conditions: combine them with AND, OR and NOT", verb)
	case tx != ty:
		p.errorAt(pos, "cannot %s %s with %s%s", verb, p.show(x), p.show(y), mismatchHint(x, y))
	}
}

// mismatchHint suggests what was meant when two types do not compare.
func mismatchHint(x, y node) string {
	tx, ty := x.base().typ, y.base().typ
	has := func(a, b typ) bool { return tx == a && ty == b || tx == b && ty == a }
	switch {
	case has(tyNum, tyStr):
		for _, n := range []node{x, y} {
			if s, ok := n.(*strLit); ok && looksNumeric(s.v) {
				return ": write numbers and sizes without quotes, as in 10G"
			}
		}
	case has(tyInterval, tyNum):
		return ": compare an interval with an interval (CURRENT_TIMESTAMP - ACCESS_TIME > INTERVAL '2' DAYS), or turn it into a number with DAYS(...)"
	case has(tyTime, tyInterval):
		return ": the age of a file is an interval, CURRENT_TIMESTAMP - ACCESS_TIME"
	case has(tyTime, tyStr):
		return ": write a timestamp as TIMESTAMP '2026-01-02 03:04:05'"
	case has(tyTime, tyNum):
		return ": compare a timestamp with a timestamp, as in ACCESS_TIME < CURRENT_TIMESTAMP - INTERVAL '2' DAYS"
	case has(tyInterval, tyStr):
		return ": write an interval as INTERVAL '2' DAYS"
	}
	return ""
}

// looksNumeric reports whether s reads as a number, maybe with a size
// suffix ('10G').
func looksNumeric(s string) bool {
	if s != "" {
		if _, ok := sizeShift(s[len(s)-1]); ok {
			s = s[:len(s)-1]
		}
	}
	_, ok := parseDecimal(s)
	return ok
}

var arithVerbs = map[tokKind]string{tPlus: "add", tMinus: "subtract", tStar: "multiply", tSlash: "divide"}

// checkArith types x op y (see the rules above).
func (p *parser) checkArith(n *arith) typ {
	tx, ty := p.check(n.x), p.check(n.y)
	if tx == tyInvalid || ty == tyInvalid {
		return tyInvalid
	}
	type pair struct{ x, y typ }
	var rules map[pair]typ
	switch n.op {
	case tPlus:
		rules = map[pair]typ{{tyNum, tyNum}: tyNum, {tyInterval, tyInterval}: tyInterval,
			{tyTime, tyInterval}: tyTime, {tyInterval, tyTime}: tyTime}
	case tMinus:
		rules = map[pair]typ{{tyNum, tyNum}: tyNum, {tyInterval, tyInterval}: tyInterval,
			{tyTime, tyInterval}: tyTime, {tyTime, tyTime}: tyInterval}
	case tStar:
		rules = map[pair]typ{{tyNum, tyNum}: tyNum, {tyInterval, tyNum}: tyInterval, {tyNum, tyInterval}: tyInterval}
	case tSlash:
		rules = map[pair]typ{{tyNum, tyNum}: tyNum, {tyInterval, tyNum}: tyInterval, {tyInterval, tyInterval}: tyNum}
	}
	if t, ok := rules[pair{tx, ty}]; ok {
		return t
	}
	var hint string
	switch {
	case tx == tyStr || ty == tyStr:
		hint = ": strings do not compute; compare them with =, LIKE or IN"
	case tx == tyBool || ty == tyBool:
		hint = ": combine conditions with AND, OR and NOT"
	case tx == tyTime && ty == tyTime:
		hint = ": add an interval to a timestamp, as in ACCESS_TIME + INTERVAL '1' DAYS"
	case tx == tyTime || ty == tyTime:
		hint = ": a timestamp takes intervals, as in CURRENT_TIMESTAMP - INTERVAL '2' DAYS"
	}
	p.errorAt(n.pos, "cannot %s %s and %s%s", arithVerbs[n.op], p.show(n.x), p.show(n.y), hint)
	return tyInvalid
}

// checkCall types a function call.
func (p *parser) checkCall(n *call) typ {
	fn := functions[n.fn]
	arg := n.args[0]
	t := p.check(arg)
	if n.fn == fnXattr {
		if _, ok := arg.(*strLit); !ok {
			p.errorAt(arg.base().pos, "XATTR takes the attribute's name in quotes, as in XATTR('user.tier')")
		}
		return fn.to
	}
	if t != tyInvalid && t != fn.arg {
		hint := ""
		if fn.arg == tyInterval && t == tyTime {
			hint = ": the age of a file is an interval, as in DAYS(CURRENT_TIMESTAMP - ACCESS_TIME)"
		}
		p.errorAt(arg.base().pos, "%s takes %s, found %s%s", fn.name, fn.arg.name(), p.show(arg), hint)
	}
	return fn.to
}

// checkLike types x LIKE pat and checks a literal pattern's escapes.
func (p *parser) checkLike(n *like) {
	for _, x := range []node{n.x, n.pat} {
		if t := p.check(x); t != tyStr && t != tyInvalid {
			p.errorAt(x.base().pos, "LIKE matches strings, found %s", p.show(x))
		}
	}
	if s, ok := n.pat.(*strLit); ok && utf8.RuneCountInString(n.esc) == 1 {
		if _, err := compileLike(s.v, n.esc); err != nil {
			p.errorAt(s.pos, "LIKE pattern %s: %v", quoteShort(s.v), err)
		}
	}
}

// checkCase types a CASE: conditions after WHEN, one type for every value.
func (p *parser) checkCase(n *caseExpr) typ {
	var want typ
	var first node
	value := func(v node) {
		t := p.check(v)
		switch {
		case t == tyInvalid:
		case want == tyInvalid:
			want, first = t, v
		case t != want:
			p.errorAt(v.base().pos, "CASE values must be of one type: %s, but %s", p.show(first), p.show(v))
		}
	}
	for _, w := range n.whens {
		p.wantBool(w.cond, "WHEN")
		value(w.then)
	}
	if n.els != nil {
		value(n.els)
	}
	return want
}

// checkRule checks a parsed rule's expressions and parameters.
func (p *parser) checkRule(r *Rule) {
	if r.where != nil {
		if t := p.check(r.where); t != tyBool && t != tyInvalid {
			p.errorAt(r.where.base().pos, "WHERE takes a condition, found %s%s", p.show(r.where), boolHint(r.where))
		}
	}
	if r.weight != nil {
		switch t := p.check(r.weight); t {
		case tyNum, tyInvalid:
		case tyInterval:
			p.errorAt(r.weight.base().pos, "WEIGHT takes a number, found %s: turn it into one with DAYS(...) or HOURS(...)", p.show(r.weight))
		default:
			p.errorAt(r.weight.base().pos, "WEIGHT takes a number, found %s", p.show(r.weight))
		}
	}
	p.checkPool(r.from, r.fromPos)
	p.checkPool(r.pool, r.poolPos)
	if r.protPos != (Pos{}) {
		switch {
		case r.protection == "":
			p.errorAt(r.protPos, "PROTECTION cannot be empty: leave it out to use the pool's")
		case p.cat != nil:
			if err := p.cat.ValidProtection(r.protection); err != nil {
				p.errorAt(r.protPos, "PROTECTION %s is not valid: %v", quoteShort(r.protection), err)
			}
		}
	}
	if r.listPos != (Pos{}) && r.list == "" {
		p.errorAt(r.listPos, "a LIST needs a name")
	}
	if r.kind == KindMigrate {
		if r.hasThreshold && r.fromPos == (Pos{}) {
			p.errorAt(r.thresholdPos, "THRESHOLD needs FROM POOL: it is the fill level of the pool that files leave")
		}
		if r.fromPos != (Pos{}) && r.from == r.pool && r.protPos == (Pos{}) {
			p.errorAt(r.poolPos, "MIGRATE FROM POOL %s TO POOL %s moves nothing: name another pool, or a PROTECTION to change to", quoteShort(r.from), quoteShort(r.pool))
		}
	}
}

// checkPool reports a pool the catalog does not know (pos zero: no pool
// was given).
func (p *parser) checkPool(name string, pos Pos) {
	switch {
	case pos == Pos{}:
	case name == "":
		p.errorAt(pos, "a pool name cannot be empty")
	case p.cat != nil && !p.cat.PoolExists(name):
		p.errorAt(pos, "pool %s does not exist", quoteShort(name))
	}
}
