package tier

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/policy"
)

var bg = context.Background()

// ns is a namespace of directories by LIN, counting the reads.
type ns struct {
	dirs   map[meta.LIN]meta.Link
	xattrs map[meta.LIN]map[string]string
	reads  *int
}

func (n ns) GetInode(_ context.Context, lin meta.LIN) (meta.Inode, error) {
	*n.reads++
	if l, ok := n.dirs[lin]; ok {
		return meta.Inode{Attr: meta.Attr{LIN: lin, Type: meta.TypeDir}, Links: []meta.Link{l}}, nil
	}
	return meta.Inode{}, meta.ErrNotFound
}

func (n ns) GetXattr(_ context.Context, lin meta.LIN, name string) ([]byte, error) {
	if v, ok := n.xattrs[lin][name]; ok {
		return []byte(v), nil
	}
	return nil, meta.ErrNotFound
}

func file(lin meta.LIN, parent meta.LIN, name, pool string, alloc uint64, atime time.Time) meta.Inode {
	return meta.Inode{Attr: meta.Attr{LIN: lin, Type: meta.TypeFile, Pool: pool, Allocated: alloc, Size: alloc, Atime: atime, Nlink: 1},
		Links: []meta.Link{{Parent: parent, Name: name}}}
}

// The evaluation the job and the dry run share: regular files only, by
// their first link, under the directory asked; the first MIGRATE or
// DELETE rule acts (a later DELETE does not delete a migration
// candidate); every LIST rule lists; XATTR read only for the files that
// have it.
func TestEval(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	pol, err := policy.Parse(`
RULE 'cold' MIGRATE FROM POOL 'fast' WEIGHT(KB_ALLOCATED) TO POOL 'capacity' WHERE CURRENT_TIMESTAMP - ACCESS_TIME > INTERVAL '2' DAYS
RULE 'scratch' DELETE WHERE PATH_NAME LIKE '/scratch/%'
RULE 'tagged' LIST 'tagged' WHERE XATTR('user.tag') = 'x'
RULE 'all' LIST 'all'
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := now.Add(-72 * time.Hour)
	reads := 0
	n := ns{dirs: map[meta.LIN]meta.Link{10: {Parent: meta.RootLIN, Name: "scratch"}, 11: {Parent: meta.RootLIN, Name: "home"}},
		xattrs: map[meta.LIN]map[string]string{103: {"user.tag": "x"}}, reads: &reads}
	inodes := []meta.Inode{
		file(100, 10, "old.dat", "fast", 4096, old),     // cold (first), not deleted
		file(101, 10, "new.dat", "fast", 4096, now),     // scratch
		file(102, 11, "old.dat", "capacity", 2048, old), // in capacity already: nothing acts
		file(103, 11, "tagged", "fast", 0, now),         // tagged list
		file(104, 99, "orphan-parent", "fast", 1, old),  // parent gone: not evaluated
		{Attr: meta.Attr{LIN: 105, Type: meta.TypeDir}, Links: []meta.Link{{Parent: 11, Name: "d"}}},
		{Attr: meta.Attr{LIN: 106, Type: meta.TypeSymlink}, Links: []meta.Link{{Parent: 11, Name: "l"}}},
		{Attr: meta.Attr{LIN: 107, Type: meta.TypeFile}}, // no name
	}
	inodes[3].Xattrs = []string{"user.tag"}
	type got struct {
		LIN     meta.LIN
		Path    string
		Matched []int
		Act     int
		Weight  float64
	}
	run := func(dir string) []got {
		ev := NewEvaluator(pol, n, map[string]string{"fast": "mirror:2"}, dir, now)
		var out []got
		for i := range inodes {
			d, ok, err := ev.Eval(bg, &inodes[i])
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				out = append(out, got{d.LIN, d.Path, append([]int(nil), d.Matched...), d.Act, d.Weight})
			}
		}
		return out
	}
	want := []got{
		{100, "/scratch/old.dat", []int{0, 1, 3}, 0, 4},
		{101, "/scratch/new.dat", []int{1, 3}, 1, 0},
		{102, "/home/old.dat", []int{3}, -1, 0},
		{103, "/home/tagged", []int{2, 3}, -1, 0},
	}
	if g := run("/"); !reflect.DeepEqual(g, want) {
		t.Fatalf("evaluation:\n got %+v\nwant %+v", g, want)
	}
	if g := run("/home"); !reflect.DeepEqual(g, want[2:]) {
		t.Fatalf("under /home:\n got %+v\nwant %+v", g, want[2:])
	}
	// Paths: one read per directory the scan did not show; none for a
	// directory it did, however deep.
	reads = 0
	ev := NewEvaluator(pol, n, nil, "/", now)
	deep := []meta.Inode{
		{Attr: meta.Attr{LIN: 20, Type: meta.TypeDir}, Links: []meta.Link{{Parent: 11, Name: "x"}}},
		{Attr: meta.Attr{LIN: 21, Type: meta.TypeDir}, Links: []meta.Link{{Parent: 20, Name: "y"}}},
		file(200, 21, "f", "fast", 1, now),
		file(201, 21, "g", "fast", 1, now),
	}
	for i := range deep {
		if d, ok, err := ev.Eval(bg, &deep[i]); err != nil || ok != (i >= 2) || ok && d.Path != "/home/x/y/"+deep[i].Links[0].Name {
			t.Fatalf("deep %d: %+v %v %v", i, d, ok, err)
		}
	}
	if reads != 1 {
		t.Fatalf("%d reads to resolve /home/x/y, want 1 (home)", reads)
	}
	fresh := file(101, 10, "new.dat", "fast", 4096, now)
	if ok, err := ev.Still(bg, &fresh, 1); err != nil || !ok {
		t.Fatalf("Still scratch: %v %v", ok, err)
	}
	moved := file(101, 11, "new.dat", "fast", 4096, now)
	if ok, err := ev.Still(bg, &moved, 1); err != nil || ok {
		t.Fatalf("Still scratch after a rename out of /scratch: %v %v", ok, err)
	}
}

// Plans: rules in order, source pools by name, each seeing the usage the
// earlier leave; candidates in weight order, equal weights by LIN.
func TestPlanMigrations(t *testing.T) {
	pol, err := policy.Parse(`
RULE 'a' MIGRATE FROM POOL 'fast' THRESHOLD(80,40) WEIGHT(KB_ALLOCATED) TO POOL 'cap'
RULE 'b' MIGRATE TO POOL 'cap' LIMIT(90)
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	rules := pol.Rules()
	pools := []Pool{{"fast", 1000, 900}, {"cap", 1000, 400}, {"ssd", 100, 90}}
	cands := []Candidate{
		{LIN: 1, Rule: 1, Pool: "ssd", Allocated: 60},
		{LIN: 2, Rule: 0, Pool: "fast", Weight: 1, Allocated: 300},
		{LIN: 3, Rule: 0, Pool: "fast", Weight: 9, Allocated: 100},
		{LIN: 4, Rule: 0, Pool: "fast", Weight: 9, Allocated: 200},
		{LIN: 5, Rule: 1, Pool: "fast", Allocated: 50},
		{LIN: 7, Rule: 1, Pool: "ssd", Allocated: 10},
	}
	groups, space, err := PlanMigrations(rules, pools, cands)
	if err != nil {
		t.Fatal(err)
	}
	type g struct {
		Rule    int
		From    string
		Moves   []meta.LIN
		Skipped int
		Stop    string
	}
	var gs []g
	for _, x := range groups {
		var ls []meta.LIN
		for _, m := range x.Moves {
			ls = append(ls, m.LIN)
		}
		gs = append(gs, g{x.Rule, x.From, ls, x.Skipped, x.Stop.String()})
	}
	// a/fast: 900 of 1000 → 3 and 4 (weight 9, LIN order: 800, 600) → 2
	// (300): at or below 40%. cap then holds 1000 of 1000, past b's
	// LIMIT(90) for any file: b/fast, then b/ssd (pools by name), skip
	// theirs.
	want := []g{{0, "fast", []meta.LIN{3, 4, 2}, 0, "reached low"}, {1, "fast", nil, 1, "out of candidates"}, {1, "ssd", nil, 2, "out of candidates"}}
	if !reflect.DeepEqual(gs, want) {
		t.Fatalf("plan:\n got %+v\nwant %+v", gs, want)
	}
	if space[0].UsedAfter != 300 || space[1].UsedAfter != 1000 || space[2].UsedAfter != 90 {
		t.Fatalf("space after: %+v", space)
	}
}

// Entries survive their encoding; a newer version or a record cut short
// is refused.
func TestEntriesRecord(t *testing.T) {
	es := []Candidate{
		{LIN: 5, Rule: 0, Pool: "fast", Weight: 1.5, Allocated: 1 << 40},
		{LIN: 5, Rule: 3, Pool: "capacity", Path: "/a/b"},
		{LIN: 900, Rule: 1, Pool: "fast", Weight: -2, Allocated: 0, Path: "/ü"},
	}
	b := EncodeEntries(es)
	got, err := DecodeEntries(nil, b)
	if err != nil || !reflect.DeepEqual(got, es) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for i := 1; i < len(b); i++ {
		if _, err := DecodeEntries(nil, b[:i]); !errors.Is(err, ErrCorruptRecord) {
			t.Fatalf("cut at %d of %d: %v", i, len(b), err)
		}
	}
	newer := append([]byte{recordVersion + 1}, b[1:]...)
	if _, err := DecodeEntries(nil, newer); !errors.Is(err, ErrNewerRecord) {
		t.Fatalf("newer: %v", err)
	}
	if got, err := DecodeEntries(nil, EncodeEntries(nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty: %+v %v", got, err)
	}
}
