package placement

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/datadriven"
	"github.com/weftfs/weft/internal/erasure"
)

// The files under testdata/ are scenarios in the datadriven format (as in
// cockroachdb/datadriven, kept in-house to stay off go.mod):
//
//	# comment
//	command key=value ...
//	input lines
//	----
//	expected output (no blank lines)
//	<blank line>
//
// Run `go test ./internal/placement -run DataDriven -rewrite` to rewrite the
// expected outputs after an intended change, and review the diff.
//
// Commands:
//
//	pool                  input: "node: drive drive ..." lines; a drive is
//	                      ID[,down][,suspended][,free=SIZE] (default free 1T)
//	place prot=P [seed=N] [small] [unit=SIZE] [exclude=ID,..] [existing=ID,..]
//	                      one stripe of P (a full stripe, or with small a
//	                      stripe under one unit); existing= repairs the
//	                      stripe keeping those drives' units
//	spread prot=P stripes=N [seed=N]
//	                      N stripes; prints units per drive
//	tolerance needed=N    input: "drive node" lines
//	target prot=P [small] TargetTolerance of a stripe of P over the pool
//	move prot=P [pending=N]
//	                      Spread: input, the drive ids of the stripe's
//	                      units (in the pool); prints the units to move
//	                      and the tolerance once Place re-placed them
//
// ddCase is one command of a datadriven file.
type ddCase = datadriven.Case

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of datadriven tests")

func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s := &scenario{}
			datadriven.RunFile(t, f, *rewrite, func(c ddCase) string { return s.run(t, c) })
		})
	}
}

// scenario is the state of one datadriven file: the current pool.
type scenario struct {
	pool []Candidate
}

func (s *scenario) run(t *testing.T, c ddCase) string {
	switch c.Cmd {
	case "pool":
		return s.setPool(t, c)
	case "place":
		return s.place(t, c)
	case "spread":
		return s.spread(t, c)
	case "tolerance":
		return tolerance(t, c)
	case "target":
		req := s.request(t, c)
		return TargetTolerance(s.pool, req.Width, req.Needed).String()
	case "move":
		return s.move(t, c)
	}
	t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}

func (s *scenario) setPool(t *testing.T, c ddCase) string {
	s.pool = nil
	nodes := 0
	for _, line := range c.Input {
		name, drives, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("%s: pool line %q: want node: drives", c.Pos, line)
		}
		nodes++
		for _, d := range strings.Fields(drives) {
			attrs := strings.Split(d, ",")
			id, err := strconv.ParseUint(attrs[0], 10, 32)
			if err != nil {
				t.Fatalf("%s: drive %q: %v", c.Pos, d, err)
			}
			cd := Candidate{ID: DriveID(id), Node: strings.TrimSpace(name), FreeBytes: tib, TotalBytes: 2 * tib, Up: true, Usable: true}
			for _, a := range attrs[1:] {
				switch k, v, _ := strings.Cut(a, "="); k {
				case "down":
					cd.Up = false
				case "suspended":
					cd.Usable = false
				case "free":
					cd.FreeBytes = parseSize(t, c, v)
				default:
					t.Fatalf("%s: unknown drive attribute %q", c.Pos, a)
				}
			}
			s.pool = append(s.pool, cd)
		}
	}
	return fmt.Sprintf("drives=%d nodes=%d", len(s.pool), nodes)
}

// request builds the request of a place or spread command.
func (s *scenario) request(t *testing.T, c ddCase) Request {
	p, err := erasure.ParseProtection(c.Args["prot"])
	if err != nil {
		t.Fatalf("%s: %v", c.Pos, err)
	}
	g := erasure.Geometry{Protection: p}
	if v, ok := c.Args["unit"]; ok {
		g.UnitSize = int(parseSize(t, c, v))
	}
	n := int(g.StripeDataSize())
	if _, ok := c.Args["small"]; ok {
		n = g.Unit() / 2
	}
	l := g.Layout(n)
	seed, _ := strconv.ParseUint(c.Args["seed"], 10, 64)
	req := Request{
		Candidates: s.pool, Width: l.Width(), Min: l.MinPlaced(), Needed: l.Needed(),
		UnitBytes: int64(l.UnitLen), Label: l.String(), Rand: rand.New(rand.NewPCG(seed, 0)),
		Exclude: ids(t, c, c.Args["exclude"]),
	}
	for _, id := range ids(t, c, c.Args["existing"]) {
		i := slices.IndexFunc(s.pool, func(cd Candidate) bool { return cd.ID == id })
		if i < 0 {
			t.Fatalf("%s: existing drive %d not in pool", c.Pos, id)
		}
		req.Existing = append(req.Existing, Unit{Drive: id, Node: s.pool[i].Node})
	}
	if k := len(req.Existing); k > 0 {
		req.Width -= k
		req.Min = max(1, req.Min-k)
	}
	return req
}

