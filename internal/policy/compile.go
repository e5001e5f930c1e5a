package policy

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// A checked expression is compiled once into closures of its static
// type, so that evaluating it never looks at a type or allocates for a
// number. Numbers, timestamps (seconds since 1970) and intervals
// (seconds) are all float64s; ok false is NULL. Conditions are tri.
//
// Operations on constants are done at compile time (constant folding):
// a compiled expression reports whether it is constant.

// tri is a value of SQL's three-valued logic.
type tri uint8

const (
	triFalse tri = iota
	triTrue
	triNull // UNKNOWN
)

func toTri(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

func notTri(v tri) tri {
	if v == triNull {
		return triNull
	}
	return 1 - v
}

type (
	boolFn func(*env) tri
	numFn  func(*env) (float64, bool)
	strFn  func(*env) (string, bool)
)

// env is one evaluation: a copy of the file, now, and values computed at
// most once per evaluation. Envs are recycled through their policy's
// pool, so that evaluating allocates nothing.
type env struct {
	f      File
	now    float64
	nowOK  bool
	name   string
	nameOK bool
	mode   string
	modeOK bool
}

// envPool recycles a policy's envs.
type envPool struct {
	pool sync.Pool
}

// get returns an env for f at now; put it back when done.
func (p *envPool) get(f *File, now time.Time) *env {
	e, _ := p.pool.Get().(*env)
	if e == nil {
		e = new(env)
	}
	e.f = *f
	e.now, e.nowOK = seconds(now)
	return e
}

// put clears e, so that the pool holds nothing of the caller's (Xattr
// may be a closure over its data), and recycles it.
func (p *envPool) put(e *env) {
	*e = env{}
	p.pool.Put(e)
}

// compileError is raised (panic) for an expression the checker should
// have refused: a bug, found by the fuzzers.
func compileError(n node) {
	panic(fmt.Sprintf("policy: cannot compile %T of type %d", n, n.base().typ))
}

func constBool(v tri) boolFn { return func(*env) tri { return v } }

func constNum(v float64, ok bool) numFn {
	if ok && (math.IsNaN(v) || math.IsInf(v, 0)) {
		v, ok = 0, false
	}
	return func(*env) (float64, bool) { return v, ok }
}

func constStr(v string, ok bool) strFn { return func(*env) (string, bool) { return v, ok } }

// compileBool compiles a condition.
func compileBool(n node) (boolFn, bool) {
	switch n := n.(type) {
	case *macroRef:
		return compileBool(n.def.body)
	case *boolLit:
		return constBool(toTri(n.v)), true
	case *not:
		f, c := compileBool(n.x)
		g := func(e *env) tri { return notTri(f(e)) }
		return foldBool(g, c)
	case *logic:
		return compileLogic(n)
	case *compare:
		return compileCompare(n.op, n.x, n.y)
	case *like:
		return compileLikeExpr(n)
	case *in:
		return compileIn(n)
	case *between:
		return compileBetween(n)
	case *isNull:
		return compileIsNull(n)
	case *caseExpr:
		return compileCaseBool(n)
	}
	compileError(n)
	return nil, false
}

// foldBool turns a constant condition into its value.
func foldBool(f boolFn, c bool) (boolFn, bool) {
	if c {
		return constBool(f(nil)), true
	}
	return f, false
}

func foldNum(f numFn, c bool) (numFn, bool) {
	if c {
		return constNum(f(nil)), true
	}
	return f, false
}

func foldStr(f strFn, c bool) (strFn, bool) {
	if c {
		return constStr(f(nil)), true
	}
	return f, false
}

func compileLogic(n *logic) (boolFn, bool) {
	fs := make([]boolFn, len(n.xs))
	allConst := true
	for i, x := range n.xs {
		var c bool
		fs[i], c = compileBool(x)
		allConst = allConst && c
	}
	// absorb is the value that decides alone: FALSE for AND, TRUE for OR.
	absorb := triFalse
	if n.or {
		absorb = triTrue
	}
	var f boolFn
	if len(fs) == 2 {
		a, b := fs[0], fs[1]
		f = func(e *env) tri {
			x := a(e)
			if x == absorb {
				return absorb
			}
			y := b(e)
			if y == absorb {
				return absorb
			}
			if x == triNull || y == triNull {
				return triNull
			}
			return 1 - absorb
		}
	} else {
		f = func(e *env) tri {
			res := 1 - absorb
			for _, g := range fs {
				switch g(e) {
				case absorb:
					return absorb
				case triNull:
					res = triNull
				}
			}
			return res
		}
	}
	return foldBool(f, allConst)
}

// holds reports whether ordering c (-1, 0, 1) satisfies comparison op.
func holds(op tokKind, c int) bool {
	switch op {
	case tEq:
		return c == 0
	case tNe:
		return c != 0
	case tLt:
		return c < 0
	case tLe:
		return c <= 0
	case tGt:
		return c > 0
	}
	return c >= 0 // tGe
}

func cmpNum(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// cval is a compiled expression of any type (the field of its type is
// set) and whether it is constant.
type cval struct {
	t typ
	b boolFn
	n numFn
	s strFn
	c bool
}

func compileVal(n node) cval {
	v := cval{t: n.base().typ}
	switch v.t {
	case tyBool:
		v.b, v.c = compileBool(n)
	case tyStr:
		v.s, v.c = compileStr(n)
	default:
		v.n, v.c = compileNum(n)
	}
	return v
}

func compileCompare(op tokKind, x, y node) (boolFn, bool) {
	return compareVals(op, compileVal(x), compileVal(y))
}

// compareVals compiles a comparison of two compiled values of one type
// (strings, or numbers, timestamps or intervals).
func compareVals(op tokKind, x, y cval) (boolFn, bool) {
	if x.t == tyStr {
		a, b := x.s, y.s
		if y.c && !x.c {
			v, ok := b(nil)
			if !ok {
				return constBool(triNull), true
			}
			return func(e *env) tri {
				s, ok := a(e)
				if !ok {
					return triNull
				}
				return toTri(holds(op, strings.Compare(s, v)))
			}, false
		}
		f := func(e *env) tri {
			s, ok := a(e)
			if !ok {
				return triNull
			}
			t, ok := b(e)
			if !ok {
				return triNull
			}
			return toTri(holds(op, strings.Compare(s, t)))
		}
		return foldBool(f, x.c && y.c)
	}
	a, b := x.n, y.n
	if y.c && !x.c {
		v, ok := b(nil)
		if !ok {
			return constBool(triNull), true
		}
		return func(e *env) tri {
			u, ok := a(e)
			if !ok {
				return triNull
			}
			return toTri(holds(op, cmpNum(u, v)))
		}, false
	}
	f := func(e *env) tri {
		u, ok := a(e)
		if !ok {
			return triNull
		}
		v, ok := b(e)
		if !ok {
			return triNull
		}
		return toTri(holds(op, cmpNum(u, v)))
	}
	return foldBool(f, x.c && y.c)
}

func compileLikeExpr(n *like) (boolFn, bool) {
	x, cx := compileStr(n.x)
	pat, cp := compileStr(n.pat)
	wrap := func(v tri) tri {
		if n.not {
			return notTri(v)
		}
		return v
	}
	if cp {
		s, ok := pat(nil)
		if !ok {
			return constBool(triNull), true
		}
		lp, err := compileLike(s, n.esc)
		if err != nil {
			return constBool(triNull), true
		}
		f := func(e *env) tri {
			v, ok := x(e)
			if !ok {
				return triNull
			}
			return wrap(toTri(lp.match(v)))
		}
		return foldBool(f, cx)
	}
	return func(e *env) tri {
		v, ok := x(e)
		if !ok {
			return triNull
		}
		s, ok := pat(e)
		if !ok {
			return triNull
		}
		lp, err := compileLike(s, n.esc)
		if err != nil {
			return triNull
		}
		return wrap(toTri(lp.match(v)))
	}, false
}

// compileIn compiles x IN (list): TRUE if x equals an item, else UNKNOWN
// if x or an item is NULL, else FALSE. A list of constants becomes a set.
func compileIn(n *in) (boolFn, bool) {
	x := compileVal(n.x)
	items := make([]cval, len(n.list))
	allConst := true
	for i, y := range n.list {
		items[i] = compileVal(y)
		allConst = allConst && items[i].c
	}
	var f boolFn
	if allConst {
		f = inSet(x, items)
	} else {
		eqs := make([]boolFn, len(items))
		for i, y := range items {
			eqs[i], _ = compareVals(tEq, x, y)
		}
		f = func(e *env) tri {
			res := triFalse
			for _, eq := range eqs {
				switch eq(e) {
				case triTrue:
					return triTrue
				case triNull:
					res = triNull
				}
			}
			return res
		}
	}
	if n.not {
		g := f
		f = func(e *env) tri { return notTri(g(e)) }
	}
	return foldBool(f, allConst && x.c)
}

// inSet compiles x IN (constants) into a set lookup.
func inSet(x cval, items []cval) boolFn {
	hasNull := false
	if x.t == tyStr {
		set := make(map[string]bool, len(items))
		for _, y := range items {
			if v, ok := y.s(nil); ok {
				set[v] = true
			} else {
				hasNull = true
			}
		}
		return func(e *env) tri {
			v, ok := x.s(e)
			switch {
			case !ok:
				return triNull
			case set[v]:
				return triTrue
			case hasNull:
				return triNull
			}
			return triFalse
		}
	}
	set := make(map[float64]bool, len(items))
	for _, y := range items {
		if v, ok := y.n(nil); ok {
			set[v] = true
		} else {
			hasNull = true
		}
	}
	return func(e *env) tri {
		v, ok := x.n(e)
		switch {
		case !ok:
			return triNull
		case set[v]:
			return triTrue
		case hasNull:
			return triNull
		}
		return triFalse
	}
}

// compileBetween compiles x BETWEEN lo AND hi as x >= lo AND x <= hi,
// with x evaluated once.
func compileBetween(n *between) (boolFn, bool) {
	and3 := func(a, b tri) tri {
		switch {
		case a == triFalse || b == triFalse:
			return triFalse
		case a == triNull || b == triNull:
			return triNull
		}
		return triTrue
	}
	var f boolFn
	var c bool
	if n.x.base().typ == tyStr {
		x, cx := compileStr(n.x)
		lo, cl := compileStr(n.lo)
		hi, ch := compileStr(n.hi)
		c = cx && cl && ch
		f = func(e *env) tri {
			v, ok := x(e)
			if !ok {
				return triNull
			}
			ge, le := triNull, triNull
			if l, ok := lo(e); ok {
				ge = toTri(v >= l)
			}
			if h, ok := hi(e); ok {
				le = toTri(v <= h)
			}
			return and3(ge, le)
		}
	} else {
		x, cx := compileNum(n.x)
		lo, cl := compileNum(n.lo)
		hi, ch := compileNum(n.hi)
		c = cx && cl && ch
		f = func(e *env) tri {
			v, ok := x(e)
			if !ok {
				return triNull
			}
			ge, le := triNull, triNull
			if l, ok := lo(e); ok {
				ge = toTri(v >= l)
			}
			if h, ok := hi(e); ok {
				le = toTri(v <= h)
			}
			return and3(ge, le)
		}
	}
	if n.not {
		g := f
		f = func(e *env) tri { return notTri(g(e)) }
	}
	return foldBool(f, c)
}

func compileIsNull(n *isNull) (boolFn, bool) {
	var f func(*env) bool // reports NULL
	var c bool
	switch n.x.base().typ {
	case tyBool:
		g, cg := compileBool(n.x)
		f, c = func(e *env) bool { return g(e) == triNull }, cg
	case tyStr:
		g, cg := compileStr(n.x)
		f, c = func(e *env) bool { _, ok := g(e); return !ok }, cg
	default:
		g, cg := compileNum(n.x)
		f, c = func(e *env) bool { _, ok := g(e); return !ok }, cg
	}
	not := n.not
	return foldBool(func(e *env) tri { return toTri(f(e) != not) }, c)
}

// compileCaseBool compiles a CASE whose values are conditions; no branch
// taken is UNKNOWN.
func compileCaseBool(n *caseExpr) (boolFn, bool) {
	conds, cc := compileWhens(n)
	vals := make([]boolFn, len(n.whens))
	c := cc
	for i, w := range n.whens {
		var ci bool
		vals[i], ci = compileBool(w.then)
		c = c && ci
	}
	els := constBool(triNull)
	if n.els != nil {
		var ce bool
		els, ce = compileBool(n.els)
		c = c && ce
	}
	return foldBool(func(e *env) tri {
		for i, cond := range conds {
			if cond(e) == triTrue {
				return vals[i](e)
			}
		}
		return els(e)
	}, c)
}

func compileWhens(n *caseExpr) ([]boolFn, bool) {
	conds := make([]boolFn, len(n.whens))
	all := true
	for i, w := range n.whens {
		var c bool
		conds[i], c = compileBool(w.cond)
		all = all && c
	}
	return conds, all
}

// compileNum compiles a number, a timestamp or an interval.
func compileNum(n node) (numFn, bool) {
	switch n := n.(type) {
	case *macroRef:
		return compileNum(n.def.body)
	case *numLit:
		return constNum(n.v, true), true
	case *intervalLit:
		return constNum(n.n*unitSeconds[n.unit], true), true
	case *timeLit:
		return constNum(float64(n.t.Unix())+float64(n.t.Nanosecond())*1e-9, true), true
	case *attrRef:
		return compileAttrNum(n.a), false
	case *neg:
		x, c := compileNum(n.x)
		return foldNum(func(e *env) (float64, bool) { v, ok := x(e); return -v, ok }, c)
	case *arith:
		return compileArith(n)
	case *call:
		return compileCallNum(n)
	case *caseExpr:
		return compileCaseNum(n)
	}
	compileError(n)
	return nil, false
}

func compileAttrNum(a attr) numFn {
	switch a {
	case aFileSize:
		return func(e *env) (float64, bool) {
			return float64(e.f.Size), e.f.Known&AttrSize != 0
		}
	case aKBAllocated:
		return func(e *env) (float64, bool) {
			if e.f.Known&AttrAllocated == 0 {
				return 0, false
			}
			kb := e.f.Allocated / 1024
			if e.f.Allocated%1024 > 0 {
				kb++
			}
			return float64(kb), true
		}
	case aUID:
		return func(e *env) (float64, bool) { return float64(e.f.UID), e.f.Known&AttrUID != 0 }
	case aGID:
		return func(e *env) (float64, bool) { return float64(e.f.GID), e.f.Known&AttrGID != 0 }
	case aNlink:
		return func(e *env) (float64, bool) { return float64(e.f.Nlink), e.f.Known&AttrNlink != 0 }
	case aNow:
		return func(e *env) (float64, bool) { return e.now, e.nowOK }
	case aAccess:
		return func(e *env) (float64, bool) {
			if e.f.Known&AttrAccess == 0 {
				return 0, false
			}
			return seconds(e.f.Access)
		}
	case aModify:
		return func(e *env) (float64, bool) {
			if e.f.Known&AttrModify == 0 {
				return 0, false
			}
			return seconds(e.f.Modify)
		}
	case aChange:
		return func(e *env) (float64, bool) {
			if e.f.Known&AttrChange == 0 {
				return 0, false
			}
			return seconds(e.f.Change)
		}
	case aCreate:
		return func(e *env) (float64, bool) {
			if e.f.Known&AttrCreate == 0 {
				return 0, false
			}
			return seconds(e.f.Create)
		}
	}
	panic(fmt.Sprintf("policy: attribute %s is not a number", attrs[a].name))
}

// compileArith compiles + - * /; a result that is not a finite number
// (division by zero, overflow) is NULL.
func compileArith(n *arith) (numFn, bool) {
	a, ca := compileNum(n.x)
	b, cb := compileNum(n.y)
	var op func(x, y float64) float64
	switch n.op {
	case tPlus:
		op = func(x, y float64) float64 { return x + y }
	case tMinus:
		op = func(x, y float64) float64 { return x - y }
	case tStar:
		op = func(x, y float64) float64 { return x * y }
	default:
		op = func(x, y float64) float64 { return x / y }
	}
	var f numFn
	switch n.op {
	case tMinus: // the most common: CURRENT_TIMESTAMP - ACCESS_TIME
		f = func(e *env) (float64, bool) {
			x, ok := a(e)
			if !ok {
				return 0, false
			}
			y, ok := b(e)
			if !ok {
				return 0, false
			}
			return finite(x - y)
		}
	default:
		f = func(e *env) (float64, bool) {
			x, ok := a(e)
			if !ok {
				return 0, false
			}
			y, ok := b(e)
			if !ok {
				return 0, false
			}
			return finite(op(x, y))
		}
	}
	return foldNum(f, ca && cb)
}

// finite returns v, or NULL if v is infinite or not a number.
func finite(v float64) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

func compileCallNum(n *call) (numFn, bool) {
	if n.fn == fnLength {
		x, c := compileStr(n.args[0])
		return foldNum(func(e *env) (float64, bool) {
			s, ok := x(e)
			return float64(utf8.RuneCountInString(s)), ok
		}, c)
	}
	x, c := compileNum(n.args[0])
	var unit float64
	switch n.fn {
	case fnDays:
		unit = unitSeconds[unitDay]
	case fnHours:
		unit = unitSeconds[unitHour]
	case fnMinutes:
		unit = unitSeconds[unitMinute]
	case fnSeconds:
		unit = 1
	default:
		compileError(n)
	}
	return foldNum(func(e *env) (float64, bool) { v, ok := x(e); return v / unit, ok }, c)
}

func compileCaseNum(n *caseExpr) (numFn, bool) {
	conds, c := compileWhens(n)
	vals := make([]numFn, len(n.whens))
	for i, w := range n.whens {
		var ci bool
		vals[i], ci = compileNum(w.then)
		c = c && ci
	}
	els := constNum(0, false)
	if n.els != nil {
		var ce bool
		els, ce = compileNum(n.els)
		c = c && ce
	}
	return foldNum(func(e *env) (float64, bool) {
		for i, cond := range conds {
			if cond(e) == triTrue {
				return vals[i](e)
			}
		}
		return els(e)
	}, c)
}

// compileStr compiles a string.
func compileStr(n node) (strFn, bool) {
	switch n := n.(type) {
	case *macroRef:
		return compileStr(n.def.body)
	case *strLit:
		return constStr(n.v, true), true
	case *attrRef:
		return compileAttrStr(n.a), false
	case *call:
		return compileCallStr(n)
	case *caseExpr:
		conds, c := compileWhens(n)
		vals := make([]strFn, len(n.whens))
		for i, w := range n.whens {
			var ci bool
			vals[i], ci = compileStr(w.then)
			c = c && ci
		}
		els := constStr("", false)
		if n.els != nil {
			var ce bool
			els, ce = compileStr(n.els)
			c = c && ce
		}
		return foldStr(func(e *env) (string, bool) {
			for i, cond := range conds {
				if cond(e) == triTrue {
					return vals[i](e)
				}
			}
			return els(e)
		}, c)
	}
	compileError(n)
	return nil, false
}

func compileAttrStr(a attr) strFn {
	switch a {
	case aPath:
		return func(e *env) (string, bool) { return e.f.Path, e.f.Known&AttrPath != 0 }
	case aName:
		return func(e *env) (string, bool) {
			if e.f.Known&AttrName == 0 {
				return "", false
			}
			if !e.nameOK {
				e.name, e.nameOK = fileName(&e.f), true
			}
			return e.name, true
		}
	case aMode:
		return func(e *env) (string, bool) {
			if e.f.Known&AttrMode == 0 {
				return "", false
			}
			if !e.modeOK {
				e.mode, e.modeOK = FormatMode(e.f.Mode), true
			}
			return e.mode, true
		}
	case aPool:
		return func(e *env) (string, bool) { return e.f.Pool, e.f.Known&AttrPool != 0 }
	case aProtection:
		return func(e *env) (string, bool) { return e.f.Protection, e.f.Known&AttrProtection != 0 }
	}
	panic(fmt.Sprintf("policy: attribute %s is not a string", attrs[a].name))
}

func compileCallStr(n *call) (strFn, bool) {
	switch n.fn {
	case fnXattr:
		name := n.args[0].(*strLit).v
		return func(e *env) (string, bool) {
			if e.f.Known&AttrXattrs == 0 || e.f.Xattr == nil {
				return "", false
			}
			return e.f.Xattr(name)
		}, false
	case fnLower, fnUpper:
		conv := strings.ToLower
		if n.fn == fnUpper {
			conv = strings.ToUpper
		}
		x, c := compileStr(n.args[0])
		return foldStr(func(e *env) (string, bool) {
			s, ok := x(e)
			if !ok {
				return "", false
			}
			return conv(s), true
		}, c)
	}
	compileError(n)
	return nil, false
}
