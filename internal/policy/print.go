package policy

import (
	"strings"
)

// The canonical form: one statement a line, keywords and attributes in
// capitals, macros as defined, numbers and intervals normalized (010 is
// 10, 1.50 is 1.5, a size suffix kept), timestamps in UTC, comments
// dropped, and only the parentheses the grammar needs. Parsing the
// canonical form gives the same policy, which prints the same.

// Precedence levels of the grammar, lowest first.
const (
	precOr = iota + 1
	precAnd
	precNot
	precCmp
	precSum
	precProduct
	precNeg
	precPrimary
)

func prec(n node) int {
	switch n := n.(type) {
	case *logic:
		if n.or {
			return precOr
		}
		return precAnd
	case *not:
		return precNot
	case *compare, *like, *in, *between, *isNull:
		return precCmp
	case *arith:
		if n.op == tPlus || n.op == tMinus {
			return precSum
		}
		return precProduct
	case *neg:
		return precNeg
	}
	return precPrimary
}

// String prints the policy canonically: its DEFINEs and rules in order,
// one a line.
func (p *Policy) String() string {
	var b strings.Builder
	for _, s := range p.stmts {
		if s.def != nil {
			b.WriteString("DEFINE(" + s.def.name + ", ")
			writeExpr(&b, s.def.body)
			b.WriteString(")")
		} else {
			writeRule(&b, s.rule)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func writeRule(b *strings.Builder, r *Rule) {
	b.WriteString("RULE ")
	if !r.generated {
		b.WriteString(quote(r.name) + " ")
	}
	switch r.kind {
	case KindSetPool:
		b.WriteString("SET POOL " + quote(r.pool))
		if r.protection != "" {
			b.WriteString(" PROTECTION " + quote(r.protection))
		}
	case KindMigrate:
		b.WriteString("MIGRATE")
		if r.from != "" {
			b.WriteString(" FROM POOL " + quote(r.from))
		}
		if r.hasThreshold {
			b.WriteString(" THRESHOLD(" + fmtNum(r.high) + "," + fmtNum(r.low) + ")")
		}
		if r.weight != nil {
			b.WriteString(" WEIGHT(")
			writeExpr(b, r.weight)
			b.WriteString(")")
		}
		b.WriteString(" TO POOL " + quote(r.pool))
		if r.protection != "" {
			b.WriteString(" PROTECTION " + quote(r.protection))
		}
		if r.hasLimit {
			b.WriteString(" LIMIT(" + fmtNum(r.limit) + ")")
		}
	case KindDelete:
		b.WriteString("DELETE")
	case KindList:
		b.WriteString("LIST " + quote(r.list))
	}
	if r.where != nil {
		b.WriteString(" WHERE ")
		writeExpr(b, r.where)
	}
}

// exprString prints an expression canonically.
func exprString(n node) string {
	var b strings.Builder
	writeExpr(&b, n)
	return b.String()
}

// sub prints n, in parentheses if it binds less tightly than min.
func sub(b *strings.Builder, n node, min int) {
	if prec(n) < min {
		b.WriteByte('(')
		writeExpr(b, n)
		b.WriteByte(')')
		return
	}
	writeExpr(b, n)
}

func writeNot(b *strings.Builder, not bool) {
	if not {
		b.WriteString(" NOT")
	}
}

func writeExpr(b *strings.Builder, n node) {
	switch n := n.(type) {
	case *numLit:
		b.WriteString(n.text)
	case *strLit:
		b.WriteString(quote(n.v))
	case *boolLit:
		if n.v {
			b.WriteString("TRUE")
		} else {
			b.WriteString("FALSE")
		}
	case *intervalLit:
		b.WriteString("INTERVAL " + quote(n.text) + " " + unitNames[n.unit])
	case *timeLit:
		b.WriteString("TIMESTAMP " + quote(n.t.Format("2006-01-02 15:04:05.999999999")))
	case *attrRef:
		b.WriteString(attrs[n.a].name)
	case *macroRef:
		if n.def.name == "" {
			b.WriteString("?")
		}
		b.WriteString(n.def.name)
	case *call:
		b.WriteString(functions[n.fn].name + "(")
		for i, x := range n.args {
			if i > 0 {
				b.WriteString(", ")
			}
			writeExpr(b, x)
		}
		b.WriteString(")")
	case *neg:
		b.WriteString("-")
		if _, ok := n.x.(*neg); ok {
			// "--" would start a comment.
			b.WriteByte('(')
			writeExpr(b, n.x)
			b.WriteByte(')')
		} else {
			sub(b, n.x, precNeg)
		}
	case *arith:
		p := prec(n)
		sub(b, n.x, p)
		b.WriteString(" " + punct[n.op] + " ")
		sub(b, n.y, p+1)
	case *not:
		b.WriteString("NOT ")
		sub(b, n.x, precNot)
	case *logic:
		op := " AND "
		if n.or {
			op = " OR "
		}
		for i, x := range n.xs {
			if i > 0 {
				b.WriteString(op)
			}
			sub(b, x, prec(n)+1)
		}
	case *compare:
		sub(b, n.x, precSum)
		b.WriteString(" " + punct[n.op] + " ")
		sub(b, n.y, precSum)
	case *like:
		sub(b, n.x, precSum)
		writeNot(b, n.not)
		b.WriteString(" LIKE ")
		sub(b, n.pat, precSum)
		if n.esc != "" {
			b.WriteString(" ESCAPE " + quote(n.esc))
		}
	case *in:
		sub(b, n.x, precSum)
		writeNot(b, n.not)
		b.WriteString(" IN (")
		for i, x := range n.list {
			if i > 0 {
				b.WriteString(", ")
			}
			writeExpr(b, x)
		}
		b.WriteString(")")
	case *between:
		sub(b, n.x, precSum)
		writeNot(b, n.not)
		b.WriteString(" BETWEEN ")
		sub(b, n.lo, precSum)
		b.WriteString(" AND ")
		sub(b, n.hi, precSum)
	case *isNull:
		sub(b, n.x, precSum)
		b.WriteString(" IS")
		writeNot(b, n.not)
		b.WriteString(" NULL")
	case *caseExpr:
		b.WriteString("CASE")
		for _, w := range n.whens {
			b.WriteString(" WHEN ")
			writeExpr(b, w.cond)
			b.WriteString(" THEN ")
			writeExpr(b, w.then)
		}
		if n.els != nil {
			b.WriteString(" ELSE ")
			writeExpr(b, n.els)
		}
		b.WriteString(" END")
	}
}
