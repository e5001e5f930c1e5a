package policy

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/datadriven"
)

// The files under testdata/ (not its fuzz/ corpus) are scenarios in the
// datadriven format (see internal/datadriven). Run
// `go test ./internal/policy -run DataDriven -rewrite` to rewrite the
// expected outputs after an intended change, and review the diff.
//
// Commands:
//
//	parse [pools=a,b] [nocatalog]
//	                      input: a policy. Prints its canonical form, or
//	                      its errors; checks that the canonical form parses
//	                      to the same policy.
//	policy [pools=...]    input: a policy, which later commands use. Prints
//	                      its rules' names and kinds and what it needs, or
//	                      its errors.
//	eval now=TIME         input: one file a line, "PATH key=value ...";
//	                      prints the file's placement, the rules it
//	                      matches and the MIGRATE rules' weights. Keys:
//	                      size= alloc= (sizes: 10G), atime= mtime= ctime=
//	                      crtime= (RFC 3339, or -3d -2h -30m -10s from now),
//	                      uid= gid= nlink=, mode= (-rw-r--r-- or octal
//	                      0100644), pool= prot=, x.NAME=VALUE (an xattr),
//	                      known=all|create|ATTR,ATTR (default all).
//	threshold rule=NAME src=SIZE/USED dst=SIZE/USED
//	                      input: candidates "id weight allocated
//	                      [target-bytes]"; prints the rule's plan.
//
// The catalog knows the pools fast, capacity and archive (or pools=), and
// protections ec:K+M and mirror:N.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of datadriven tests")

func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.IsDir() {
			continue
		}
		n++
		t.Run(filepath.Base(f), func(t *testing.T) {
			s := &scenario{}
			datadriven.RunFile(t, f, *rewrite, func(c datadriven.Case) string { return s.run(t, c) })
		})
	}
	if n == 0 {
		t.Fatal("no testdata")
	}
}

// testCatalog is the datadriven tests' Catalog.
type testCatalog struct{ pools map[string]bool }

var _ Catalog = testCatalog{}

var protRE = regexp.MustCompile(`^(ec:[1-9][0-9]?\+[1-9]|mirror:[1-6])$`)

func (c testCatalog) PoolExists(name string) bool { return c.pools[name] }

func (c testCatalog) ValidProtection(spec string) error {
	if !protRE.MatchString(spec) {
		return errors.New("want mirror:N or ec:K+M")
	}
	return nil
}

func newTestCatalog(pools string) testCatalog {
	c := testCatalog{pools: map[string]bool{}}
	for _, p := range strings.Split(pools, ",") {
		c.pools[p] = true
	}
	return c
}

// scenario is the state of one datadriven file: the current policy.
type scenario struct {
	pol *Policy
}

func (s *scenario) run(t *testing.T, c datadriven.Case) string {
	switch c.Cmd {
	case "parse":
		return parseCmd(t, c)
	case "policy":
		return s.policyCmd(c)
	case "eval":
		return s.evalCmd(t, c)
	case "threshold":
		return s.thresholdCmd(t, c)
	}
	t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}

func catalogOf(c datadriven.Case) Catalog {
	if _, ok := c.Args["nocatalog"]; ok {
		return nil
	}
	return newTestCatalog(c.Arg("pools", "fast,capacity,archive"))
}

// errorLines prints a Parse error one problem a line.
func errorLines(t *testing.T, err error) string {
	var es *Errors
	if !errors.As(err, &es) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Parse error %v is not an *Errors wrapping ErrInvalid", err)
	}
	var b strings.Builder
	for _, e := range es.List {
		b.WriteString("error: " + e.Error() + "\n")
	}
	if es.Omitted > 0 {
		fmt.Fprintf(&b, "(%d more)\n", es.Omitted)
	}
	return b.String()
}

func parseCmd(t *testing.T, c datadriven.Case) string {
	src := strings.Join(c.Input, "\n")
	cat := catalogOf(c)
	p, err := Parse(src, cat)
	if err != nil {
		return errorLines(t, err)
	}
	out := p.String()
	checkRoundTrip(t, c.Pos, p, cat)
	if out == "" {
		// An empty output would make RunFile's rewrite add a blank line.
		return "(no statements)"
	}
	return out
}

// checkRoundTrip checks that p's canonical form parses to a policy that
// prints the same, with the same rules.
func checkRoundTrip(t testing.TB, where string, p *Policy, cat Catalog) {
	t.Helper()
	out := p.String()
	q, err := Parse(out, cat)
	if err != nil {
		t.Fatalf("%s: the canonical form does not parse: %v\n%s", where, err, out)
	}
	if q.String() != out {
		t.Fatalf("%s: the canonical form prints differently:\n%s\nthen:\n%s", where, out, q.String())
	}
	pr, qr := p.Rules(), q.Rules()
	if len(pr) != len(qr) {
		t.Fatalf("%s: %d rules, then %d", where, len(pr), len(qr))
	}
	for i := range pr {
		if a, b := ruleSummary(pr[i]), ruleSummary(qr[i]); a != b {
			t.Fatalf("%s: rule %d was %s, then %s", where, i, a, b)
		}
	}
}

