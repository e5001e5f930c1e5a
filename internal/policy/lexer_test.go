package policy

import (
	"fmt"
	"strings"
	"testing"
)

// tokString spells a token for the lexer's tables: keywords in capitals,
// id:name, num:text=value, str:'value', punctuation, ILLEGAL.
func tokString(t token) string {
	switch t.kind {
	case tIdent:
		if t.kw != kwNone {
			return t.kw.String()
		}
		return "id:" + t.text
	case tNumber:
		return fmt.Sprintf("num:%s=%g", t.text, t.num)
	case tString:
		return "str:" + quote(t.text)
	case tIllegal:
		return "ILLEGAL"
	case tEOF:
		return "EOF"
	}
	return punct[t.kind]
}

func TestLex(t *testing.T) {
	for _, tc := range []struct {
		in   string
		toks string // space-separated, without the final EOF
		errs string // "line:col msg" joined by " | "
	}{
		{in: "", toks: ""},
		{in: "  \t\n\r\n ", toks: ""},
		{in: "RULE rule Rule rUlE", toks: "RULE RULE RULE RULE"},
		{in: "file_size _x x1 X_1_", toks: "id:file_size id:_x id:x1 id:X_1_"},
		{in: "SET POOL PROTECTION MIGRATE FROM THRESHOLD WEIGHT TO LIMIT DELETE LIST WHERE DEFINE",
			toks: "SET POOL PROTECTION MIGRATE FROM THRESHOLD WEIGHT TO LIMIT DELETE LIST WHERE DEFINE"},
		{in: "AND OR NOT LIKE ESCAPE IN IS NULL BETWEEN CASE WHEN THEN ELSE END INTERVAL TIMESTAMP TRUE FALSE",
			toks: "AND OR NOT LIKE ESCAPE IN IS NULL BETWEEN CASE WHEN THEN ELSE END INTERVAL TIMESTAMP TRUE FALSE"},
		{in: "ruler rules andor", toks: "id:ruler id:rules id:andor"},
		// Numbers, with binary size suffixes in either case.
		{in: "0 12 007 1.5 0.25", toks: "num:0=0 num:12=12 num:7=7 num:1.5=1.5 num:0.25=0.25"},
		{in: "1K 1k 2M 3G 4t 1.5K", toks: "num:1K=1024 num:1K=1024 num:2M=2.097152e+06 num:3G=3.221225472e+09 num:4T=4.398046511104e+12 num:1.5K=1536"},
		{in: "10GB", toks: "ILLEGAL", errs: "1:1 malformed number 10GB: a size suffix is one of K, M, G, T (1K = 1024)"},
		{in: "1e5", toks: "ILLEGAL", errs: "1:1 malformed number 1e5: a size suffix is one of K, M, G, T (1K = 1024)"},
		{in: "0x10", toks: "ILLEGAL", errs: "1:1 malformed number 0x10: a size suffix is one of K, M, G, T (1K = 1024)"},
		{in: "5.", toks: "num:5=5", errs: "1:1 malformed number 5.: a digit must follow the decimal point"},
		{in: ".5", toks: "ILLEGAL num:5=5", errs: "1:1 malformed number: write 0.5, not .5"},
		{in: strings.Repeat("9", 400), toks: "ILLEGAL", errs: "1:1 number " + strings.Repeat("9", 400) + " is too large"},
		{in: "2000000000T", toks: "ILLEGAL", errs: "1:1 number 2000000000T is too large"},
		{in: "1T 1", toks: "num:1T=1.099511627776e+12 num:1=1"},
		// Strings: '' is a quote; any character but the quote inside.
		{in: "'a' '' 'it''s' '''' 'a\nb' '-- no comment' '/* nor this */'",
			toks: `str:'a' str:'' str:'it''s' str:'''' str:'a` + "\n" + `b' str:'-- no comment' str:'/* nor this */'`},
		{in: "'abc", toks: "ILLEGAL", errs: "1:1 unterminated string: no closing '"},
		{in: "'it''", toks: "ILLEGAL", errs: "1:1 unterminated string: no closing '"},
		{in: `"fast"`, toks: "str:'fast'", errs: `1:1 strings take single quotes ('fast'), not double quotes`},
		{in: "'10'G", toks: "str:'10'", errs: "1:5 a size suffix goes on a number, not on a string: write 10G, not '10'G"},
		{in: "'10'GB", toks: "str:'10' id:GB"},
		{in: "'" + strings.Repeat("x", MaxStringBytes) + "'", toks: "str:'" + strings.Repeat("x", MaxStringBytes) + "'"},
		{in: "'" + strings.Repeat("x", MaxStringBytes+1) + "'", toks: "ILLEGAL", errs: "1:1 string of 4097 bytes: at most 4096 are accepted"},
		// Operators.
		{in: "( ) , ; = <> != < <= > >= + - * /", toks: "( ) , ; = <> <> < <= > >= + - * /"},
		{in: "a<=b<>c>=d", toks: "id:a <= id:b <> id:c >= id:d"},
		{in: "a==b", toks: "id:a = id:b", errs: "1:2 == is not an operator: compare with ="},
		{in: "!", toks: "ILLEGAL", errs: "1:1 unexpected character '!': negate with NOT, compare with != or <>"},
		{in: "a#b", toks: "id:a ILLEGAL id:b", errs: "1:2 unexpected character '#'"},
		{in: "\x01", toks: "ILLEGAL", errs: "1:1 unexpected character U+0001"},
		{in: "é", toks: "ILLEGAL", errs: "1:1 unexpected character 'é'"},
		// Comments.
		{in: "a -- comment\nb", toks: "id:a id:b"},
		{in: "a --", toks: "id:a"},
		{in: "a-b - -c", toks: "id:a - id:b - - id:c"},
		{in: "a /* x\ny */ b /**/ c", toks: "id:a id:b id:c"},
		{in: "a /* never", toks: "id:a", errs: "1:3 unterminated comment: /* without */"},
		{in: "a /* /* */ b */", toks: "id:a id:b * /"},
		{in: "a/b*c", toks: "id:a / id:b * id:c"},
		// Unicode white space separates; the text must be UTF-8.
		{in: "a\u00a0b\u2003c", toks: "id:a id:b id:c"},
		{in: "'\xff' x\xfe", toks: "str:'\xff' id:x ILLEGAL", errs: "1:2 invalid UTF-8 byte 0xff: a policy is UTF-8 text"},
	} {
		toks, errs := lex(tc.in)
		var got []string
		for _, tok := range toks[:len(toks)-1] {
			got = append(got, tokString(tok))
		}
		if last := toks[len(toks)-1]; last.kind != tEOF {
			t.Errorf("lex(%q): last token %s, want EOF", tc.in, tokString(last))
		}
		var gotErrs []string
		for _, e := range errs {
			gotErrs = append(gotErrs, fmt.Sprintf("%d:%d %s", e.Pos.Line, e.Pos.Col, e.Msg))
		}
		if g := strings.Join(got, " "); g != tc.toks {
			t.Errorf("lex(%q) tokens:\n got %s\nwant %s", tc.in, g, tc.toks)
		}
		if g := strings.Join(gotErrs, " | "); g != tc.errs {
			t.Errorf("lex(%q) errors:\n got %s\nwant %s", tc.in, g, tc.errs)
		}
	}
}