func (s *scenario) place(t *testing.T, c ddCase) string {
	req := s.request(t, c)
	res, err := Place(req)
	if err != nil {
		if !errors.Is(err, ErrNotEnoughDrives) {
			t.Fatalf("%s: %v", c.Pos, err)
		}
		return "error: " + err.Error()
	}
	checkInvariants(t, req, res)
	var b strings.Builder
	b.WriteString("units:")
	for i, d := range res.Drives {
		fmt.Fprintf(&b, " %d@%s", d, res.Nodes[i])
	}
	fmt.Fprintf(&b, "\nper node: %s\nplaced %d of %d", perNode(res), res.Placed, req.Width)
	if res.UnderProtected {
		b.WriteString(" (under-protected)")
	}
	fmt.Fprintf(&b, ", tolerance %v", res.Tolerance)
	return b.String()
}

func (s *scenario) spread(t *testing.T, c ddCase) string {
	stripes, err := strconv.Atoi(c.Args["stripes"])
	if err != nil {
		t.Fatalf("%s: stripes: %v", c.Pos, err)
	}
	req := s.request(t, c)
	counts := map[DriveID]int{}
	for range stripes {
		res, err := Place(req)
		if err != nil {
			t.Fatalf("%s: %v", c.Pos, err)
		}
		checkInvariants(t, req, res)
		for _, d := range res.Drives {
			counts[d]++
		}
	}
	var b strings.Builder
	for _, cd := range s.pool {
		fmt.Fprintf(&b, "%s/%d free=%s units=%d\n", cd.Node, cd.ID, formatSize(cd.FreeBytes), counts[cd.ID])
	}
	return b.String()
}

// move runs Spread on the stripe whose units are on the input's drives,
// then Place for the units it moves (and the pending ones) and prints
// the units moved and the stripe's tolerance before and after.
func (s *scenario) move(t *testing.T, c ddCase) string {
	req := s.request(t, c)
	var units []Unit
	for _, line := range c.Input {
		for _, id := range ids(t, c, strings.Join(strings.Fields(line), ",")) {
			i := slices.IndexFunc(s.pool, func(cd Candidate) bool { return cd.ID == id })
			if i < 0 {
				t.Fatalf("%s: drive %d not in pool", c.Pos, id)
			}
			units = append(units, Unit{Drive: id, Node: s.pool[i].Node})
		}
	}
	pending, _ := strconv.Atoi(c.Args["pending"])
	moved := Spread(units, pending, s.pool, req.Needed, req.UnitBytes)
	var b strings.Builder
	fmt.Fprintf(&b, "before: %v\n", ComputeTolerance(units, req.Needed))
	if len(moved) == 0 && pending == 0 {
		b.WriteString("move: none")
		return b.String()
	}
	var kept []Unit
	var exclude []DriveID
	b.WriteString("move:")
	for i, u := range units {
		if slices.Contains(moved, i) {
			fmt.Fprintf(&b, " %d@%s", u.Drive, u.Node)
			exclude = append(exclude, u.Drive)
		} else {
			kept = append(kept, u)
		}
	}
	if len(moved) == 0 {
		b.WriteString(" none")
	}
	req.Existing, req.Exclude = kept, exclude
	req.Width, req.Min = len(moved)+pending, 1
	res, err := Place(req)
	if err != nil {
		t.Fatalf("%s: %v", c.Pos, err)
	}
	var to []string
	for i, d := range res.Drives {
		to = append(to, fmt.Sprintf("%d@%s", d, res.Nodes[i]))
	}
	fmt.Fprintf(&b, "\nto: %s\nafter: %v", strings.Join(to, " "), res.Tolerance)
	return b.String()
}

func tolerance(t *testing.T, c ddCase) string {
	needed, err := strconv.Atoi(c.Args["needed"])
	if err != nil {
		t.Fatalf("%s: needed: %v", c.Pos, err)
	}
	var us []Unit
	for _, line := range c.Input {
		var u Unit
		if _, err := fmt.Sscan(line, &u.Drive, &u.Node); err != nil {
			t.Fatalf("%s: unit %q: %v", c.Pos, line, err)
		}
		us = append(us, u)
	}
	return ComputeTolerance(us, needed).String()
}

func ids(t *testing.T, c ddCase, s string) []DriveID {
	var out []DriveID
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		id, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			t.Fatalf("%s: drive id %q: %v", c.Pos, f, err)
		}
		out = append(out, DriveID(id))
	}
	return out
}

const sizeSuffixes = "KMGT"

// parseSize parses 123, 4K, 1M, 2G, 1T (powers of 1024).
func parseSize(t *testing.T, c ddCase, s string) int64 {
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
	for i := len(sizeSuffixes) - 1; i >= 0; i-- {
		if u := int64(1) << (10 * (i + 1)); n >= u && n%u == 0 {
			return fmt.Sprintf("%d%c", n/u, sizeSuffixes[i])
		}
	}
	return strconv.FormatInt(n, 10)
}