// ruleSummary prints a rule's kind and parameters through its accessors.
func ruleSummary(r *Rule) string {
	h, l, th := r.Threshold()
	lim, hasLim := r.Limit()
	return fmt.Sprintf("%s %s gen=%v pool=%q prot=%q from=%q list=%q threshold=%v,%v,%v limit=%v,%v where=%q weight=%q",
		r.Name(), r.Kind(), r.Generated(), r.Pool(), r.Protection(), r.From(), r.List(), th, h, l, hasLim, lim,
		r.Condition(), r.WeightExpr())
}

func (s *scenario) policyCmd(c datadriven.Case) string {
	p, err := Parse(strings.Join(c.Input, "\n"), catalogOf(c))
	if err != nil {
		s.pol = nil
		var b strings.Builder
		for _, e := range err.(*Errors).List {
			b.WriteString("error: " + e.Error() + "\n")
		}
		return b.String()
	}
	s.pol = p
	var b strings.Builder
	for _, r := range p.Rules() {
		fmt.Fprintf(&b, "%s: %s\n", r.Name(), r.Kind())
	}
	needs, xattrs := p.Needs()
	fmt.Fprintf(&b, "needs: %s", needs)
	if len(xattrs) > 0 {
		fmt.Fprintf(&b, " xattrs: %s", strings.Join(xattrs, ","))
	}
	return b.String()
}

func (s *scenario) evalCmd(t *testing.T, c datadriven.Case) string {
	if s.pol == nil {
		t.Fatalf("%s: eval without a valid policy", c.Pos)
	}
	now, err := time.Parse(time.RFC3339, c.Arg("now", "2026-03-01T00:00:00Z"))
	if err != nil {
		t.Fatalf("%s: now: %v", c.Pos, err)
	}
	var b strings.Builder
	for _, line := range c.Input {
		f := parseFile(t, c, line, now)
		b.WriteString(f.Path + ":")
		if pl, ok := s.pol.Place(f, now); ok {
			fmt.Fprintf(&b, " place %s→%s", pl.Rule, pl.Pool)
			if pl.Protection != "" {
				b.WriteString("/" + pl.Protection)
			}
			b.WriteString(";")
		}
		var matched []string
		all := s.pol.Matching(f, now, nil)
		for _, r := range s.pol.Rules() {
			if r.Match(f, now) != slices.Contains(all, r) {
				t.Fatalf("%s: %s: rule %s: Match and Matching disagree", c.Pos, f.Path, r.Name())
			}
			if !r.Match(f, now) {
				continue
			}
			m := r.Name()
			if r.Kind() == KindMigrate && r.WeightExpr() != "" {
				m += fmt.Sprintf("(w=%s)", fmtNum(r.Weight(f, now)))
			}
			matched = append(matched, m)
		}
		if len(matched) == 0 {
			b.WriteString(" matches nothing\n")
		} else {
			b.WriteString(" matches " + strings.Join(matched, " ") + "\n")
		}
	}
	return b.String()
}

// parseFile parses an eval line: "PATH key=value ...".
func parseFile(t *testing.T, c datadriven.Case, line string, now time.Time) File {
	fields := strings.Fields(line)
	f := File{Known: AttrsAll, Path: fields[0]}
	xattrs := map[string]string{}
	for _, kv := range fields[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("%s: %q is not key=value", c.Pos, kv)
		}
		var err error
		switch k {
		case "name":
			f.Name = v
		case "size":
			f.Size = parseSize(t, c, v)
		case "alloc":
			f.Allocated = parseSize(t, c, v)
		case "atime":
			f.Access = parseTime(t, c, v, now)
		case "mtime":
			f.Modify = parseTime(t, c, v, now)
		case "ctime":
			f.Change = parseTime(t, c, v, now)
		case "crtime":
			f.Create = parseTime(t, c, v, now)
		case "uid", "gid", "nlink":
			var n uint64
			n, err = strconv.ParseUint(v, 10, 32)
			switch k {
			case "uid":
				f.UID = uint32(n)
			case "gid":
				f.GID = uint32(n)
			default:
				f.Nlink = uint32(n)
			}
		case "mode":
			f.Mode = parseMode(t, c, v)
		case "pool":
			f.Pool = v
		case "prot":
			f.Protection = v
		case "known":
			f.Known = parseKnown(t, c, v)
		default:
			name, ok := strings.CutPrefix(k, "x.")
			if !ok {
				t.Fatalf("%s: unknown file key %q", c.Pos, k)
			}
			xattrs[name] = v
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", c.Pos, kv, err)
		}
	}
	f.Xattr = func(name string) (string, bool) { v, ok := xattrs[name]; return v, ok }
	return f
}

func parseKnown(t *testing.T, c datadriven.Case, v string) AttrSet {
	switch v {
	case "all":
		return AttrsAll
	case "create":
		return AttrsAtCreate
	case "none":
		return 0
	}
	var s AttrSet
	for _, name := range strings.Split(v, ",") {
		a, ok := lookupAttr(name)
		switch {
		case ok:
			s |= attrs[a].set
		case strings.EqualFold(name, "XATTR"):
			s |= AttrXattrs
		default:
			t.Fatalf("%s: unknown attribute %q in known=", c.Pos, name)
		}
	}
	return s
}

