package policy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// exprGen writes random well-typed expressions, every operation in
// parentheses, so that the parse does not depend on precedence: the
// canonical form, which keeps only the parentheses it needs, must mean
// the same (TestCanonicalMeansTheSame).
type exprGen struct {
	r *rand.Rand
}

func (g *exprGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *exprGen) gen(t typ, depth int) string {
	leaf := depth <= 0 || g.r.IntN(3) == 0
	switch t {
	case tyBool:
		if leaf {
			return g.pick("TRUE", "FALSE", "(NLINK > 1)", "(XATTR('user.a') IS NULL)", "(FILE_SIZE IS NOT NULL)")
		}
		d := depth - 1
		switch g.r.IntN(11) {
		case 0:
			return "(NOT " + g.gen(tyBool, d) + ")"
		case 1:
			return "(" + g.gen(tyBool, d) + g.pick(" AND ", " OR ") + g.gen(tyBool, d) + ")"
		case 2:
			ty := []typ{tyNum, tyStr, tyTime, tyInterval}[g.r.IntN(4)]
			return "(" + g.gen(ty, d) + " " + g.pick("=", "<>", "<", "<=", ">", ">=") + " " + g.gen(ty, d) + ")"
		case 3:
			return "(" + g.gen(tyStr, d) + g.pick(" LIKE ", " NOT LIKE ") + g.pick("'%a%'", "'_b%'", "'%'", "'a'", g.gen(tyStr, d)) + ")"
		case 4:
			return "(" + g.gen(tyNum, d) + g.pick(" IN (", " NOT IN (") + g.gen(tyNum, d) + ", " + g.gen(tyNum, d) + "))"
		case 5:
			return "(" + g.gen(tyStr, d) + g.pick(" IN (", " NOT IN (") + g.pick("'a'", "'b'", g.gen(tyStr, d)) + ", 'x'))"
		case 6:
			return "(" + g.gen(tyNum, d) + g.pick(" BETWEEN ", " NOT BETWEEN ") + g.gen(tyNum, d) + " AND " + g.gen(tyNum, d) + ")"
		case 7:
			return "(" + g.gen(tyBool, d) + g.pick(" IS NULL)", " IS NOT NULL)")
		case 8:
			return "(" + g.gen(tyInterval, d) + " " + g.pick("<", ">") + " " + g.gen(tyInterval, d) + ")"
		case 9:
			return "(CASE WHEN " + g.gen(tyBool, d) + " THEN " + g.gen(tyBool, d) + g.pick("", " ELSE "+g.gen(tyBool, d)) + " END)"
		default:
			return "((" + g.gen(tyBool, d) + g.pick(" AND ", " OR ") + g.gen(tyBool, d) + ")" + g.pick(" AND ", " OR ") + g.gen(tyBool, d) + ")"
		}
	case tyNum:
		if leaf {
			return g.pick("1", "0", "2.5", "10K", "1G", "FILE_SIZE", "NLINK", "USER_ID", "KB_ALLOCATED", "GROUP_ID")
		}
		d := depth - 1
		switch g.r.IntN(7) {
		case 0, 1:
			return "(" + g.gen(tyNum, d) + " " + g.pick("+", "-", "*", "/") + " " + g.gen(tyNum, d) + ")"
		case 2:
			return "(-" + g.gen(tyNum, d) + ")"
		case 3:
			return "LENGTH(" + g.gen(tyStr, d) + ")"
		case 4:
			return g.pick("DAYS(", "HOURS(", "MINUTES(", "SECONDS(") + g.gen(tyInterval, d) + ")"
		case 5:
			return "(" + g.gen(tyInterval, d) + " / " + g.gen(tyInterval, d) + ")"
		default:
			return "(CASE WHEN " + g.gen(tyBool, d) + " THEN " + g.gen(tyNum, d) + g.pick("", " ELSE "+g.gen(tyNum, d)) + " END)"
		}
	case tyStr:
		if leaf {
			return g.pick("'a'", "'ab'", "''", "NAME", "PATH_NAME", "MODE", "POOL_NAME", "PROTECTION", "XATTR('user.a')", "XATTR('user.b')")
		}
		d := depth - 1
		switch g.r.IntN(3) {
		case 0:
			return g.pick("LOWER(", "UPPER(") + g.gen(tyStr, d) + ")"
		case 1:
			return "(CASE WHEN " + g.gen(tyBool, d) + " THEN " + g.gen(tyStr, d) + g.pick("", " ELSE "+g.gen(tyStr, d)) + " END)"
		default:
			return g.gen(tyStr, 0)
		}
	case tyTime:
		if leaf {
			return g.pick("CURRENT_TIMESTAMP", "ACCESS_TIME", "MODIFICATION_TIME", "CREATION_TIME", "TIMESTAMP '2026-02-01 12:00:00'")
		}
		d := depth - 1
		if g.r.IntN(2) == 0 {
			return "(" + g.gen(tyTime, d) + " " + g.pick("+", "-") + " " + g.gen(tyInterval, d) + ")"
		}
		return "(" + g.gen(tyInterval, d) + " + " + g.gen(tyTime, d) + ")"
	case tyInterval:
		if leaf {
			return g.pick("INTERVAL '2' DAYS", "INTERVAL '1' HOUR", "INTERVAL '-30' MINUTES", "INTERVAL '0' SECONDS")
		}
		d := depth - 1
		switch g.r.IntN(5) {
		case 0:
			return "(" + g.gen(tyTime, d) + " - " + g.gen(tyTime, d) + ")"
		case 1:
			return "(" + g.gen(tyInterval, d) + " " + g.pick("+", "-") + " " + g.gen(tyInterval, d) + ")"
		case 2:
			return "(" + g.gen(tyInterval, d) + " " + g.pick("*", "/") + " " + g.gen(tyNum, d) + ")"
		case 3:
			return "(" + g.gen(tyNum, d) + " * " + g.gen(tyInterval, d) + ")"
		default:
			return "(-" + g.gen(tyInterval, d) + ")"
		}
	}
	panic("type")
}

