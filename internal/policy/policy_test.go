package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func mustParse(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Parse(src, nil)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return p
}

// parseErrors returns the messages of Parse's error, "L:C msg".
func parseErrors(t *testing.T, src string) []string {
	t.Helper()
	_, err := Parse(src, nil)
	var es *Errors
	if !errors.As(err, &es) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Parse: %v, want an *Errors wrapping ErrInvalid", err)
	}
	var out []string
	for _, e := range es.List {
		out = append(out, fmt.Sprintf("%d:%d %s", e.Pos.Line, e.Pos.Col, e.Msg))
	}
	return out
}

func TestErrorsFormat(t *testing.T) {
	_, err := Parse("RULE SET POOL 'a' WHERE NAME = 1", nil)
	if got, want := err.Error(), "policy: invalid policy: line 1, column 30: cannot compare NAME (a string) with 1 (a number)"; got != want {
		t.Errorf("one error: %q\nwant %q", got, want)
	}
	_, err = Parse("RULE SET POOL 'a' WHERE NAME = 1\nRULE DELETE WHERE NLINK = 'a'", nil)
	want := "policy: invalid policy: 2 errors\n" +
		"line 1, column 30: cannot compare NAME (a string) with 1 (a number)\n" +
		"line 2, column 25: cannot compare NLINK (a number) with 'a' (a string)"
	if got := err.Error(); got != want {
		t.Errorf("two errors: %q\nwant %q", got, want)
	}
}

// TestErrorCap checks that at most MaxErrors are listed, the first ones by
// position, with a count of the others.
func TestErrorCap(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "RULE DELETE WHERE NAME = %d\n", i)
	}
	_, err := Parse(b.String(), nil)
	var es *Errors
	if !errors.As(err, &es) {
		t.Fatal(err)
	}
	if len(es.List) != MaxErrors || es.Omitted != 50-MaxErrors {
		t.Fatalf("%d errors listed, %d omitted; want %d, %d", len(es.List), es.Omitted, MaxErrors, 50-MaxErrors)
	}
	for i, e := range es.List {
		if e.Pos.Line != i+1 {
			t.Errorf("error %d at %s", i, e.Pos)
		}
	}
	if !strings.HasSuffix(err.Error(), "\n(and 30 more)") {
		t.Errorf("message does not count the omitted errors: %s", err)
	}
	// A text that is nothing but errors stops early.
	_, err = Parse(strings.Repeat("x ", 100000), nil)
	if !errors.As(err, &es) || len(es.List) != 1 {
		t.Fatalf("junk: %v", err)
	}
}

