package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
)

// TestCrashConsistency kills a process exactly at each durability step of
// weft — WEFT_FAILPOINTS='POINT=crash', which makes the process send
// itself SIGKILL there (docs/architecture.md, "Fault injection") — during
// a workload that takes that step, restarts it, and checks that every
// acknowledged write (fsync and close returned) reads back byte-exact and
// fully placed, that integrityscan finds nothing to repair, and, where it
// can be seen, what the crash left behind. One cluster serves every point
// (4 nodes — three etcd members and a plain node — of 2 drives, ec:4+2:
// a stripe's 6 units fit on the 6 drives a crashed node leaves); each
// point leaves it healthy for the next, and at the end a fresh mount reads
// every acknowledged file again.
//
// One point alone:
//
//	go test ./tests -run 'TestCrashConsistency/drive/put-before-sync$' -v
func TestCrashConsistency(t *testing.T) {
	t.Parallel()
	r := newCrashRig(t)
	points := []struct {
		name string
		run  func(*testing.T)
	}{
		// Node points: the node owning the step crashes under a mount's writes.
		{"drive/put-before-sync", func(t *testing.T) { r.nodeWrite(t, "drive/put-before-sync", "n2", r.put) }},
		{"drive/put-before-link", func(t *testing.T) { r.nodeWrite(t, "drive/put-before-link", "n3", r.put) }},
		{"drive/put-before-dirsync", func(t *testing.T) { r.nodeWrite(t, "drive/put-before-dirsync", "n4", r.put) }},
		{"drive/adopt-before-link", func(t *testing.T) { r.nodeWrite(t, "drive/adopt-before-link", "n1", r.stage) }},
		{"drive/adopt-before-dirsync", func(t *testing.T) { r.nodeWrite(t, "drive/adopt-before-dirsync", "n4", r.stage) }},
		// Mount points: the writing mount crashes.
		{"drive/stage-before-sync", r.stageCrash},
		{"client/before-commit", func(t *testing.T) { r.commitCrash(t, "client/before-commit") }},
		{"client/after-commit", func(t *testing.T) { r.commitCrash(t, "client/after-commit") }},
		{"client/before-punch", func(t *testing.T) { r.punchCrash(t, "client/before-punch") }},
		{"client/after-punch", func(t *testing.T) { r.punchCrash(t, "client/after-punch") }},
		{"kvcache/before-commit", func(t *testing.T) { r.writeBackCrash(t, "kvcache/before-commit") }},
		{"kvcache/after-commit", func(t *testing.T) { r.writeBackCrash(t, "kvcache/after-commit") }},
		{"client/before-data-sync", func(t *testing.T) { r.writeBackCrash(t, "client/before-data-sync") }},
		// Node points of the background work.
		{"server/drain-before-ack", func(t *testing.T) { r.drainCrash(t, "n3") }},
		{"job/before-checkpoint", func(t *testing.T) { r.checkpointCrash(t, "job/before-checkpoint", "n4") }},
		{"job/after-checkpoint", func(t *testing.T) { r.checkpointCrash(t, "job/after-checkpoint", "n2") }},
		{"job/after-elect", r.electCrash},
		{"job/after-resign", r.resignCrash},
	}
	for _, p := range points {
		if !t.Run(p.name, p.run) {
			return // the cluster may be left in any state
		}
	}
	if len(r.acked) == 0 && len(r.dirs) == 0 {
		return // every point filtered out by -run
	}
	// Every acknowledged write, and every directory a write-back crash
	// left, once more through a mount that never saw them.
	fresh := filepath.Join(r.tmp, "fresh")
	r.c.MountAt(fresh)
	for rel, data := range r.acked {
		checkFile(t, filepath.Join(fresh, rel), data)
	}
	for rel, want := range r.dirs {
		if got := listNames(t, filepath.Join(fresh, rel)); !slices.Equal(got, want) {
			t.Errorf("%s through a fresh mount: %v, want %v", rel, got, want)
		}
	}
	t.Logf("%d acknowledged files and %d written-back directories read back through a fresh mount", len(r.acked), len(r.dirs))
}

