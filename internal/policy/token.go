package policy

import "strings"

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tEOF     tokKind = iota
	tIllegal         // a lexical error, already reported by the lexer
	tIdent           // a name or a keyword (token.kw says which)
	tNumber          // 12, 1.5, 10G
	tString          // 'text' (token.text holds the value)
	tLParen
	tRParen
	tComma
	tSemi
	tEq // =
	tNe // <> or !=
	tLt
	tLe
	tGt
	tGe
	tPlus
	tMinus
	tStar
	tSlash
)

// punct spells each punctuation kind, for messages and printing.
var punct = [...]string{
	tLParen: "(", tRParen: ")", tComma: ",", tSemi: ";",
	tEq: "=", tNe: "<>", tLt: "<", tLe: "<=", tGt: ">", tGe: ">=",
	tPlus: "+", tMinus: "-", tStar: "*", tSlash: "/",
}

// keyword identifies a reserved word; kwNone is an ordinary name.
type keyword uint8

const (
	kwNone keyword = iota
	kwRule
	kwDefine
	kwSet
	kwPool
	kwProtection
	kwMigrate
	kwFrom
	kwThreshold
	kwWeight
	kwTo
	kwLimit
	kwDelete
	kwList
	kwWhere
	kwAnd
	kwOr
	kwNot
	kwLike
	kwEscape
	kwIn
	kwIs
	kwNull
	kwBetween
	kwCase
	kwWhen
	kwThen
	kwElse
	kwEnd
	kwInterval
	kwTimestamp
	kwTrue
	kwFalse
	numKeywords
)

// keywordNames spells each keyword as printed.
var keywordNames = [numKeywords]string{
	kwRule: "RULE", kwDefine: "DEFINE", kwSet: "SET", kwPool: "POOL",
	kwProtection: "PROTECTION", kwMigrate: "MIGRATE", kwFrom: "FROM",
	kwThreshold: "THRESHOLD", kwWeight: "WEIGHT", kwTo: "TO", kwLimit: "LIMIT",
	kwDelete: "DELETE", kwList: "LIST", kwWhere: "WHERE", kwAnd: "AND",
	kwOr: "OR", kwNot: "NOT", kwLike: "LIKE", kwEscape: "ESCAPE", kwIn: "IN",
	kwIs: "IS", kwNull: "NULL", kwBetween: "BETWEEN", kwCase: "CASE",
	kwWhen: "WHEN", kwThen: "THEN", kwElse: "ELSE", kwEnd: "END",
	kwInterval: "INTERVAL", kwTimestamp: "TIMESTAMP", kwTrue: "TRUE",
	kwFalse: "FALSE",
}

func (k keyword) String() string { return keywordNames[k] }

// lookupKeyword returns the keyword spelled name (in any case), or kwNone.
func lookupKeyword(name string) keyword {
	if len(name) < 2 || len(name) > 10 {
		return kwNone
	}
	up := strings.ToUpper(name)
	for k := kwRule; k < numKeywords; k++ {
		if keywordNames[k] == up {
			return k
		}
	}
	return kwNone
}

// token is one lexical token of a policy's text.
type token struct {
	kind tokKind
	kw   keyword
	pos  Pos
	off  int // byte offset of its first byte
	end  int // byte offset after its last byte
	// text is the name as written (tIdent), the value (tString) or the
	// canonical spelling (tNumber: "10G", "1.5").
	text string
	num  float64 // tNumber: the value, size suffix applied
}

// describe names the token for "found ..." in messages.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tIdent:
		if t.kw != kwNone {
			return t.kw.String()
		}
		return t.text
	case tNumber:
		return t.text
	case tString:
		return quoteShort(t.text)
	case tIllegal:
		return "an invalid token"
	}
	return `"` + punct[t.kind] + `"`
}

// spell is the token as it appears in a context quote ("after MIGRATE
// FROM POOL 'fast' THRESHOLD(80,40)").
func (t token) spell() string {
	switch t.kind {
	case tIdent:
		if t.kw != kwNone {
			return t.kw.String()
		}
		return t.text
	case tNumber:
		return t.text
	case tString:
		return quoteShort(t.text)
	case tEOF, tIllegal:
		return ""
	}
	return punct[t.kind]
}

// quoteShort quotes s as a string literal, shortened past 40 characters.
func quoteShort(s string) string {
	if r := []rune(s); len(r) > 40 {
		s = string(r[:37]) + "..."
	}
	return quote(s)
}

// quote returns s as a string literal: in single quotes, a quote doubled.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