func TestInvalidUTF8(t *testing.T) {
	got := parseErrors(t, "RULE DELETE\nWHERE NAME = 'caf\xe9' -- \xff")
	want := []string{"2:18 invalid UTF-8 byte 0xe9: a policy is UTF-8 text"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestLimits checks that inputs past each limit are refused with a
// message, quickly, and inputs within them are accepted.
func TestLimits(t *testing.T) {
	deep := func(n int, open, close string) string {
		return "RULE DELETE WHERE " + strings.Repeat(open, n) + "NLINK = 1" + strings.Repeat(close, n)
	}
	chain := func(n int, op string) string {
		return "RULE DELETE WHERE NLINK " + strings.Repeat(op+" 1 ", n) + "> 0"
	}
	for _, tc := range []struct {
		name, src, err string // err "" : accepted
	}{
		{"parens ok", deep(MaxDepth-2, "(", ")"), ""},
		{"parens", deep(MaxDepth+1, "(", ")"), "expression nested too deeply (more than 64 levels)"},
		{"parens huge", deep(100000, "(", ")"), "expression nested too deeply (more than 64 levels)"},
		{"nots", "RULE DELETE WHERE " + strings.Repeat("NOT ", 50000) + "NLINK = 1", "expression nested too deeply"},
		{"minus", "RULE DELETE WHERE " + strings.Repeat("- ", 100000) + "NLINK = 1", "expression nested too deeply"},
		{"calls", "RULE DELETE WHERE " + strings.Repeat("LOWER(", 1000) + "NAME" + strings.Repeat(")", 1000) + " = 'a'", "expression nested too deeply"},
		{"case", "RULE DELETE WHERE " + strings.Repeat("CASE WHEN TRUE THEN ", 1000) + "1" + strings.Repeat(" END", 1000) + " = 1", "expression nested too deeply"},
		{"sum ok", chain(MaxHeight-3, "+"), ""},
		{"sum", chain(MaxHeight, "+"), "expression too deep (258 levels with its macros expanded, at most 256)"},
		{"long OR ok", "RULE DELETE WHERE " + strings.Repeat("NLINK = 1 OR ", 3000) + "TRUE", ""},
		{"wide", "RULE DELETE WHERE " + strings.Repeat("NLINK = 1 OR ", MaxNodes) + "TRUE", "expression too large"},
		{"big IN ok", "RULE DELETE WHERE NLINK IN (" + strings.Repeat("1, ", MaxNodes-10) + "1)", ""},
		{"source", strings.Repeat(" ", MaxSourceBytes+1), "policy of 262145 bytes: at most 262144 are accepted"},
		{"many rules", "DEFINE(m, NLINK IN (" + strings.Repeat("1,", 5000) + "1))\n" + strings.Repeat("RULE DELETE WHERE m\n", 50), "policy too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := Parse(tc.src, nil)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d) // a hang, not a timing assertion
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.err != "" && err == nil:
				t.Errorf("accepted, want %q", tc.err)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// TestMacroBlowup checks that macros, counted expanded, cannot make an
// expression grow exponentially: each macro uses the previous one twice.
func TestMacroBlowup(t *testing.T) {
	var b strings.Builder
	b.WriteString("DEFINE(m0, NLINK)\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "DEFINE(m%d, m%d + m%d)\n", i, i-1, i-1)
	}
	b.WriteString("RULE DELETE WHERE m40 > 1\n")
	got := parseErrors(t, b.String())
	if len(got) == 0 || !strings.Contains(got[0], "expression too large") && !strings.Contains(got[0], "expression too deep") {
		t.Fatalf("errors %q", got)
	}
	// Up to the limits it works, and evaluates.
	var ok strings.Builder
	ok.WriteString("DEFINE(m0, NLINK)\n")
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&ok, "DEFINE(m%d, m%d + m%d)\n", i, i-1, i-1)
	}
	ok.WriteString("RULE 'r' DELETE WHERE m10 = 1024\n")
	p := mustParse(t, ok.String())
	r, _ := p.Rule("r")
	if !r.Match(File{Known: AttrsAll, Nlink: 1}, time.Now()) {
		t.Error("m10 with NLINK 1 is not 1024")
	}
}

func TestRulesAPI(t *testing.T) {
	p := mustParse(t, `
RULE 'p' SET POOL 'fast' PROTECTION 'ec:4+2' WHERE NAME LIKE '%.db'
RULE MIGRATE FROM POOL 'fast' THRESHOLD(80,40.5) WEIGHT(KB_ALLOCATED) TO POOL 'capacity' LIMIT(90) WHERE (NLINK = 1)
RULE 'l' LIST 'big' WHERE FILE_SIZE > 1G
RULE DELETE`)
	rules := p.Rules()
	if len(rules) != 4 {
		t.Fatalf("%d rules", len(rules))
	}
	rules[0] = nil // a copy: the policy is not changed
	if p.Rules()[0] == nil {
		t.Fatal("Rules returned the policy's own slice")
	}
	m, ok := p.Rule("rule#2")
	if !ok || m.Kind() != KindMigrate || !m.Generated() || m.From() != "fast" || m.Pool() != "capacity" {
		t.Fatalf("rule#2: %v %v", m, ok)
	}
	if h, l, ok := m.Threshold(); !ok || h != 80 || l != 40.5 {
		t.Errorf("threshold %v %v %v", h, l, ok)
	}
	if lim, ok := m.Limit(); !ok || lim != 90 {
		t.Errorf("limit %v %v", lim, ok)
	}
	if m.Condition() != "NLINK = 1" || m.WeightExpr() != "KB_ALLOCATED" || m.Pos() != (Pos{3, 1}) {
		t.Errorf("condition %q weight %q pos %v", m.Condition(), m.WeightExpr(), m.Pos())
	}
	s, _ := p.Rule("p")
	if s.Kind().String() != "SET POOL" || s.Protection() != "ec:4+2" || s.Generated() {
		t.Errorf("p: %s %q", s.Kind(), s.Protection())
	}
	if _, _, ok := s.Threshold(); ok {
		t.Error("SET POOL has a threshold")
	}
	if l, _ := p.Rule("l"); l.List() != "big" {
		t.Errorf("list %q", l.List())
	}
	if d, _ := p.Rule("rule#4"); d.Condition() != "" || d.WeightExpr() != "" || !d.Match(File{}, time.Time{}) {
		t.Error("DELETE without WHERE")
	}
	if _, ok := p.Rule("nope"); ok {
		t.Error("found a rule that does not exist")
	}
	if got := m.String(); got != "RULE MIGRATE FROM POOL 'fast' THRESHOLD(80,40.5) WEIGHT(KB_ALLOCATED) TO POOL 'capacity' LIMIT(90) WHERE NLINK = 1" {
		t.Errorf("String: %s", got)
	}
	if _, err := s.Plan(PoolSpace{}, PoolSpace{}, nil); !errors.Is(err, ErrNotMigrate) {
		t.Errorf("Plan of SET POOL: %v", err)
	}
	if got := Kind(9).String(); got != "Kind(9)" {
		t.Error(got)
	}
}

// TestPlaceFirstWins checks that the first matching SET POOL rule wins and
// that other kinds are not placement.
func TestPlaceFirstWins(t *testing.T) {
	p := mustParse(t, `
RULE 'del' DELETE
RULE 'a' SET POOL 'x' WHERE NAME LIKE 'a%'
RULE 'any' SET POOL 'y'
RULE 'ab' SET POOL 'z' WHERE NAME LIKE 'ab%'`)
	now := time.Now()
	for name, want := range map[string]string{"abc": "a", "b": "any"} {
		pl, ok := p.Place(File{Known: AttrsAtCreate, Path: "/" + name}, now)
		if !ok || pl.Rule != want {
			t.Errorf("%s: placed by %q (%v), want %q", name, pl.Rule, ok, want)
		}
	}
	if r, ok := p.First(KindDelete, File{}, now); !ok || r.Name() != "del" {
		t.Errorf("First DELETE: %v %v", r, ok)
	}
	if _, ok := p.First(KindMigrate, File{}, now); ok {
		t.Error("First MIGRATE found one")
	}
}

// TestCatalog checks that the catalog is consulted for every pool and
// protection, and its error shown.
func TestCatalog(t *testing.T) {
	cat := testCatalog{pools: map[string]bool{"a": true}}
	_, err := Parse("RULE MIGRATE FROM POOL 'b' TO POOL 'a' PROTECTION 'ec:1'\nRULE SET POOL 'c'", cat)
	want := "policy: invalid policy: 3 errors\n" +
		"line 1, column 24: pool 'b' does not exist\n" +
		"line 1, column 51: PROTECTION 'ec:1' is not valid: want mirror:N or ec:K+M\n" +
		"line 2, column 15: pool 'c' does not exist"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// TestConcurrent evaluates one policy from many goroutines (run with
// -race).
func TestConcurrent(t *testing.T) {
	p := mustParse(t, "RULE 'r' SET POOL 'a' WHERE MODE LIKE '-%' AND NAME LIKE '%.x'")
	done := make(chan bool)
	for i := 0; i < 8; i++ {
		go func() {
			ok := true
			for j := 0; j < 1000; j++ {
				_, m := p.Place(File{Known: AttrsAll, Path: "/a.x", Mode: 0o100644}, time.Now())
				ok = ok && m
			}
			done <- ok
		}()
	}
	for i := 0; i < 8; i++ {
		if !<-done {
			t.Error("a placement failed")
		}
	}
}

func TestAttrSetString(t *testing.T) {
	if got := (AttrsAtCreate).String(); got != "PATH_NAME,NAME,USER_ID,GROUP_ID,MODE" {
		t.Error(got)
	}
	if got := AttrSet(0).String(); got != "none" {
		t.Error(got)
	}
	if got := AttrsAll.String(); !strings.HasSuffix(got, ",PROTECTION,XATTR") {
		t.Error(got)
	}
}