// nodeWrite crashes node at a drive point under a mount's writes: it
// arms the point on the node, writes files through mount (create, write,
// close; every other one with an fsync before the close) until three
// more were written after the node died, and
// checks what the crash left on the node's drives, then, the node
// restarted, that it is tidied and that the acknowledged files are whole.
func (r *crashRig) nodeWrite(t *testing.T, point, node, mount string) {
	dir := r.mkdir(t, point)
	r.waitDrained(t)
	r.arm(t, node, point)
	var rels []string
	failed, after := 0, 0
	for i := 0; after < 3; i++ {
		if i == 40 {
			t.Fatalf("%s never fired on %s in 40 writes", point, node)
		}
		rel := path.Join(dir, fmt.Sprintf("f%02d", i))
		data := randBytes(seedOf(point, i), crashSizes[i%len(crashSizes)])
		if err := writeAcked(filepath.Join(mount, rel), data, i%2 == 0); err != nil {
			// Not acknowledged: no promise, but reported.
			failed++
			t.Logf("write %s failed during the crash: %v", rel, err)
		} else {
			r.acked[rel] = data
			rels = append(rels, rel)
		}
		if !r.running(t, node) {
			after++
		}
	}
	r.waitCrash(t, node, point)

	left := r.leftovers(t, node)
	t.Logf("%s: %d files acknowledged, %d failed; %s left %d temp files and %d queued deletes (%d of them stored blocks) on its drives",
		point, len(rels), failed, node, left.temps, len(left.queued), len(left.stored))
	switch point {
	case "drive/put-before-sync", "drive/put-before-link":
		// The put's temp file; the writer re-placed the unit and queued
		// the block it could not be sure of.
		if left.temps == 0 || len(left.queued) == 0 {
			t.Fatalf("want a temp file and a queued delete of the failed put")
		}
	case "drive/put-before-dirsync":
		// The block under its name and the temp one; nothing names it,
		// the writer queued it.
		if left.temps == 0 || len(left.stored) == 0 {
			t.Fatalf("want a temp name and a stored block that the writer queued")
		}
	case "drive/adopt-before-link":
		// The writer removed its staged file when the adopt failed.
		if left.temps != 0 || len(left.queued) == 0 {
			t.Fatalf("want no staged file left (the writer removes it) and a queued delete of the failed adopt")
		}
	case "drive/adopt-before-dirsync":
		// The adopted block, linked; the writer removed the staged name.
		if left.temps != 0 || len(left.stored) == 0 {
			t.Fatalf("want no staged name left and a stored block that the writer queued")
		}
	}

	r.recover(t, node)
	r.waitDrained(t)
	if l := r.leftovers(t, node); l.temps != 0 {
		t.Fatalf("%s's restart left %d temp files on its drives", node, l.temps)
	}
	for _, p := range left.stored {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("block %s, queued by the writer, is still there after the drain: %v", p, err)
		}
	}
	r.verify(t, rels)
	r.scanClean(t)
}

// stageCrash crashes a writing mount at drive/stage-before-sync: staged
// block files of the node drives it wrote into are left as temp files
// until their node's next start (nothing else removes them), and blocks
// the nodes adopted for the write it never committed are orphans for
// collect.
func (r *crashRig) stageCrash(t *testing.T) {
	const point = "drive/stage-before-sync"
	dir := r.mkdir(t, point)
	r.waitDrained(t)
	temps0 := r.allTemps(t)
	// 70 KiB files are 3 mirrored copies: the 8th stage is the third
	// file's second copy.
	m := r.c.StartMount(filepath.Join(r.tmp, "stage-crash"), []string{"--sync-dirops"}, "WEFT_FAILPOINTS="+point+"=8*crash")
	var rels []string
	for i := 0; ; i++ {
		rel := path.Join(dir, fmt.Sprintf("f%02d", i))
		data := randBytes(seedOf(point, i), 70<<10)
		if err := writeDurably(filepath.Join(m.Dir, rel), data); err != nil {
			break
		}
		r.acked[rel] = data
		rels = append(rels, rel)
		if i == 20 {
			t.Fatalf("%s never fired in 20 writes", point)
		}
	}
	r.waitMountCrash(t, m, point)
	left := map[string]int{}
	for node, n := range r.allTemps(t) {
		if n > temps0[node] {
			left[node] = n - temps0[node]
		}
	}
	t.Logf("%s: %d files acknowledged; staged temp files left per node: %v", point, len(rels), left)
	if len(left) == 0 {
		t.Fatalf("the crashed stage left no temp file in a drive directory")
	}
	for node := range left {
		r.restart(t, node)
	}
	for node, n := range r.allTemps(t) {
		if n != 0 {
			t.Fatalf("%s still has %d temp files after its restart", node, n)
		}
	}
	r.collect(t)
	r.verify(t, rels)
	r.scanClean(t)
}