// TestLexPositions checks lines, columns (characters, not bytes) and
// offsets across comments, strings spanning lines and multi-byte text.
func TestLexPositions(t *testing.T) {
	src := "RULE 'é✓' -- ü\n  /* a\n b */ SET\n\t'x\ny' POOL"
	toks, errs := lex(src)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	want := []struct {
		line, col int
		text      string
	}{{1, 1, "RULE"}, {1, 6, "'é✓'"}, {3, 7, "SET"}, {4, 2, "'x\ny'"}, {5, 4, "POOL"}, {5, 8, ""}}
	if len(toks) != len(want) {
		t.Fatalf("%d tokens, want %d", len(toks), len(want))
	}
	for i, w := range want {
		tok := toks[i]
		if tok.pos != (Pos{w.line, w.col}) || src[tok.off:tok.end] != w.text {
			t.Errorf("token %d: at %s %q, want line %d, column %d %q", i, tok.pos, src[tok.off:tok.end], w.line, w.col, w.text)
		}
	}
}

func TestFormatMode(t *testing.T) {
	for _, tc := range []struct {
		mode uint32
		want string
	}{
		{0o100644, "-rw-r--r--"},
		{0o040755, "drwxr-xr-x"},
		{0o041777, "drwxrwxrwt"},
		{0o041776, "drwxrwxrwT"},
		{0o104755, "-rwsr-xr-x"},
		{0o104644, "-rwSr--r--"},
		{0o102755, "-rwxr-sr-x"},
		{0o102745, "-rwxr-Sr-x"},
		{0o120777, "lrwxrwxrwx"},
		{0o060660, "brw-rw----"},
		{0o020666, "crw-rw-rw-"},
		{0o010600, "prw-------"},
		{0o140755, "srwxr-xr-x"},
		{0o000644, "?rw-r--r--"},
		{0o170644, "?rw-r--r--"},
		{0o100000, "----------"},
	} {
		if got := FormatMode(tc.mode); got != tc.want {
			t.Errorf("FormatMode(%o) = %s, want %s", tc.mode, got, tc.want)
		}
	}
}
