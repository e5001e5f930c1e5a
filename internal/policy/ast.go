package policy

import "time"

// typ is the static type of an expression. The checker gives every
// expression one; the evaluator is compiled from them and never looks at
// a value's type.
type typ uint8

const (
	tyInvalid  typ = iota // an expression with an error already reported
	tyBool                // a condition: TRUE, FALSE or UNKNOWN
	tyNum                 // a number (float64)
	tyStr                 // a string
	tyTime                // a timestamp (seconds since 1970 UTC)
	tyInterval            // an interval (seconds)
)

// name is the type as messages say it ("a number").
func (t typ) name() string {
	switch t {
	case tyBool:
		return "a condition"
	case tyNum:
		return "a number"
	case tyStr:
		return "a string"
	case tyTime:
		return "a timestamp"
	case tyInterval:
		return "an interval"
	}
	return "an invalid expression"
}

// node is an expression of the syntax tree.
type node interface {
	base() *nodeBase
}

// nodeBase is what every node has: its position (its operator's, for an
// operation), its type once checked, and its height and size counted
// through macros, which bound the work of checking, compiling and
// evaluating it.
type nodeBase struct {
	pos    Pos
	typ    typ
	height int
	size   int
}

func (b *nodeBase) base() *nodeBase { return b }

// shape sets b's height and size from its children.
func (b *nodeBase) shape(kids ...node) {
	b.height, b.size = 1, 1
	for _, k := range kids {
		kb := k.base()
		b.height = max(b.height, kb.height+1)
		b.size += kb.size
	}
}

type (
	// numLit is a number: 12, 1.5, 10G. text is its canonical spelling.
	numLit struct {
		nodeBase
		v    float64
		text string
	}
	// strLit is a string in quotes.
	strLit struct {
		nodeBase
		v string
	}
	// boolLit is TRUE or FALSE.
	boolLit struct {
		nodeBase
		v bool
	}
	// intervalLit is INTERVAL 'n' UNIT; text is n's canonical spelling.
	intervalLit struct {
		nodeBase
		n    float64
		text string
		unit timeUnit
	}
	// timeLit is TIMESTAMP '2026-01-02 03:04:05'.
	timeLit struct {
		nodeBase
		t time.Time
	}
	// attrRef is an attribute: FILE_SIZE, CURRENT_TIMESTAMP, ...
	attrRef struct {
		nodeBase
		a attr
	}
	// call is a function: LOWER(x), DAYS(x), XATTR('name'), ...
	call struct {
		nodeBase
		fn   function
		args []node
	}
	// neg is unary minus.
	neg struct {
		nodeBase
		x node
	}
	// arith is x + - * / y.
	arith struct {
		nodeBase
		op   tokKind
		x, y node
	}
	// not is NOT x.
	not struct {
		nodeBase
		x node
	}
	// logic is x AND y AND ... or x OR y OR ... (one operator per node).
	logic struct {
		nodeBase
		or bool
		xs []node
	}
	// compare is x = <> < <= > >= y.
	compare struct {
		nodeBase
		op   tokKind
		x, y node
	}
	// like is x [NOT] LIKE pat [ESCAPE 'c'].
	like struct {
		nodeBase
		not    bool
		x, pat node
		esc    string // "" or one character
	}
	// in is x [NOT] IN (list).
	in struct {
		nodeBase
		not  bool
		x    node
		list []node
	}
	// between is x [NOT] BETWEEN lo AND hi.
	between struct {
		nodeBase
		not       bool
		x, lo, hi node
	}
	// isNull is x IS [NOT] NULL.
	isNull struct {
		nodeBase
		not bool
		x   node
	}
	// caseExpr is CASE WHEN c THEN v ... [ELSE e] END.
	caseExpr struct {
		nodeBase
		whens []when
		els   node // nil: NULL
	}
	// macroRef is a use of a DEFINE; it stands for the macro's body.
	macroRef struct {
		nodeBase
		def *define
	}
)

// when is one WHEN cond THEN value of a CASE.
type when struct {
	cond, then node
}

// define is a DEFINE(name, body) statement. bad marks a macro whose body
// did not parse or check: its uses are invalid without more messages.
type define struct {
	name string
	pos  Pos
	body node
	bad  bool
}

// timeUnit is the unit of an INTERVAL literal.
type timeUnit uint8

const (
	unitSecond timeUnit = iota
	unitMinute
	unitHour
	unitDay
)

// unitSeconds is each unit's length in seconds.
var unitSeconds = [...]float64{unitSecond: 1, unitMinute: 60, unitHour: 3600, unitDay: 86400}

// unitNames spells each unit as printed.
var unitNames = [...]string{unitSecond: "SECONDS", unitMinute: "MINUTES", unitHour: "HOURS", unitDay: "DAYS"}

// lookupUnit accepts DAY(S), HOUR(S), MINUTE(S), SECOND(S) in any case.
func lookupUnit(s string) (timeUnit, bool) {
	for u, n := range unitNames {
		if len(s) == len(n) || len(s) == len(n)-1 {
			if equalFoldPrefix(n, s) {
				return timeUnit(u), true
			}
		}
	}
	return 0, false
}

// equalFoldPrefix reports whether s is n or n without its last letter,
// ignoring case.
func equalFoldPrefix(n, s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != n[i] {
			return false
		}
	}
	return true
}

// function identifies a function of the language.
type function uint8

const (
	fnLower function = iota
	fnUpper
	fnLength
	fnDays
	fnHours
	fnMinutes
	fnSeconds
	fnXattr
	numFunctions
)

// functions describes each function: its name, its argument's type and
// its result's type. Every function takes one argument.
var functions = [numFunctions]struct {
	name    string
	arg, to typ
}{
	fnLower:   {"LOWER", tyStr, tyStr},
	fnUpper:   {"UPPER", tyStr, tyStr},
	fnLength:  {"LENGTH", tyStr, tyNum},
	fnDays:    {"DAYS", tyInterval, tyNum},
	fnHours:   {"HOURS", tyInterval, tyNum},
	fnMinutes: {"MINUTES", tyInterval, tyNum},
	fnSeconds: {"SECONDS", tyInterval, tyNum},
	fnXattr:   {"XATTR", tyStr, tyStr},
}

// lookupFunction returns the function spelled name (in any case).
func lookupFunction(name string) (function, bool) {
	for f := function(0); f < numFunctions; f++ {
		if len(name) == len(functions[f].name) && equalFoldPrefix(functions[f].name, name) {
			return f, true
		}
	}
	return 0, false
}