// commitCrash crashes a writing mount at a stripe-map commit point (its
// 5th hit): it writes f0 (two stripes: hits 1 and 2), f1 and f2 (one
// stripe each: 3 and 4; f2 is closed without an fsync, which
// acknowledges it all the same), then overwrites f0 in place, unacknowledged:
// before-commit dies before either stripe of the overwrite commits,
// after-commit once one of them has. Each stripe of f0 must read all old
// or all new, and the blocks nobody references must go: the stored,
// uncommitted units to collect, the blocks a commit replaced to the
// delete queue.
func (r *crashRig) commitCrash(t *testing.T, point string) {
	dir := r.mkdir(t, point)
	r.waitDrained(t)
	m := r.c.StartMount(filepath.Join(r.tmp, strings.ReplaceAll(point, "/", "-")), []string{"--sync-dirops"}, "WEFT_FAILPOINTS="+point+"=5*crash")
	f0 := path.Join(dir, "f0")
	old := randBytes(seedOf(point, 0), 4*unit+unit)
	var rels []string
	for i, data := range [][]byte{old, randBytes(seedOf(point, 1), unit), randBytes(seedOf(point, 2), unit)} {
		rel := path.Join(dir, fmt.Sprintf("f%d", i))
		if err := writeAcked(filepath.Join(m.Dir, rel), data, i < 2); err != nil {
			t.Fatalf("write %s before the crash point: %v", rel, err)
		}
		r.acked[rel] = data
		rels = append(rels, rel)
	}
	before := allBlocks(t, r.c)
	oldLayout := layout(t, r.c, filepath.Join(r.c.Mount, f0))
	fresh := randBytes(seedOf(point, 100), len(old))
	if err := overwriteDurably(filepath.Join(m.Dir, f0), fresh); err == nil {
		t.Fatalf("the overwrite of %s was acknowledged: %s did not fire", f0, point)
	}
	r.waitMountCrash(t, m, point)

	got, err := os.ReadFile(filepath.Join(r.c.Mount, f0))
	if err != nil || len(got) != len(old) {
		t.Fatalf("%s after the crash: %d bytes, %v", f0, len(got), err)
	}
	var stripes []string
	for off := 0; off < len(old); off += 4 * unit {
		end := min(off+4*unit, len(old))
		switch {
		case bytes.Equal(got[off:end], old[off:end]):
			stripes = append(stripes, "old")
		case bytes.Equal(got[off:end], fresh[off:end]):
			stripes = append(stripes, "new")
		default:
			t.Fatalf("%s stripe at %d is neither the old nor the new data", f0, off)
		}
	}
	r.acked[f0] = got
	after := allBlocks(t, r.c)
	newLayout := layout(t, r.c, filepath.Join(r.c.Mount, f0))
	orphans := map[drive.BlockID]bool{}
	for id := range after {
		if !before[id] {
			orphans[id] = true
		}
	}
	for _, s := range newLayout.Stripes {
		for _, u := range s.Units {
			id, _ := drive.ParseBlockID(u.Block)
			delete(orphans, id)
		}
	}
	t.Logf("%s: f0's stripes read %v after the crash; %d stored blocks no map names", point, stripes, len(orphans))
	switch point {
	case "client/before-commit":
		if slices.Contains(stripes, "new") || len(orphans) == 0 {
			t.Fatalf("want f0 all old and the overwrite's stored units orphaned")
		}
	case "client/after-commit":
		if !slices.Contains(stripes, "new") {
			t.Fatalf("the commit before the crash did not survive")
		}
		// The blocks the commit replaced were queued in it: drained.
		r.waitDrained(t)
		now := allBlocks(t, r.c)
		for i, s := range newLayout.Stripes {
			if s.Gen == oldLayout.Stripes[i].Gen {
				continue
			}
			for _, u := range oldLayout.Stripes[i].Units {
				if id, _ := drive.ParseBlockID(u.Block); now[id] {
					t.Fatalf("block %s replaced by the commit is still stored", u.Block)
				}
			}
		}
	}
	r.collect(t)
	now := allBlocks(t, r.c)
	for id := range orphans {
		if now[id] {
			t.Fatalf("orphan block %v survived collect", id)
		}
	}
	r.verify(t, append(rels[1:], f0))
	r.scanClean(t)
}

