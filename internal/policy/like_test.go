package policy

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLike(t *testing.T) {
	for _, tc := range []struct {
		pat, esc string
		yes, no  []string
	}{
		{pat: "", yes: []string{""}, no: []string{"a"}},
		{pat: "abc", yes: []string{"abc"}, no: []string{"ab", "abcd", "ABC", "xabc"}},
		{pat: "%", yes: []string{"", "a", "anything"}},
		{pat: "%%", yes: []string{"", "a"}},
		{pat: "a%", yes: []string{"a", "abc"}, no: []string{"", "ba"}},
		{pat: "%.tar", yes: []string{".tar", "x.tar"}, no: []string{"x.tar.gz", "tar"}},
		{pat: "%log%", yes: []string{"log", "a.log.1", "catalog"}, no: []string{"lo", "l.og"}},
		{pat: "a%z", yes: []string{"az", "abcz"}, no: []string{"a", "z", "za"}},
		{pat: "ab%ba", yes: []string{"abba", "ab-ba"}, no: []string{"aba", "abb"}},
		{pat: "_", yes: []string{"a", "é", "✓"}, no: []string{"", "ab"}},
		{pat: "__", yes: []string{"ab", "éé"}, no: []string{"é", "abc"}},
		{pat: "a_c", yes: []string{"abc", "a✓c"}, no: []string{"ac", "abbc"}},
		{pat: "%a_c%", yes: []string{"abc", "xxabcxx", "aac", "aaac"}, no: []string{"ac", "abbc"}},
		{pat: "%_%", yes: []string{"a", "ab"}, no: []string{""}},
		{pat: "%ab_", yes: []string{"abx", "ababx", "aabb"}, no: []string{"ab", "abxx", "abab"}},
		{pat: "%a%b%c", yes: []string{"abc", "xaxbxc", "aabbcc"}, no: []string{"acb", "abcx"}},
		{pat: "/scratch/%", yes: []string{"/scratch/", "/scratch/a/b"}, no: []string{"/scratch", "/home/scratch/a"}},
		{pat: `a\%b`, esc: `\`, yes: []string{"a%b"}, no: []string{"axb", `a\%b`}},
		{pat: `a\_b`, esc: `\`, yes: []string{"a_b"}, no: []string{"axb"}},
		{pat: `a\\b`, esc: `\`, yes: []string{`a\b`}, no: []string{`a\\b`}},
		{pat: `%\%`, esc: `\`, yes: []string{"100%"}, no: []string{"100"}},
		{pat: `a!%%`, esc: `!`, yes: []string{"a%", "a%bc"}, no: []string{"ab"}},
		{pat: `a%%b`, esc: `%`, yes: []string{"a%b"}, no: []string{"ab", "axb"}},
		{pat: "é%", yes: []string{"é", "éa"}, no: []string{"e"}},
		{pat: "%\xff", yes: []string{"a\xff"}, no: []string{"a\xfe"}},
		{pat: "_b", yes: []string{"\xffb"}, no: []string{"\xff\xfeb"}},
	} {
		lp, err := compileLike(tc.pat, tc.esc)
		if err != nil {
			t.Errorf("compile %q escape %q: %v", tc.pat, tc.esc, err)
			continue
		}
		for _, s := range tc.yes {
			if !lp.match(s) {
				t.Errorf("%q LIKE %q (escape %q) is false, want true", s, tc.pat, tc.esc)
			}
		}
		for _, s := range tc.no {
			if lp.match(s) {
				t.Errorf("%q LIKE %q (escape %q) is true, want false", s, tc.pat, tc.esc)
			}
		}
	}
	for _, bad := range []string{`a\`, `\a`, `a\b%`} {
		if _, err := compileLike(bad, `\`); err == nil {
			t.Errorf("pattern %q with escape '\\' accepted", bad)
		}
	}
}

// likeRegexp is a reference for LIKE: the pattern as a regular expression.
func likeRegexp(pat, esc string) *regexp.Regexp {
	escRune := rune(-1)
	if esc != "" {
		escRune, _ = utf8.DecodeRuneInString(esc)
	}
	var b strings.Builder
	b.WriteString(`(?s)^`)
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == escRune && i+1 < len(rs):
			i++
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		case r == '%':
			b.WriteString(`.*`)
		case r == '_':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// checkLikeAgainstRegexp compares LIKE with its regular expression on
// UTF-8 text (where the two agree on what a character is).
func checkLikeAgainstRegexp(t *testing.T, pat, esc, s string) {
	if !utf8.ValidString(pat) || !utf8.ValidString(s) || !utf8.ValidString(esc) || utf8.RuneCountInString(esc) > 1 {
		return
	}
	lp, err := compileLike(pat, esc)
	if err != nil {
		return
	}
	if got, want := lp.match(s), likeRegexp(pat, esc).MatchString(s); got != want {
		t.Fatalf("%q LIKE %q ESCAPE %q = %v, the regexp says %v", s, pat, esc, got, want)
	}
}

func TestLikeAgainstRegexp(t *testing.T) {
	pats := []string{"", "%", "_", "a", "%a", "a%", "%a%", "a_", "_a", "%a_b%", "%ab%ba%", "a%b%c", "%_%_", "__%", "%aa%a", "%a%a%a%b", `\%%`, `%\_`}
	strs := []string{"", "a", "b", "ab", "ba", "aab", "abab", "aaaa", "aaab", "abba", "_", "%", "a_b", "xaxbx", "é", "aé", "\n"}
	for _, p := range pats {
		for _, s := range strs {
			checkLikeAgainstRegexp(t, p, `\`, s)
			checkLikeAgainstRegexp(t, p, "", s)
		}
	}
}

// BenchmarkLikeWorst measures a pattern that makes naive backtracking
// matchers slow: this one stays linear.
func BenchmarkLikeWorst(b *testing.B) {
	lp, _ := compileLike("%a%a%a%a%a%a%a%a%b", "")
	s := strings.Repeat("a", 4096)
	for b.Loop() {
		lp.match(s)
	}
}
