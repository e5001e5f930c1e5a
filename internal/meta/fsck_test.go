package meta

import (
	"fmt"
	"math/rand/v2"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// fsckResult counts what fsckRun found and did, per kind.
type fsckResult struct {
	found, repaired, changed map[FsckKind]int
	findings                 []FsckFinding
}

func (r fsckResult) total() int {
	n := 0
	for _, c := range r.found {
		n += c
	}
	return n
}

// fsckRun checks the whole namespace as the fsck job does, in its three
// passes (entries, back-pointers, links), repairing each finding as it is
// found unless dry.
func fsckRun(t testing.TB, m *Meta, dry bool) fsckResult {
	t.Helper()
	r := fsckResult{found: map[FsckKind]int{}, repaired: map[FsckKind]int{}, changed: map[FsckKind]int{}}
	handle := func(fs []FsckFinding) {
		for _, f := range fs {
			r.found[f.Kind]++
			r.findings = append(r.findings, f)
			if dry {
				continue
			}
			ok, err := m.FsckRepair(bg, f)
			if err != nil {
				t.Fatalf("repair %s: %v", f, err)
			}
			if ok {
				r.repaired[f.Kind]++
			} else {
				r.changed[f.Kind]++
			}
		}
	}
	var lins []LIN
	var dirs []LIN
	for from := LIN(1); ; {
		page, next, err := m.ScanInodes(bg, from, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range page {
			lins = append(lins, in.LIN)
			if in.Type == TypeDir {
				dirs = append(dirs, in.LIN)
			}
		}
		if next == 0 {
			break
		}
		from = next
	}
	hints := map[LIN][]Link{}
	for _, d := range dirs {
		for after := ""; ; {
			p, err := m.FsckEntries(bg, d, after, 7)
			if err != nil {
				t.Fatal(err)
			}
			handle(p.Findings)
			for _, u := range p.Unclaimed {
				hints[u.LIN] = append(hints[u.LIN], Link{Parent: u.Parent, Name: u.Name})
			}
			if p.Next == "" {
				break
			}
			after = p.Next
		}
	}
	// Pages of fsckTestPage LINs, as the job's pages (the last page's
	// range reaches past every LIN, and hints' targets).
	const fsckTestPage = 5
	last := lins[len(lins)-1]
	claimed := map[Link]bool{}
	for from := LIN(0); from <= last; from += fsckTestPage {
		_, fs, err := m.FsckBackpointersRange(bg, from, from+fsckTestPage)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if f.Kind == FsckWrongEntry {
				claimed[Link{Parent: f.Parent, Name: f.Name}] = true
			}
		}
		handle(fs)
	}
	for from := LIN(0); from <= last; from += fsckTestPage {
		pending := map[LIN][]Link{}
		for l, ls := range hints {
			if l >= from && l < from+fsckTestPage {
				pending[l] = slices.DeleteFunc(slices.Clone(ls), func(l Link) bool { return claimed[l] })
			}
		}
		_, fs, err := m.FsckLinksRange(bg, from, from+fsckTestPage, pending)
		if err != nil {
			t.Fatal(err)
		}
		handle(fs)
	}
	stray := map[LIN][]Link{} // hints naming LINs past the pages: no range
	for l, ls := range hints {
		if l >= (last/fsckTestPage+1)*fsckTestPage {
			stray[l] = slices.DeleteFunc(slices.Clone(ls), func(l Link) bool { return claimed[l] })
		}
	}
	_, fs, err := m.FsckLinksRange(bg, 0, 0, stray)
	if err != nil {
		t.Fatal(err)
	}
	handle(fs)
	return r
}

// fsckFixture is a small consistent namespace: directories, files, a
// hard link, a symlink.
func fsckFixture(t *testing.T) (*Meta, LIN) {
	m := newMeta(t, memkv.New(kv.Options{Limits: etcdDefaultLimits}))
	a := must(m.Mkdir(bg, RootLIN, "a", 0o755))
	b := must(m.Mkdir(bg, a.LIN, "b", 0o755))
	f := must(m.Create(bg, a.LIN, "f", NewInode{Mode: 0o644}))
	must(m.Create(bg, b.LIN, "g", NewInode{Mode: 0o644}))
	must(m.Link(bg, f.LIN, b.LIN, "f-link"))
	must(m.Symlink(bg, b.LIN, "s", "../f"))
	return m, a.LIN
}

// fsckDump renders the tree below the root, one line per path, and
// "missing" for an entry naming no inode; it does not follow a directory
// loop (a damaged tree may have one).
func fsckDump(t *testing.T, m *Meta) string {
	t.Helper()
	var b strings.Builder
	walkTree(t, m, func(p string, e DirEntry, in Inode, err error) bool {
		if err != nil {
			fmt.Fprintf(&b, "%s %s lin=%d missing\n", p, e.Type, e.LIN)
			return false
		}
		fmt.Fprintf(&b, "%s %s lin=%d nlink=%d links=%v mode=%o\n", p, in.Type, in.LIN, in.Nlink, in.Links, in.Mode)
		dir := path.Dir(p)
		return e.Type == TypeDir && in.Type == TypeDir && !strings.Contains(dir, "/"+e.Name+"/") && strings.Count(dir, "/") < 10
	})
	return b.String()
}

// rawPut and rawDel write records directly, as a corruption would.
func rawPut(t *testing.T, m *Meta, k, v []byte) {
	t.Helper()
	ok(t, m.store.Update(bg, func(tx kv.Tx) error { tx.Put(k, v); return nil }))
}

func rawDel(t *testing.T, m *Meta, k []byte) {
	t.Helper()
	ok(t, m.store.Update(bg, func(tx kv.Tx) error { tx.Delete(k); return nil }))
}

// rawInode rewrites inode lin after change.
func rawInode(t *testing.T, m *Meta, lin LIN, change func(n *inode)) {
	t.Helper()
	ok(t, m.store.Update(bg, func(tx kv.Tx) error {
		b, err := tx.Get(keyInode(lin))
		if err != nil {
			return err
		}
		n, err := decodeInode(lin, b)
		if err != nil {
			return err
		}
		change(n)
		tx.Put(keyInode(lin), encodeInode(n))
		return nil
	}))
}

// For every kind: injected N times (through the failpoints of Create, or
// records written directly), a dry run finds exactly the N of that kind
// and changes nothing; a repair run fixes them all; a second dry run
// finds none, the namespace's invariants hold, and every path of the
// namespace before the injection is unchanged.
func TestFsckKinds(t *testing.T) {
	const n = 3
	// failpointCase creates n files (or directories) in dir with point on.
	failpointCase := func(point string, typ FileType) func(t *testing.T, m *Meta, dir LIN) {
		return func(t *testing.T, m *Meta, dir LIN) {
			ok(t, failpoint.Enable(point, fmt.Sprintf("%d*error", n)))
			defer failpoint.Disable(point)
			for i := range n {
				must(m.Create(bg, dir, fmt.Sprintf("bad%d", i), NewInode{Type: typ, Mode: 0o644}))
			}
		}
	}
	tests := []struct {
		name   string
		kind   FsckKind
		inject func(t *testing.T, m *Meta, dir LIN)
		lost   bool // repaired into /lost+found
	}{
		{"no-backpointer", FsckMissingBackpointer, failpointCase("meta/create-no-backpointer", TypeFile), false},
		{"no-backpointer-dir", FsckMissingBackpointer, failpointCase("meta/create-no-backpointer", TypeDir), false},
		{"entry-wrong-lin", FsckWrongEntry, failpointCase("meta/entry-wrong-lin", TypeFile), false},
		{"entry-wrong-lin-dir", FsckWrongEntry, failpointCase("meta/entry-wrong-lin", TypeDir), false},
		{"wrong-nlink", FsckLinkCount, failpointCase("meta/wrong-nlink", TypeFile), false},
		{"wrong-nlink-dir", FsckLinkCount, failpointCase("meta/wrong-nlink", TypeDir), false},
		{"orphan-inode", FsckUnreachable, failpointCase("meta/orphan-inode", TypeFile), true},
		{"orphan-dir", FsckUnreachable, failpointCase("meta/orphan-inode", TypeDir), true},
		{"dangling-entry", FsckDanglingEntry, failpointCase("meta/dangling-entry", TypeFile), false},
		{"dangling-dir-entry", FsckDanglingEntry, failpointCase("meta/dangling-entry", TypeDir), false},
		{"entry-type", FsckEntryType, func(t *testing.T, m *Meta, dir LIN) {
			for i := range n {
				a := must(m.Create(bg, dir, fmt.Sprintf("bad%d", i), NewInode{Mode: 0o644}))
				rawPut(t, m, keyEntry(dir, fmt.Sprintf("bad%d", i)), encodeEntry(TypeSymlink, a.LIN))
			}
		}, false},
		{"stale-backpointer", FsckStaleBackpointer, func(t *testing.T, m *Meta, dir LIN) {
			// Hard links whose second entry is lost: the file keeps one link.
			for i := range n {
				a := must(m.Create(bg, dir, fmt.Sprintf("bad%d", i), NewInode{Mode: 0o644}))
				must(m.Link(bg, a.LIN, dir, fmt.Sprintf("bad%d-link", i)))
				rawDel(t, m, keyEntry(dir, fmt.Sprintf("bad%d-link", i)))
			}
		}, false},
		{"stale-only-backpointer", FsckStaleBackpointer, func(t *testing.T, m *Meta, dir LIN) {
			// The only entry lost: the file goes to /lost+found.
			for i := range n {
				must(m.Create(bg, dir, fmt.Sprintf("bad%d", i), NewInode{Mode: 0o644}))
				rawDel(t, m, keyEntry(dir, fmt.Sprintf("bad%d", i)))
			}
		}, true},
		{"stale-taken-backpointer", FsckStaleBackpointer, func(t *testing.T, m *Meta, dir LIN) {
			// The entry names another inode, which claims it too.
			for i := range n {
				a := must(m.Create(bg, dir, fmt.Sprintf("bad%d", i), NewInode{Mode: 0o644}))
				c := must(m.Create(bg, dir, fmt.Sprintf("other%d", i), NewInode{Mode: 0o644}))
				must(m.Link(bg, a.LIN, dir, fmt.Sprintf("x%d", i)))
				rawDel(t, m, keyEntry(dir, fmt.Sprintf("x%d", i)))
				rawInode(t, m, c.LIN, func(in *inode) {
					in.links = append(in.links, Link{Parent: dir, Name: fmt.Sprintf("bad%d", i)})
					in.nlink++
				})
				rawPut(t, m, keyEntry(dir, fmt.Sprintf("bad%d", i)), encodeEntry(TypeFile, c.LIN))
				rawInode(t, m, a.LIN, func(in *inode) { in.links = []Link{{Parent: dir, Name: fmt.Sprintf("bad%d", i)}}; in.nlink = 1 })
			}
		}, true},
		{"cycle", FsckUnreachable, func(t *testing.T, m *Meta, dir LIN) {
			// Two directories that name each other as parent, cut off
			// from the tree: one finding per cycle.
			for i := range n {
				x := must(m.Mkdir(bg, dir, fmt.Sprintf("x%d", i), 0o755))
				y := must(m.Mkdir(bg, x.LIN, "y", 0o755))
				ok(t, m.Rename(bg, x.LIN, "y", dir, fmt.Sprintf("y%d", i), 0))
				rawDel(t, m, keyEntry(dir, fmt.Sprintf("x%d", i)))
				rawDel(t, m, keyEntry(dir, fmt.Sprintf("y%d", i)))
				rawPut(t, m, keyEntry(x.LIN, "y"), encodeEntry(TypeDir, y.LIN))
				rawPut(t, m, keyEntry(y.LIN, "x"), encodeEntry(TypeDir, x.LIN))
				rawInode(t, m, x.LIN, func(in *inode) { in.links = []Link{{Parent: y.LIN, Name: "x"}}; in.nlink = 3 })
				rawInode(t, m, y.LIN, func(in *inode) { in.links = []Link{{Parent: x.LIN, Name: "y"}}; in.nlink = 3 })
				rawInode(t, m, dir, func(in *inode) { in.nlink -= 2 })
			}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, dir := fsckFixture(t)
			if r := fsckRun(t, m, true); r.total() != 0 {
				t.Fatalf("a consistent namespace: %v", r.findings)
			}
			before := fsckDump(t, m)
			tc.inject(t, m, dir)
			injected := fsckDump(t, m)
			r := fsckRun(t, m, true)
			if r.total() != n || r.found[tc.kind] != n {
				t.Fatalf("dry run found %v, want %d %s:\n%v", r.found, n, tc.kind, r.findings)
			}
			if d := fsckDump(t, m); d != injected {
				t.Fatalf("the dry run changed the namespace:\n%s\nwas\n%s", d, injected)
			}
			r = fsckRun(t, m, false)
			if r.found[tc.kind] != n || r.repaired[tc.kind] != n || len(r.changed) != 0 {
				t.Fatalf("repair run: found %v, repaired %v, changed %v:\n%v", r.found, r.repaired, r.changed, r.findings)
			}
			if r = fsckRun(t, m, true); r.total() != 0 {
				t.Fatalf("after the repair: %v", r.findings)
			}
			check(t, m)
			after := fsckDump(t, m)
			for _, line := range strings.Split(strings.TrimSpace(before), "\n") {
				if strings.HasPrefix(line, "/a dir ") {
					continue // its link count counts the subdirectories injected
				}
				if !strings.Contains(after, line+"\n") {
					t.Errorf("line %q of the namespace before the injection is gone after the repair:\n%s", line, after)
				}
			}
			lost := strings.Contains(after, "/"+LostFoundName+"/")
			if lost != tc.lost {
				t.Errorf("/lost+found used: %v, want %v:\n%s", lost, tc.lost, after)
			}
		})
	}
}

// A finding that no longer holds when its repair runs is not repaired:
// the repair re-checks in its transaction and writes nothing.
func TestFsckRepairChangedMeanwhile(t *testing.T) {
	tests := []struct {
		name   string
		kind   FsckKind
		inject func(t *testing.T, m *Meta, dir LIN)
		// change is what happens between the check and the repair: a
		// client's operation, or another repair.
		change func(t *testing.T, m *Meta, dir LIN)
	}{
		{"link-count, file unlinked", FsckLinkCount, func(t *testing.T, m *Meta, dir LIN) {
			ok(t, failpoint.Enable("meta/wrong-nlink", "1*error"))
			must(m.Create(bg, dir, "bad", NewInode{Mode: 0o644}))
		}, func(t *testing.T, m *Meta, dir LIN) {
			// Now nlink 1 and no link: not a link count to set, but an
			// unreachable inode (the next run's finding).
			ok(t, m.Unlink(bg, dir, "bad"))
		}},
		{"missing back-pointer, entry renamed", FsckMissingBackpointer, func(t *testing.T, m *Meta, dir LIN) {
			ok(t, failpoint.Enable("meta/create-no-backpointer", "1*error"))
			must(m.Create(bg, dir, "bad", NewInode{Mode: 0o644}))
		}, func(t *testing.T, m *Meta, dir LIN) {
			ok(t, m.Rename(bg, dir, "bad", RootLIN, "moved", 0))
		}},
		{"link count, link added", FsckLinkCount, func(t *testing.T, m *Meta, dir LIN) {
			ok(t, failpoint.Enable("meta/wrong-nlink", "1*error"))
			must(m.Create(bg, dir, "bad", NewInode{Mode: 0o644}))
		}, func(t *testing.T, m *Meta, dir LIN) {
			a := must(m.Lookup(bg, dir, "bad"))
			rawInode(t, m, a.LIN, func(in *inode) { in.nlink-- }) // fixed by someone else
		}},
		{"dangling entry, removed", FsckDanglingEntry, func(t *testing.T, m *Meta, dir LIN) {
			ok(t, failpoint.Enable("meta/dangling-entry", "1*error"))
			must(m.Create(bg, dir, "bad", NewInode{Mode: 0o644}))
		}, func(t *testing.T, m *Meta, dir LIN) {
			rawDel(t, m, keyEntry(dir, "bad"))
		}},
		{"unreachable, now an orphan", FsckUnreachable, func(t *testing.T, m *Meta, dir LIN) {
			ok(t, failpoint.Enable("meta/orphan-inode", "1*error"))
			must(m.Create(bg, dir, "bad", NewInode{Mode: 0o644}))
		}, func(t *testing.T, m *Meta, dir LIN) {
			var lin LIN
			ok(t, m.store.View(bg, func(tx kv.Tx) error {
				b, err := tx.Get(keyNextLIN())
				lin, _ = decodeNextLIN(b)
				return err
			}))
			for l := lin - 1; l >= FirstLIN; l-- {
				if in, err := m.GetInode(bg, l); err == nil && in.Nlink == 0 {
					rawPut(t, m, keyOrphan(l), encodeOrphan(1))
					return
				}
			}
			t.Fatal("no orphan inode")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, dir := fsckFixture(t)
			tc.inject(t, m, dir)
			r := fsckRun(t, m, true)
			var f *FsckFinding
			for i := range r.findings {
				if r.findings[i].Kind == tc.kind {
					f = &r.findings[i]
				}
			}
			if f == nil {
				t.Fatalf("no %s finding: %v", tc.kind, r.findings)
			}
			tc.change(t, m, dir)
			before := fsckDump(t, m)
			repaired, err := m.FsckRepair(bg, *f)
			if err != nil || repaired {
				t.Fatalf("repair of %s after a change: %v, %v; want false, nil", f, repaired, err)
			}
			if d := fsckDump(t, m); d != before {
				t.Fatalf("the repair changed the namespace:\n%s\nwas\n%s", d, before)
			}
		})
	}
}

// A check running beside clients that create, rename, link and unlink
// finds nothing in a consistent namespace, and so repairs nothing: with
// the clients on the checker's own Meta, and with a client that has
// write-back (directory delegations, creates acknowledged before their
// commit) beside a checker on the store underneath, as a mount and a
// node are.
func TestFsckConcurrentWorkload(t *testing.T) {
	t.Run("shared", func(t *testing.T) {
		m, _ := fsckFixture(t)
		fsckBesideWorkload(t, m, m)
	})
	t.Run("write-back", func(t *testing.T) {
		inner := memkv.New(kv.Options{Limits: etcdDefaultLimits})
		client := newMeta(t, newWriteBackStore(t, inner))
		checker, err := Open(bg, Config{Store: inner, LINBatch: 64})
		ok(t, err)
		fsckBesideWorkload(t, client, checker)
	})
}

// fsckBesideWorkload runs fsck (repairing) on checker, at least five times
// and until a thousand operations ran, while
// workers change the namespace through client, and fails on any finding.
func fsckBesideWorkload(t *testing.T, client, checker *Meta) {
	const workers = 4
	dirs := make([]LIN, workers)
	for w := range workers {
		dirs[w] = must(client.Mkdir(bg, RootLIN, fmt.Sprintf("w%d", w), 0o755)).LIN
	}
	stop := make(chan struct{})
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := client
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d, other := dirs[w], dirs[(w+1)%workers]
				name := fmt.Sprintf("f%d", rnd.IntN(20))
				var err error
				switch rnd.IntN(7) {
				case 0:
					_, err = m.Create(bg, d, name, NewInode{Mode: 0o644})
				case 1:
					_, err = m.Mkdir(bg, d, "d"+name, 0o755)
				case 2:
					err = m.Rename(bg, d, name, other, fmt.Sprintf("r%d-%d", w, i), 0)
				case 3:
					err = m.Unlink(bg, d, name)
				case 4:
					var a Attr
					if a, err = m.Lookup(bg, d, name); err == nil {
						_, err = m.Link(bg, a.LIN, other, fmt.Sprintf("l%d-%d", w, i))
					}
				case 5:
					err = m.Rmdir(bg, d, "d"+name)
					if err == nil {
						break
					}
					err = m.Rename(bg, d, "d"+name, other, fmt.Sprintf("dr%d-%d", w, i), 0)
				case 6: // a stripe written: usage (bytes, allocated) changes
					var a Attr
					if a, err = m.Lookup(bg, d, name); err == nil && a.Type == TypeFile {
						idx := uint64(rnd.IntN(3))
						ss, _ := m.GetStripes(bg, a.LIN, idx, 1)
						gen := uint64(0)
						if len(ss) == 1 && ss[0].Index == idx {
							gen = ss[0].Gen
						}
						_, err = m.CommitStripe(bg, a.LIN, stripe(idx, DriveID(1+w), byte(i)), gen,
							CommitOptions{StripeSize: 1024, Size: idx*1024 + 100})
					}
				}
				if err == nil { // collisions and missing names are the workload's normal
					done.Add(1)
				}
			}
		}()
	}
	for done.Load() < 50 {
		runtime.Gosched()
	}
	runs := 0
	for ; runs < 5 || done.Load() < 1000 && runs < 300; runs++ {
		if r := fsckRun(t, checker, false); r.total() != 0 {
			t.Errorf("a run beside the workload found %v:\n%v", r.found, r.findings)
		}
		if u, err := checker.FsckUsage(bg); err != nil || len(u.Findings) != 0 || u.Disagree != 0 {
			t.Errorf("a usage check beside the workload: %+v, %v", u, err)
		}
	}
	close(stop)
	wg.Wait()
	ok(t, client.Flush(bg))
	t.Logf("%d runs beside %d operations", runs, done.Load())
	check(t, checker)
	if r := fsckRun(t, checker, true); r.total() != 0 {
		t.Errorf("after the workload: %v", r.findings)
	}
}