// punchCrash crashes a mount punching a hole (fallocate PUNCH_HOLE) over
// the middle stripe of an acknowledged 3-stripe file: before-punch dies
// before the stripe is dropped, after-punch once it is (its blocks queued
// in the same transaction), unacknowledged either way. The file must read
// as before the punch or with that stripe's bytes zero, by the point; the
// dropped stripe's blocks must be freed by the drainers and nothing left
// for integrityscan.
func (r *crashRig) punchCrash(t *testing.T, point string) {
	dir := r.mkdir(t, point)
	r.waitDrained(t)
	m := r.c.StartMount(filepath.Join(r.tmp, strings.ReplaceAll(point, "/", "-")), []string{"--sync-dirops"}, "WEFT_FAILPOINTS="+point+"=crash")
	rel := path.Join(dir, "f")
	data := randBytes(seedOf(point, 0), 3*4*unit)
	if err := writeAcked(filepath.Join(m.Dir, rel), data, true); err != nil {
		t.Fatalf("write %s before the crash point: %v", rel, err)
	}
	r.acked[rel] = data
	before := layout(t, r.c, filepath.Join(r.c.Mount, rel))
	f, err := os.OpenFile(filepath.Join(m.Dir, rel), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 4*unit, 4*unit)
	f.Close()
	if err == nil {
		t.Fatalf("the punch of %s was acknowledged: %s did not fire", rel, point)
	}
	r.waitMountCrash(t, m, point)

	want := append([]byte(nil), data...)
	if point == "client/after-punch" {
		clear(want[4*unit : 8*unit])
	}
	checkFile(t, filepath.Join(r.c.Mount, rel), want)
	r.acked[rel] = want
	after := layout(t, r.c, filepath.Join(r.c.Mount, rel))
	var idx []uint64
	for _, s := range after.Stripes {
		idx = append(idx, s.Index)
	}
	t.Logf("%s: stripes %v after the crash", point, idx)
	if point == "client/after-punch" {
		if len(after.Stripes) != 2 || after.Stripes[1].Index != 2 {
			t.Fatalf("stripes %v after the punch committed, want [0 2]", idx)
		}
		r.waitDrained(t)
		now := allBlocks(t, r.c)
		for _, u := range before.Stripes[1].Units {
			if id, _ := drive.ParseBlockID(u.Block); now[id] {
				t.Fatalf("block %s of the punched stripe is still stored", u.Block)
			}
		}
	} else if len(after.Stripes) != 3 {
		t.Fatalf("stripes %v after a crash before the punch, want [0 1 2]", idx)
	}
	r.verify(t, []string{rel})
	r.scanClean(t)
}

// crashOp is one namespace change of writeBackCrash's workload: a
// create (of a file with data, if data is set), or an unlink.
type crashOp struct {
	unlink bool
	name   string
	data   []byte
}