func parseTime(t *testing.T, c datadriven.Case, v string, now time.Time) time.Time {
	if strings.HasPrefix(v, "-") || strings.HasPrefix(v, "+") {
		unit := map[byte]time.Duration{'d': 24 * time.Hour, 'h': time.Hour, 'm': time.Minute, 's': time.Second}[v[len(v)-1]]
		n, err := strconv.ParseFloat(v[:len(v)-1], 64)
		if unit == 0 || err != nil {
			t.Fatalf("%s: relative time %q: want -3d, -2h, -30m or -10s", c.Pos, v)
		}
		return now.Add(time.Duration(n * float64(unit)))
	}
	if v == "zero" {
		return time.Time{}
	}
	ts, err := time.Parse(time.RFC3339, v)
	if err != nil {
		t.Fatalf("%s: time %q: %v", c.Pos, v, err)
	}
	return ts
}

// parseMode parses an octal st_mode or an ls-style "-rw-r--r--".
func parseMode(t *testing.T, c datadriven.Case, v string) uint32 {
	if v != "" && v[0] >= '0' && v[0] <= '7' {
		n, err := strconv.ParseUint(v, 8, 32)
		if err != nil {
			t.Fatalf("%s: mode %q: %v", c.Pos, v, err)
		}
		return uint32(n)
	}
	for m := uint32(0); m < 1<<16; m++ {
		if FormatMode(m) == v {
			return m
		}
	}
	t.Fatalf("%s: mode %q is no ls mode", c.Pos, v)
	return 0
}

const sizeSuffixes = "KMGT"

// parseSize parses 123, 4K, 1M, 2G, 1T (powers of 1024).
func parseSize(t *testing.T, c datadriven.Case, s string) int64 {
	mult := int64(1)
	if i := strings.LastIndexAny(s, sizeSuffixes); i >= 0 && i == len(s)-1 {
		s, mult = s[:i], int64(1)<<(10*(strings.IndexByte(sizeSuffixes, s[i])+1))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: size %q: %v", c.Pos, s, err)
	}
	return n * mult
}

func formatSize(n int64) string {
	if n == 0 {
		return "0"
	}
	for i := len(sizeSuffixes) - 1; i >= 0; i-- {
		if u := int64(1) << (10 * (i + 1)); n%u == 0 {
			return fmt.Sprintf("%d%c", n/u, sizeSuffixes[i])
		}
	}
	return strconv.FormatInt(n, 10)
}

func (s *scenario) thresholdCmd(t *testing.T, c datadriven.Case) string {
	if s.pol == nil {
		t.Fatalf("%s: threshold without a valid policy", c.Pos)
	}
	r, ok := s.pol.Rule(c.Arg("rule", ""))
	if !ok {
		t.Fatalf("%s: no rule %q", c.Pos, c.Arg("rule", ""))
	}
	space := func(key string) PoolSpace {
		size, used, ok := strings.Cut(c.Arg(key, ""), "/")
		if !ok {
			t.Fatalf("%s: %s= wants SIZE/USED", c.Pos, key)
		}
		return PoolSpace{Size: parseSize(t, c, size), Used: parseSize(t, c, used)}
	}
	src, dst := space("src"), space("dst")
	var ids []string
	var cands []Candidate
	for _, line := range c.Input {
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Fatalf("%s: candidate %q: want id weight allocated [target]", c.Pos, line)
		}
		w, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("%s: weight %q: %v", c.Pos, f[1], err)
		}
		cd := Candidate{Weight: w, Allocated: parseSize(t, c, f[2])}
		if len(f) > 3 {
			cd.TargetBytes = parseSize(t, c, f[3])
		}
		ids = append(ids, f[0])
		cands = append(cands, cd)
	}
	pl, err := r.Plan(src, dst, cands)
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	pct := func(used, size int64) string {
		if size == 0 {
			return "-"
		}
		return strconv.FormatFloat(float64(used)*100/float64(size), 'f', 1, 64) + "%"
	}
	fmt.Fprintf(&b, "triggered=%v stop=%s\n", pl.Triggered, pl.Stop)
	var take []string
	for _, i := range pl.Take {
		take = append(take, ids[i])
	}
	if len(take) == 0 {
		take = []string{"-"}
	}
	fmt.Fprintf(&b, "take: %s\n", strings.Join(take, " "))
	fmt.Fprintf(&b, "bytes=%s skipped=%d\n", formatSize(pl.Bytes), pl.Skipped)
	fmt.Fprintf(&b, "source %s → %s (%s → %s)\n", formatSize(src.Used), formatSize(pl.SourceUsed), pct(src.Used, src.Size), pct(pl.SourceUsed, src.Size))
	fmt.Fprintf(&b, "target %s → %s (%s → %s)", formatSize(dst.Used), formatSize(pl.TargetUsed), pct(dst.Used, dst.Size), pct(pl.TargetUsed, dst.Size))
	return b.String()
}
