package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxStringBytes is the longest string literal accepted (a path is at most
// 4096 bytes, so no useful pattern is longer); it also bounds the work of
// one LIKE.
const MaxStringBytes = 4096

// lexer turns a policy's text into tokens. It never stops at an error: it
// reports it, emits a tIllegal token (or the token it could make of the
// text) and goes on, so that the parser can report more than the first
// problem.
type lexer struct {
	src       string
	off       int
	line, col int
	toks      []token
	errs      []Error
}

// lex returns the tokens of src, ending with tEOF, and the lexical errors.
func lex(src string) ([]token, []Error) {
	lx := &lexer{src: src, line: 1, col: 1}
	if !utf8.ValidString(src) {
		lx.invalidUTF8()
	}
	for lx.next() {
	}
	return lx.toks, lx.errs
}

// invalidUTF8 reports the first byte of src that is not UTF-8: the text
// is stored as JSON, which cannot carry it.
func (lx *lexer) invalidUTF8() {
	line, col := 1, 1
	for i := 0; i < len(lx.src); {
		r, w := utf8.DecodeRuneInString(lx.src[i:])
		if r == utf8.RuneError && w == 1 {
			lx.errs = append(lx.errs, Error{Pos{line, col}, fmt.Sprintf("invalid UTF-8 byte 0x%02x: a policy is UTF-8 text", lx.src[i])})
			return
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += w
	}
}

func (lx *lexer) pos() Pos { return Pos{lx.line, lx.col} }

func (lx *lexer) errorf(p Pos, format string, args ...any) {
	lx.errs = append(lx.errs, Error{p, fmt.Sprintf(format, args...)})
}

// advance moves n bytes forward, keeping line and column.
func (lx *lexer) advance(n int) {
	for end := lx.off + n; lx.off < end; lx.off++ {
		switch c := lx.src[lx.off]; {
		case c == '\n':
			lx.line++
			lx.col = 1
		case c&0xC0 != 0x80: // not a UTF-8 continuation byte
			lx.col++
		}
	}
}

func (lx *lexer) peek(i int) byte {
	if lx.off+i < len(lx.src) {
		return lx.src[lx.off+i]
	}
	return 0
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isIdent(c byte) bool  { return isLetter(c) || isDigit(c) }

// emit appends a token from start to the current offset.
func (lx *lexer) emit(t token, start int, p Pos) {
	t.off, t.end, t.pos = start, lx.off, p
	lx.toks = append(lx.toks, t)
}

// next lexes one token; it returns false after tEOF.
func (lx *lexer) next() bool {
	lx.skipSpace()
	start, p := lx.off, lx.pos()
	if lx.off >= len(lx.src) {
		lx.emit(token{kind: tEOF}, start, p)
		return false
	}
	c := lx.src[lx.off]
	switch {
	case isLetter(c):
		for lx.advance(1); lx.off < len(lx.src) && isIdent(lx.src[lx.off]); lx.advance(1) {
		}
		text := lx.src[start:lx.off]
		lx.emit(token{kind: tIdent, kw: lookupKeyword(text), text: text}, start, p)
	case isDigit(c):
		lx.number(start, p)
	case c == '\'':
		lx.str(start, p, '\'')
	case c == '"':
		lx.errorf(p, `strings take single quotes ('fast'), not double quotes`)
		lx.str(start, p, '"')
	default:
		lx.punct(start, p, c)
	}
	return true
}

// skipSpace skips white space and comments.
func (lx *lexer) skipSpace() {
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			lx.advance(1)
		case c == '-' && lx.peek(1) == '-':
			n := strings.IndexByte(lx.src[lx.off:], '\n')
			if n < 0 {
				n = len(lx.src) - lx.off
			}
			lx.advance(n)
		case c == '/' && lx.peek(1) == '*':
			p := lx.pos()
			n := strings.Index(lx.src[lx.off+2:], "*/")
			if n < 0 {
				lx.errorf(p, "unterminated comment: /* without */")
				lx.advance(len(lx.src) - lx.off)
				return
			}
			lx.advance(n + 4)
		case c >= utf8.RuneSelf:
			r, w := utf8.DecodeRuneInString(lx.src[lx.off:])
			if r == utf8.RuneError || !unicode.IsSpace(r) {
				return
			}
			lx.advance(w)
		default:
			return
		}
	}
}

// sizeShift gives each size suffix's power of two: 1K = 1024.
func sizeShift(c byte) (uint, bool) {
	switch c {
	case 'K', 'k':
		return 10, true
	case 'M', 'm':
		return 20, true
	case 'G', 'g':
		return 30, true
	case 'T', 't':
		return 40, true
	}
	return 0, false
}

// number lexes digits [. digits] [K|M|G|T].
func (lx *lexer) number(start int, p Pos) {
	for lx.off < len(lx.src) && isDigit(lx.src[lx.off]) {
		lx.advance(1)
	}
	if lx.peek(0) == '.' {
		lx.advance(1)
		if !isDigit(lx.peek(0)) {
			lx.errorf(p, "malformed number %s: a digit must follow the decimal point", lx.src[start:lx.off])
		}
		for lx.off < len(lx.src) && isDigit(lx.src[lx.off]) {
			lx.advance(1)
		}
	}
	digits := strings.TrimSuffix(lx.src[start:lx.off], ".")
	var suffix string
	if lx.off < len(lx.src) && isLetter(lx.src[lx.off]) {
		s := lx.off
		for lx.off < len(lx.src) && isIdent(lx.src[lx.off]) {
			lx.advance(1)
		}
		suffix = lx.src[s:lx.off]
	}
	shift, ok := uint(0), true
	if suffix != "" {
		if shift, ok = sizeShift(suffix[0]); !ok || len(suffix) != 1 {
			lx.errorf(p, "malformed number %s: a size suffix is one of K, M, G, T (1K = 1024)", lx.src[start:lx.off])
			lx.emit(token{kind: tIllegal}, start, p)
			return
		}
	}
	v, err := strconv.ParseFloat(digits, 64)
	n := v * float64(uint64(1)<<shift)
	if err != nil || n > maxNumber {
		lx.errorf(p, "number %s is too large", lx.src[start:lx.off])
		lx.emit(token{kind: tIllegal}, start, p)
		return
	}
	text := strconv.FormatFloat(v, 'f', -1, 64) + strings.ToUpper(suffix)
	lx.emit(token{kind: tNumber, text: text, num: n}, start, p)
}

// maxNumber bounds literals so that arithmetic on them stays finite in
// ordinary use (and their text stays short): 2^70, a zebibyte.
const maxNumber = 1 << 70

// str lexes a string in quotes q; a doubled quote stands for one.
func (lx *lexer) str(start int, p Pos, q byte) {
	lx.advance(1)
	var b strings.Builder
	for {
		n := strings.IndexByte(lx.src[lx.off:], q)
		if n < 0 {
			lx.errorf(p, "unterminated string: no closing %c", q)
			lx.advance(len(lx.src) - lx.off)
			lx.emit(token{kind: tIllegal}, start, p)
			return
		}
		b.WriteString(lx.src[lx.off : lx.off+n])
		lx.advance(n + 1)
		if lx.peek(0) != q {
			break
		}
		b.WriteByte(q)
		lx.advance(1)
	}
	if b.Len() > MaxStringBytes {
		lx.errorf(p, "string of %d bytes: at most %d are accepted", b.Len(), MaxStringBytes)
		lx.emit(token{kind: tIllegal}, start, p)
		return
	}
	lx.emit(token{kind: tString, text: b.String()}, start, p)
	// '10'G: a size suffix stuck to a string.
	if _, ok := sizeShift(lx.peek(0)); ok && !isIdent(lx.peek(1)) {
		lx.errorf(lx.pos(), "a size suffix goes on a number, not on a string: write 10G, not '10'G")
		lx.advance(1)
	}
}

// punct lexes an operator or punctuation, or reports an unexpected
// character.
func (lx *lexer) punct(start int, p Pos, c byte) {
	kind, n := tIllegal, 1
	switch c {
	case '(':
		kind = tLParen
	case ')':
		kind = tRParen
	case ',':
		kind = tComma
	case ';':
		kind = tSemi
	case '+':
		kind = tPlus
	case '-':
		kind = tMinus
	case '*':
		kind = tStar
	case '/':
		kind = tSlash
	case '=':
		kind = tEq
		if lx.peek(1) == '=' {
			lx.errorf(p, "== is not an operator: compare with =")
			n = 2
		}
	case '<':
		switch lx.peek(1) {
		case '=':
			kind, n = tLe, 2
		case '>':
			kind, n = tNe, 2
		default:
			kind = tLt
		}
	case '>':
		kind = tGt
		if lx.peek(1) == '=' {
			kind, n = tGe, 2
		}
	case '!':
		if lx.peek(1) == '=' {
			kind, n = tNe, 2
		} else {
			lx.errorf(p, "unexpected character '!': negate with NOT, compare with != or <>")
		}
	case '.':
		if isDigit(lx.peek(1)) {
			lx.errorf(p, "malformed number: write 0.5, not .5")
		} else {
			lx.errorf(p, "unexpected character '.'")
		}
	default:
		r, w := utf8.DecodeRuneInString(lx.src[lx.off:])
		n = w
		switch {
		case r == utf8.RuneError && w == 1:
			// Reported once for the whole text by invalidUTF8.
		case r == '"' || r == '\u2018' || r == '\u2019' || r == '\u201c' || r == '\u201d':
			lx.errorf(p, "unexpected character %q: strings take plain single quotes ('fast')", r)
		case unicode.IsPrint(r):
			lx.errorf(p, "unexpected character %q", r)
		default:
			lx.errorf(p, "unexpected character %U", r)
		}
	}
	lx.advance(n)
	lx.emit(token{kind: kind}, start, p)
}