// writeBackCrash crashes a mount at a write-back point (its 8th hit) —
// before a batch's commit, after it, or in the data barrier that syncs
// the blocks written unsynced for the batch (client/before-data-sync) —
// under rounds of namespace changes in a directory it holds the
// delegation of: empty creates (10 in the first round, which makes a
// batch or two; 40 in each later one, which the flusher commits in
// several), a file written and closed without an fsync, unlinks of 5 of
// the previous round's names, then an fsync of the directory. What the
// crash leaves must be the changes in the order they were made up to
// some point (whole ones, none skipped), at least up to the last fsync
// that returned (a change is durable at fsync, not at its reply or at a
// close: the documented departure); after kvcache/after-commit, at least
// one change past it (the batch committed before the crash). A data file
// the crash kept has all its data, or — its data's commit deferred
// behind its create and lost with what followed — none, and then nothing
// after it was kept.
func (r *crashRig) writeBackCrash(t *testing.T, point string) {
	dir := r.mkdir(t, point)
	m := r.c.StartMount(filepath.Join(r.tmp, strings.ReplaceAll(point, "/", "-")), nil, "WEFT_FAILPOINTS="+point+"=8*crash")
	d := filepath.Join(m.Dir, dir)
	var ops []crashOp
	synced, rounds := 0, 0
	dataAt := map[string]int{} // a data file's index in ops
	do := func(o crashOp) error {
		ops = append(ops, o)
		p := filepath.Join(d, o.name)
		switch {
		case o.unlink:
			return os.Remove(p)
		case o.data != nil:
			dataAt[o.name] = len(ops) - 1
			return writeAcked(p, o.data, false)
		}
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		return f.Close()
	}
work:
	for round := 0; ; round++ {
		if round == 50 {
			t.Fatalf("%s never fired in 50 rounds", point)
		}
		creates := 40
		if round == 0 {
			creates = 10
		}
		for i := 0; i < creates; i++ {
			if do(crashOp{name: fmt.Sprintf("r%02d-%02d", round, i)}) != nil {
				break work // the last op may or may not have been applied
			}
		}
		// Odd rounds' data files are inline (weft mount --inline-max):
		// their bytes ride in the write-back's transaction with the create.
		size := 70 << 10
		if round%2 == 1 {
			size = 3000
		}
		if do(crashOp{name: fmt.Sprintf("r%02d-data", round), data: randBytes(seedOf(point, round), size)}) != nil {
			break
		}
		for i := 0; round > 0 && i < 5; i++ {
			if do(crashOp{unlink: true, name: fmt.Sprintf("r%02d-%02d", round-1, i)}) != nil {
				break work
			}
		}
		if err := syncDir(d); err != nil {
			break
		}
		synced, rounds = len(ops), round+1
	}
	r.waitMountCrash(t, m, point)
	if rounds == 0 {
		t.Fatalf("%s fired before any round was fsynced: nothing to check", point)
	}

	// Listing the directory recalls the dead mount's delegation: it waits
	// for the mount's session to end or meta.RecallTimeout.
	start := time.Now()
	got := listNames(t, filepath.Join(r.c.Mount, dir))
	recall := time.Since(start)
	floor := synced
	k := -1
	for n := len(ops); n >= floor; n-- {
		if slices.Equal(got, applyOps(ops[:n])) {
			k = n
			break
		}
	}
	if k < 0 {
		t.Fatalf("%s holds %v: not the result of the first n changes for any n from %d (the last fsync) to %d", dir, got, floor, len(ops))
	}
	t.Logf("%s: %d rounds fsynced (%d changes), %d changes made; the crash kept %d, lost %d acknowledged but not fsynced; listing it waited %s for the recall",
		point, rounds, synced, len(ops), k, len(ops)-k, recall.Round(100*time.Millisecond))
	if point == "kvcache/after-commit" && k == floor {
		t.Fatalf("no change past the last fsync survived: the batch committed before the crash is lost")
	}
	data := map[string][]byte{}
	for _, o := range ops[:k] {
		if o.data != nil {
			data[o.name] = o.data
		}
	}
	for _, name := range got {
		p := filepath.Join(r.c.Mount, dir, name)
		rel := path.Join(dir, name)
		if want, ok := data[name]; ok {
			b, err := os.ReadFile(p)
			switch {
			case err != nil:
				t.Fatalf("%s: %v", rel, err)
			case bytes.Equal(b, want):
				r.acked[rel] = want
			case len(b) != 0:
				t.Fatalf("%s: %d bytes, neither none nor its data", rel, len(b))
			case dataAt[name] < synced:
				t.Fatalf("%s: empty, and an fsync after its close returned", rel)
			case k != dataAt[name]+1:
				t.Fatalf("%s: empty, yet %d changes made after it were kept: its data's commit was not in order", rel, k-dataAt[name]-1)
			default:
				r.acked[rel] = b
			}
			continue
		}
		st, err := os.Lstat(p)
		if err != nil || !st.Mode().IsRegular() || st.Size() != 0 {
			t.Fatalf("%s: %v, %v", rel, st, err)
		}
	}
	r.dirs[dir] = got
	r.scanClean(t)
}

