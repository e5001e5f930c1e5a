package placement

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

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
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of datadriven tests")

func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s := &scenario{}
			runFile(t, f, s.run)
		})
	}
}

// ddCase is one command of a datadriven file.
type ddCase struct {
	pos    string // file:line, for messages
	cmd    string
	args   map[string]string
	input  []string
	output string
}

// runFile runs every case of path through run, comparing (or, with
// -rewrite, replacing) the expected outputs.
func runFile(t *testing.T, path string, run func(t *testing.T, c ddCase) string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			if i < len(lines)-1 {
				out.WriteString(line + "\n")
			}
			continue
		}
		c := ddCase{pos: fmt.Sprintf("%s:%d", path, i+1), args: map[string]string{}}
		fields := strings.Fields(line)
		c.cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.args[k] = v
		}
		out.WriteString(line + "\n")
		for i++; i < len(lines) && lines[i] != "----"; i++ {
			c.input = append(c.input, lines[i])
			out.WriteString(lines[i] + "\n")
		}
		if i == len(lines) {
			t.Fatalf("%s: no ---- after the command", c.pos)
		}
		var want []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			want = append(want, lines[i])
		}
		i-- // let the loop see the blank line
		got := strings.TrimRight(run(t, c), "\n")
		out.WriteString("----\n" + got + "\n")
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s\ngot:\n%s\nwant:\n%s", c.pos, line, got, strings.Join(want, "\n"))
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scenario is the state of one datadriven file: the current pool.
type scenario struct {
	pool []Candidate
}

func (s *scenario) run(t *testing.T, c ddCase) string {
	switch c.cmd {
	case "pool":
		return s.setPool(t, c)
	case "place":
		return s.place(t, c)
	case "spread":
		return s.spread(t, c)
	case "tolerance":
		return tolerance(t, c)
	}
	t.Fatalf("%s: unknown command %q", c.pos, c.cmd)
	return ""
}

func (s *scenario) setPool(t *testing.T, c ddCase) string {
	s.pool = nil
	nodes := 0
	for _, line := range c.input {
		name, drives, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("%s: pool line %q: want node: drives", c.pos, line)
		}
		nodes++
		for _, d := range strings.Fields(drives) {
			attrs := strings.Split(d, ",")
			id, err := strconv.ParseUint(attrs[0], 10, 32)
			if err != nil {
				t.Fatalf("%s: drive %q: %v", c.pos, d, err)
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
					t.Fatalf("%s: unknown drive attribute %q", c.pos, a)
				}
			}
			s.pool = append(s.pool, cd)
		}
	}
	return fmt.Sprintf("drives=%d nodes=%d", len(s.pool), nodes)
}

// request builds the request of a place or spread command.
func (s *scenario) request(t *testing.T, c ddCase) Request {
	p, err := erasure.ParseProtection(c.args["prot"])
	if err != nil {
		t.Fatalf("%s: %v", c.pos, err)
	}
	g := erasure.Geometry{Protection: p}
	if v, ok := c.args["unit"]; ok {
		g.UnitSize = int(parseSize(t, c, v))
	}
	n := int(g.StripeDataSize())
	if _, ok := c.args["small"]; ok {
		n = g.Unit() / 2
	}
	l := g.Layout(n)
	seed, _ := strconv.ParseUint(c.args["seed"], 10, 64)
	req := Request{
		Candidates: s.pool, Width: l.Width(), Min: l.MinPlaced(), Needed: l.Needed(),
		UnitBytes: int64(l.UnitLen), Label: l.String(), Rand: rand.New(rand.NewPCG(seed, 0)),
		Exclude: ids(t, c, c.args["exclude"]),
	}
	for _, id := range ids(t, c, c.args["existing"]) {
		i := slices.IndexFunc(s.pool, func(cd Candidate) bool { return cd.ID == id })
		if i < 0 {
			t.Fatalf("%s: existing drive %d not in pool", c.pos, id)
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
			t.Fatalf("%s: %v", c.pos, err)
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
	stripes, err := strconv.Atoi(c.args["stripes"])
	if err != nil {
		t.Fatalf("%s: stripes: %v", c.pos, err)
	}
	req := s.request(t, c)
	counts := map[DriveID]int{}
	for range stripes {
		res, err := Place(req)
		if err != nil {
			t.Fatalf("%s: %v", c.pos, err)
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

func tolerance(t *testing.T, c ddCase) string {
	needed, err := strconv.Atoi(c.args["needed"])
	if err != nil {
		t.Fatalf("%s: needed: %v", c.pos, err)
	}
	var us []Unit
	for _, line := range c.input {
		var u Unit
		if _, err := fmt.Sscan(line, &u.Drive, &u.Node); err != nil {
			t.Fatalf("%s: unit %q: %v", c.pos, line, err)
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
			t.Fatalf("%s: drive id %q: %v", c.pos, f, err)
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
		t.Fatalf("%s: size %q: %v", c.pos, s, err)
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