// randomFile returns a file with random attributes, some unknown.
func randomFile(r *rand.Rand, now time.Time) File {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	ago := func() time.Time {
		if r.IntN(8) == 0 {
			return time.Time{}
		}
		return now.Add(-time.Duration(r.IntN(10*24*3600)) * time.Second)
	}
	xa := pick("a", "ab", "x")
	return File{
		Known: AttrSet(r.Uint32())&AttrsAll | AttrSet(r.IntN(2))*AttrsAll,
		Path:  pick("/a", "/x/ab", "/A/b.tar", "/"), Size: int64(r.IntN(3) * 1024), Allocated: int64(r.IntN(3000)),
		Access: ago(), Modify: ago(), Create: ago(), Change: ago(),
		UID: uint32(r.IntN(3)), GID: uint32(r.IntN(2)), Mode: uint32(r.IntN(1 << 16)), Nlink: uint32(r.IntN(3)),
		Pool: pick("fast", "a"), Protection: pick("ec:4+2", "ab"),
		Xattr: func(name string) (string, bool) { return xa, name == "user.a" },
	}
}

func TestCanonicalMeansTheSame(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	g := &exprGen{r: r}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	files := make([]File, 50)
	for i := range files {
		files[i] = randomFile(r, now)
	}
	for i := 0; i < 2000; i++ {
		src := fmt.Sprintf("RULE 'c' LIST 'l' WHERE %s\nRULE 'w' MIGRATE WEIGHT(%s) TO POOL 'p'\n", g.gen(tyBool, 5), g.gen(tyNum, 4))
		p, err := Parse(src, nil)
		if err != nil {
			t.Fatalf("generated policy refused: %v\n%s", err, src)
		}
		canon := p.String()
		if strings.Count(canon, "(") > strings.Count(src, "(") {
			t.Fatalf("canonical form has more parentheses than the source:\n%s\n%s", src, canon)
		}
		q, err := Parse(canon, nil)
		if err != nil || q.String() != canon {
			t.Fatalf("canonical form does not round-trip (%v):\n%s", err, canon)
		}
		for _, f := range files {
			evalAll(t, p, q, f)
		}
	}
}