// applyOps returns the names ops leave in an empty directory, sorted.
func applyOps(ops []crashOp) []string {
	set := map[string]bool{}
	for _, o := range ops {
		if o.unlink {
			delete(set, o.name)
		} else {
			set[o.name] = true
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// drainCrash crashes node's drainer between deleting a batch's block
// files and acking their queue entries: the entries stay queued with
// their files gone, and after the restart the drainer deletes them again
// (not found: fine) and acks them.
func (r *crashRig) drainCrash(t *testing.T, node string) {
	const point = "server/drain-before-ack"
	dir := r.mkdir(t, point)
	var victims, kept []string
	for i := 0; len(victims) < 2 || len(kept) < 1; i++ {
		if i == 12 {
			t.Fatalf("12 files of a whole stripe and none with %d on %s", 2-len(victims), node)
		}
		rel := path.Join(dir, fmt.Sprintf("f%02d", i))
		data := randBytes(seedOf(point, i), 4*unit+70<<10)
		if err := writeDurably(filepath.Join(r.stage, rel), data); err != nil {
			t.Fatal(err)
		}
		r.acked[rel] = data
		on := false
		for _, s := range layout(t, r.c, filepath.Join(r.c.Mount, rel)).Stripes {
			for _, u := range s.Units {
				on = on || u.Node == node
			}
		}
		if on && len(victims) < 2 {
			victims = append(victims, rel)
		} else {
			kept = append(kept, rel)
		}
	}
	r.waitDrained(t)
	r.arm(t, node, point)
	for _, rel := range victims {
		must(t, os.Remove(filepath.Join(r.stage, rel)))
		delete(r.acked, rel)
	}
	must(t, syncDir(filepath.Join(r.stage, dir)))
	r.waitCrash(t, node, point)
	left := r.leftovers(t, node)
	gone := len(left.queued) - len(left.stored)
	t.Logf("%s: %s crashed with %d deletes queued on its drives, %d of their block files already deleted", point, node, len(left.queued), gone)
	if gone == 0 {
		t.Fatalf("want queued deletes whose block files are gone")
	}
	r.recover(t, node)
	r.waitDrained(t)
	for _, rel := range victims {
		if _, err := os.Stat(filepath.Join(r.c.Mount, rel)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s after its unlink was fsynced: %v", rel, err)
		}
	}
	r.verify(t, kept)
	r.scanClean(t)
}

// checkpointCrash crashes node at a job checkpoint point during a
// mediascan (each drive's tasks are pinned to its node, so the node runs
// some): the task waits for its node, which runs it again from its last
// checkpoint once restarted, and no drive has a block left unscanned.
// (Some may be scanned twice: the items since the lost checkpoint, and
// those a task's owner processes past a steal's cut before its next
// checkpoint shows it the cut.)
func (r *crashRig) checkpointCrash(t *testing.T, point, node string) {
	r.seed(t, point)
	r.waitDrained(t)
	r.arm(t, node, point)
	id := startJob(t, r.c, "mediascan", "--policy", "high")
	r.waitCrash(t, node, point)
	r.recover(t, node)
	j := r.waitJob(t, id, 3*time.Minute)
	if j.State != job.Succeeded || len(j.Phases) == 0 {
		t.Fatalf("mediascan after the crash: %+v", j)
	}
	blocks := r.blocksPerDrive(t)
	var total, scanned int64
	for _, s := range j.Phases[0].Scopes {
		if s.Counts["scanned"] < blocks[s.Scope] || s.Counts["bad"] != 0 {
			t.Fatalf("drive %s (node %s): scanned %d blocks, %d bad; it holds %d", s.Scope, s.Affinity, s.Counts["scanned"], s.Counts["bad"], blocks[s.Scope])
		}
		total += blocks[s.Scope]
		scanned += s.Counts["scanned"]
	}
	if len(j.Phases[0].Scopes) != len(blocks) {
		t.Fatalf("mediascan reported %d drives, the cluster has %d", len(j.Phases[0].Scopes), len(blocks))
	}
	t.Logf("%s: %s crashed in mediascan %d, which then scanned all %d blocks (%d scans)", point, node, id, total, scanned)
	r.scanClean(t)
}

// electCrash crashes a node right after it won the coordinator election:
// the next candidate takes over once the crashed node's lease expires,
// and a job running through the handover completes.
//
// The candidates queue by the creation of their election keys, and a
// node's restart puts it last; so the node to crash is restarted with
// the point armed, then every node queued before it but the coordinator,
// and the coordinator is stopped. The crashed node is the plain node n4
// unless it is the coordinator: two etcd members must not be down at once.
func (r *crashRig) electCrash(t *testing.T) {
	const point = "job/after-elect"
	r.seed(t, point)
	id := r.heldJob(t)
	head := r.queue(t)[0]
	node := "n4"
	if head == node {
		node = "n1"
	}
	r.arm(t, node, point)
	for _, n := range r.queue(t)[1:] {
		if n == node {
			break
		}
		r.restart(t, n)
	}
	if q := r.queue(t); len(q) < 2 || q[0] != head || q[1] != node {
		t.Fatalf("election queue %v, want %s then %s", q, head, node)
	}
	stop := time.Now()
	must(t, r.c.Ctl.Stop(r.ctx, head)) // it resigns early in its shutdown
	r.waitCrash(t, node, point)
	crashed := time.Since(stop)
	next := r.waitCoordinator(t, head, node)
	t.Logf("%s: %s stopped; %s elected and crashed within %s; %s coordinator %s after the stop, once %s's lease expired",
		point, head, node, crashed.Round(100*time.Millisecond), next, time.Since(stop).Round(100*time.Millisecond), node)
	must(t, r.c.Ctl.Start(r.ctx, head))
	r.recover(t, node)
	r.releaseJob(t, id)
	r.scanClean(t)
}

// resignCrash crashes the coordinator right after it resigned on a
// graceful stop: a successor is elected at once, before the crashed node's
// lease has expired, and a job running through the handover completes.
// The node is made coordinator by restarting it with the point armed and
// then every node queued before it.
func (r *crashRig) resignCrash(t *testing.T) {
	const point = "job/after-resign"
	const node = "n3"
	r.seed(t, point)
	id := r.heldJob(t)
	r.arm(t, node, point)
	for q := r.queue(t); q[0] != node; q = r.queue(t) {
		r.restart(t, q[0])
	}
	stop := time.Now()
	must(t, r.c.Ctl.Stop(r.ctx, node)) // SIGTERM: it resigns, then the point kills it
	r.waitCrash(t, node, point)
	next := r.waitCoordinator(t, node)
	took := time.Since(stop)
	nodes, err := r.c.Admin.Nodes(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(nodes, func(n cluster.Node) bool { return n.Name == node && n.State == cluster.Up }) {
		t.Fatalf("%s became coordinator only once %s's lease expired (%s after the stop): the resignation did not hand over", next, node, took)
	}
	t.Logf("%s: %s resigned and crashed; %s coordinator %s after the stop, before %s's lease expired", point, node, next, took.Round(10*time.Millisecond), node)
	r.recover(t, node)
	r.releaseJob(t, id)
	r.scanClean(t)
}
