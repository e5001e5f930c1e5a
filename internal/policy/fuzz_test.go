package policy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The fuzz targets. Their seed corpora are under testdata/fuzz/ (the
// datadriven files' policies, and what fuzzing found); run one with
//
//	go test ./internal/policy -run '^$' -fuzz '^FuzzParse$' -fuzztime 3m

// fuzzSeeds are policies every target starts from.
var fuzzSeeds = []string{
	`RULE 'default' SET POOL 'fast'
RULE 'big' SET POOL 'capacity' PROTECTION 'ec:8+2' WHERE NAME LIKE '%.tar' OR FILE_SIZE > 10G
RULE 'cold' MIGRATE FROM POOL 'fast' THRESHOLD(80,40) WEIGHT(KB_ALLOCATED) TO POOL 'capacity'
     WHERE (CURRENT_TIMESTAMP - ACCESS_TIME > INTERVAL '2' DAYS)
RULE 'warm' MIGRATE FROM POOL 'capacity' TO POOL 'fast' LIMIT(90)
     WHERE (CURRENT_TIMESTAMP - ACCESS_TIME < INTERVAL '1' HOURS)
RULE 'scratch' DELETE WHERE PATH_NAME LIKE '/scratch/%' AND MODIFICATION_TIME < CURRENT_TIMESTAMP - INTERVAL '30' DAYS
RULE 'big-list' LIST 'bigfiles' WHERE KB_ALLOCATED > 1048576
DEFINE(is_old, (CURRENT_TIMESTAMP - MODIFICATION_TIME > INTERVAL '7' DAYS))`,
	`DEFINE(age, CURRENT_TIMESTAMP - ACCESS_TIME) RULE MIGRATE WEIGHT(CASE WHEN age > INTERVAL '1' DAY THEN DAYS(age) ELSE -1 END) TO POOL 'archive' WHERE NAME NOT IN ('a', XATTR('user.x')) AND MODE LIKE '-%' AND NOT (NLINK BETWEEN 2 AND 3) OR USER_ID IS NULL`,
	`RULE DELETE WHERE LOWER(NAME) LIKE 'a\_%' ESCAPE '\' AND LENGTH(PATH_NAME) / 2 > -FILE_SIZE * 3 - - 1 AND ACCESS_TIME < TIMESTAMP '2026-01-02 03:04:05'`,
	`rule 'x' set pool 'fast' where file_size >= 1.5k;`,
}

// fuzzFiles are the files every parsed policy is evaluated on.
func fuzzFiles() []File {
	now := fuzzNow
	x := func(name string) (string, bool) {
		if name == "user.x" {
			return "a", true
		}
		return "", false
	}
	return []File{
		{},
		{Known: AttrsAtCreate, Path: "/a/b.tar", Mode: 0o100644, UID: 1},
		{Known: AttrsAll, Path: "/scratch/x", Size: 11 << 30, Allocated: 12 << 30, Access: now.Add(-72 * time.Hour),
			Modify: now.Add(-40 * 24 * time.Hour), Mode: 0o40755, Nlink: 2, Pool: "fast", Protection: "ec:4+2", Xattr: x},
		{Known: AttrsAll &^ AttrSize, Path: "/", Pool: "capacity", Xattr: x},
	}
}

var fuzzNow = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// checkParse checks what every Parse must give: a policy whose canonical
// form parses to itself, or errors sorted by position, in the text,
// at most MaxErrors.
func checkParse(t *testing.T, src string) *Policy {
	p, err := Parse(src, nil)
	if err != nil {
		var es *Errors
		if !errors.As(err, &es) || !errors.Is(err, ErrInvalid) {
			t.Fatalf("error %v is not an *Errors wrapping ErrInvalid", err)
		}
		if len(es.List) == 0 || len(es.List) > MaxErrors {
			t.Fatalf("%d errors listed", len(es.List))
		}
		lines := strings.Count(src, "\n") + 1
		for i, e := range es.List {
			if e.Pos.Line < 1 || e.Pos.Line > lines || e.Pos.Col < 1 {
				t.Fatalf("error %q at %s: outside the text of %d lines", e.Msg, e.Pos, lines)
			}
			if i > 0 && e.Pos.less(es.List[i-1].Pos) {
				t.Fatalf("errors not sorted: %s before %s", es.List[i-1].Pos, e.Pos)
			}
			if !utf8.ValidString(e.Msg) && utf8.ValidString(src) {
				t.Fatalf("message %q is not UTF-8", e.Msg)
			}
		}
		return nil
	}
	if !utf8.ValidString(src) {
		t.Fatalf("accepted text that is not UTF-8")
	}
	checkRoundTrip(t, "fuzz", p, nil)
	return p
}

// evalAll evaluates every rule of p on f, and checks that the canonical
// form q means the same.
func evalAll(t *testing.T, p, q *Policy, f File) {
	pr, qr := p.Rules(), q.Rules()
	for i, r := range pr {
		m, w := r.Match(f, fuzzNow), r.Weight(f, fuzzNow)
		if qm, qw := qr[i].Match(f, fuzzNow), qr[i].Weight(f, fuzzNow); m != qm || w != qw && !(w != w && qw != qw) {
			t.Fatalf("rule %s on %+v: match %v weight %v, canonical form: %v %v\n%s", r.Name(), f, m, w, qm, qw, p)
		}
		if r.Kind() == KindMigrate {
			if _, err := r.Plan(PoolSpace{100, 90}, PoolSpace{100, 10}, []Candidate{{Weight: w, Allocated: 5}, {Weight: 1, Allocated: 50}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, aok := p.Place(f, fuzzNow)
	b, bok := q.Place(f, fuzzNow)
	if a != b || aok != bok {
		t.Fatalf("Place: %v %v, canonical form: %v %v", a, aok, b, bok)
	}
}

// generatedSeeds are random well-typed policies (see exprGen).
func generatedSeeds() []string {
	g := &exprGen{r: rand.New(rand.NewPCG(3, 4))}
	var out []string
	for range 20 {
		out = append(out, fmt.Sprintf("RULE LIST 'l' WHERE %s\nRULE MIGRATE WEIGHT(%s) TO POOL 'p' PROTECTION 'ec:4+2'\n", g.gen(tyBool, 4), g.gen(tyNum, 3)))
	}
	return out
}

func FuzzParse(f *testing.F) {
	for _, s := range append(fuzzSeeds, generatedSeeds()...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		p := checkParse(t, src)
		if p == nil {
			return
		}
		q := mustParse(t, p.String())
		for _, file := range fuzzFiles() {
			evalAll(t, p, q, file)
		}
	})
}

// FuzzEval evaluates parsed policies on fuzzed files and checks the laws
// of three-valued logic: of c, NOT c and c IS NULL exactly one is TRUE.
func FuzzEval(f *testing.F) {
	for _, s := range append(fuzzSeeds, generatedSeeds()...) {
		f.Add(s, "/a/b.tar", int64(11<<30), int64(3600*50), uint32(0o100644), uint32(AttrsAll), "a")
		f.Add(s, "/scratch/x", int64(0), int64(-1), uint32(0o40755), uint32(AttrsAtCreate), "")
	}
	f.Fuzz(func(t *testing.T, src, path string, size, ageSec int64, mode, known uint32, xattr string) {
		p, err := Parse(src, nil)
		if err != nil {
			return
		}
		file := File{Known: AttrSet(known), Path: path, Size: size, Allocated: size / 3,
			Access: fuzzNow.Add(-time.Duration(ageSec) * time.Second), Modify: time.Unix(ageSec, 0),
			Create: time.Unix(0, ageSec), UID: uint32(size), GID: mode, Mode: mode, Nlink: uint32(ageSec),
			Pool: xattr, Protection: path,
			Xattr: func(name string) (string, bool) { return xattr, len(name)%2 == 0 }}
		q := mustParse(t, p.String())
		evalAll(t, p, q, file)

		// Each condition, its negation and its IS NULL as LIST rules.
		var b strings.Builder
		b.WriteString(p.String())
		var conds []string
		for i, r := range p.Rules() {
			if c := r.Condition(); c != "" {
				fmt.Fprintf(&b, "RULE 'fz%d-t' LIST 'x' WHERE (%s)\n", i, c)
				fmt.Fprintf(&b, "RULE 'fz%d-f' LIST 'x' WHERE NOT (%s)\n", i, c)
				fmt.Fprintf(&b, "RULE 'fz%d-n' LIST 'x' WHERE (%s) IS NULL\n", i, c)
				conds = append(conds, fmt.Sprintf("fz%d", i))
			}
		}
		laws, err := Parse(b.String(), nil)
		if err != nil {
			if strings.Contains(err.Error(), "too large") || strings.Contains(err.Error(), "too deep") {
				return
			}
			t.Fatalf("conditions of a valid policy do not parse: %v\n%s", err, b.String())
		}
		for _, c := range conds {
			n := 0
			for _, suffix := range []string{"-t", "-f", "-n"} {
				r, _ := laws.Rule(c + suffix)
				if r.Match(file, fuzzNow) {
					n++
				}
			}
			if n != 1 {
				r, _ := laws.Rule(c + "-t")
				t.Fatalf("%d of c, NOT c, c IS NULL are TRUE for c = %s", n, r.Condition())
			}
		}
	})
}

func FuzzLike(f *testing.F) {
	f.Add("%a_b%", `\`, "xxa✓bxx")
	f.Add(`a\%%`, `\`, "a%b")
	f.Add("%aa%a", "", "aaaa")
	f.Fuzz(func(t *testing.T, pat, esc, s string) {
		if len(pat) > 64 || len(s) > 256 {
			return // keep the regexp reference cheap
		}
		checkLikeAgainstRegexp(t, pat, esc, s)
	})
}
