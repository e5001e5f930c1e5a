package jobs

import (
	"flag"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/datadriven"
	"github.com/weftfs/weft/internal/meta"
)

var rewritePlan = flag.Bool("rewrite", false, "rewrite the expected output of datadriven tests")

// TestRebalancePlanDataDriven runs the scenarios under testdata/rebalance
// (datadriven format; `go test ./internal/jobs -run DataDriven -rewrite`
// rewrites the expected outputs: review the diff). Commands:
//
//	drives                input: "ID NODE POOL USED TOTAL" lines (sizes in
//	                      bytes, or with K, M, G: binary units); the drives
//	                      the next commands plan over
//	plan [pool=P]         planBalance: per pool its nodes, mean, sources
//	                      (drive:ppm), targets, members and task scope
//	                      (which must decode to the same plan)
//	decode                input: task scopes; each decoded and encoded
//	                      again, or its error
//	moves pool=P lin=N stripe=N
//	                      input: the drives of a stripe's units, in unit
//	                      order (unit i's block id starts with byte i+1);
//	                      stripeMoves of the pool's plan: each unit moved
//	                      with why, and the drives the moves may go to
//	wants pool=P          input: WDLs (drive ids); wantsFile of each
//	spread [pool=P]       poolSpreads
func TestRebalancePlanDataDriven(t *testing.T) {
	for _, f := range datadriven.Files(t, "testdata/rebalance") {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s := &planScenario{t: t}
			datadriven.RunFile(t, f, *rewritePlan, s.run)
		})
	}
}

// planScenario is the state of one file: the drives.
type planScenario struct {
	t      *testing.T
	drives []driveSpace
}

func (s *planScenario) run(c datadriven.Case) string {
	switch c.Cmd {
	case "drives":
		return s.setDrives(c)
	case "plan":
		var out []string
		for _, p := range planBalance(s.drives, c.Arg("pool", "")) {
			out = append(out, s.describe(c, p)...)
		}
		return strings.Join(out, "\n")
	case "decode":
		var out []string
		for _, scope := range c.Input {
			p, err := decodePlan(scope)
			if err != nil {
				out = append(out, "error: "+err.Error())
				continue
			}
			out = append(out, p.encode())
		}
		return strings.Join(out, "\n")
	case "moves":
		return s.moves(c)
	case "wants":
		p := s.plan(c)
		var out []string
		for _, line := range c.Input {
			out = append(out, fmt.Sprintf("%s: %v", line, p.wantsFile(s.ids(c, line), s.nodeOf())))
		}
		return strings.Join(out, "\n")
	case "spread":
		var out []string
		for _, sp := range poolSpreads(s.drives, c.Arg("pool", "")) {
			out = append(out, sp.String())
		}
		return strings.Join(out, "\n")
	}
	s.t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}

func (s *planScenario) setDrives(c datadriven.Case) string {
	s.drives = nil
	pools := map[string]bool{}
	for _, line := range c.Input {
		f := strings.Fields(line)
		if len(f) != 5 {
			s.t.Fatalf("%s: drive %q: want ID NODE POOL USED TOTAL", c.Pos, line)
		}
		id, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			s.t.Fatalf("%s: drive id %q: %v", c.Pos, f[0], err)
		}
		s.drives = append(s.drives, driveSpace{ID: meta.DriveID(id), Node: f[1], Pool: f[2], Used: s.size(c, f[3]), Total: s.size(c, f[4])})
		pools[f[2]] = true
	}
	return fmt.Sprintf("drives=%d pools=%d", len(s.drives), len(pools))
}

func (s *planScenario) size(c datadriven.Case, v string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(v, "K"):
		mult = 1 << 10
	case strings.HasSuffix(v, "M"):
		mult = 1 << 20
	case strings.HasSuffix(v, "G"):
		mult = 1 << 30
	}
	n, err := strconv.ParseInt(strings.TrimRight(v, "KMG"), 10, 64)
	if err != nil {
		s.t.Fatalf("%s: size %q: %v", c.Pos, v, err)
	}
	return n * mult
}

func (s *planScenario) ids(c datadriven.Case, line string) []meta.DriveID {
	var out []meta.DriveID
	for _, f := range strings.Fields(line) {
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			s.t.Fatalf("%s: drive %q: %v", c.Pos, f, err)
		}
		out = append(out, meta.DriveID(n))
	}
	return out
}

func (s *planScenario) nodeOf() map[meta.DriveID]string {
	m := map[meta.DriveID]string{}
	for _, d := range s.drives {
		m[d.ID] = d.Node
	}
	return m
}

// plan returns the plan of the command's pool.
func (s *planScenario) plan(c datadriven.Case) balancePlan {
	ps := planBalance(s.drives, c.Arg("pool", ""))
	if len(ps) != 1 {
		s.t.Fatalf("%s: %d plans; name one pool with pool=", c.Pos, len(ps))
	}
	return ps[0]
}

// describe prints a plan, checking that its scope decodes to it.
func (s *planScenario) describe(c datadriven.Case, p balancePlan) []string {
	scope := p.encode()
	back, err := decodePlan(scope)
	if err != nil || back.encode() != scope {
		s.t.Errorf("%s: scope %q does not round-trip: %q, %v", c.Pos, scope, back.encode(), err)
	}
	var src []string
	for _, id := range slices.Sorted(maps.Keys(p.Src)) {
		src = append(src, fmt.Sprintf("%d:%d", id, p.Src[id]))
	}
	return []string{
		fmt.Sprintf("pool %s: drives=%d nodes=%d mean=%.2f%% balanced=%v", p.Pool, len(p.Member), p.Nodes, p.Mean*100, p.balanced()),
		"  src: " + orNone(strings.Join(src, " ")),
		"  dst: " + orNone(joinIDs(p.Dst)),
		"  scope: " + scope,
	}
}

func (s *planScenario) moves(c datadriven.Case) string {
	p := s.plan(c)
	lin, err1 := strconv.ParseUint(c.Arg("lin", "1"), 10, 64)
	idx, err2 := strconv.ParseUint(c.Arg("stripe", "0"), 10, 64)
	if err1 != nil || err2 != nil || len(c.Input) != 1 {
		s.t.Fatalf("%s: moves needs lin=N stripe=N and one input line of drives", c.Pos)
	}
	st := meta.Stripe{Index: idx}
	for i, d := range s.ids(c, c.Input[0]) {
		u := meta.Unit{Drive: d, Length: 1 << 20}
		u.Block[0] = byte(i + 1)
		st.Units = append(st.Units, u)
	}
	nodeOf := s.nodeOf()
	ms, allow := p.stripeMoves(meta.LIN(lin), st, nodeOf)
	if len(ms) == 0 {
		return "none"
	}
	var out []string
	for _, m := range ms {
		i := slices.IndexFunc(st.Units, func(u meta.Unit) bool { return u.Drive == m.Drive && u.Block == m.Block })
		out = append(out, fmt.Sprintf("unit %d (drive %d on %s): %s", i, m.Drive, nodeOf[m.Drive], m.Why))
	}
	ok := map[meta.DriveID]bool{}
	for d := range p.Member {
		if allow(d) {
			ok[d] = true
		}
	}
	return strings.Join(append(out, "allow: "+orNone(joinIDs(ok))), "\n")
}

// orNone is s, or "-" for an empty list.
func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// joinIDs lists the drives of a set in order.
func joinIDs(m map[meta.DriveID]bool) string {
	var out []string
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out = append(out, strconv.FormatUint(uint64(id), 10))
	}
	return strings.Join(out, " ")
}
