package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// fsckDataEnv is an FsckEnv over a clienttest fixture: its namespace,
// a restriper over its data path, and job data in memory.
type fsckDataEnv struct {
	*dataEnv
	data *memData
}

func (e fsckDataEnv) JobData() TierData { return e.data }

var _ FsckEnv = fsckDataEnv{}

// fsckOnFixture returns the fsck job type wired to fixture f: the drives
// of its topology, its nodes' block services.
func fsckOnFixture(t *testing.T, f *clienttest.Fixture) *fsckType {
	ty := newFsck()
	ty.layout.drives = newDriveNodes(func(context.Context, Env) ([]serviceDrive, error) {
		var out []serviceDrive
		for _, d := range f.Topo.States() {
			out = append(out, serviceDrive{ID: drive.ID(d.ID), Node: d.Node, Up: d.Up})
		}
		return out, nil
	})
	var mu sync.Mutex
	clients := map[string]*block.Client{}
	ty.layout.blocks = func(_ context.Context, _ Env, node string) (headerReader, error) {
		mu.Lock()
		defer mu.Unlock()
		if c := clients[node]; c != nil {
			return c, nil
		}
		for _, n := range f.Nodes {
			if n.Name == node {
				c, err := block.Dial(n.Addr)
				if err != nil {
					return nil, err
				}
				t.Cleanup(func() { c.Close() })
				clients[node] = c
				return c, nil
			}
		}
		return nil, fmt.Errorf("no node %q", node)
	}
	return ty
}

// runFsckType runs the phases of ty in order, as the engine would, and
// returns the sum of the counters and the report's summary.
func runFsckType(t *testing.T, e FsckEnv, ty *fsckType, id job.JobID, params map[string]string) (map[string]int64, string) {
	t.Helper()
	if err := ty.CheckParams(params); err != nil {
		t.Fatal(err)
	}
	ty.layout.drives = newDriveNodes(ty.layout.drives.list) // the drive list as it is now
	j := &job.Job{ID: id, Type: "fsck", Params: params, Parallelism: 3, Created: time.Now()}
	counts := map[string]int64{}
	var summary string
	for i, ph := range ty.Phases() {
		j.Phase = i
		r, _ := runPhase(t, e, j, ph)
		for k, v := range r.Counts {
			counts[k] += v
		}
		j.Reports = append(j.Reports, job.PhaseReport{Name: ph.Name(), Scopes: []job.ScopeReport{{Scope: "all", Counts: r.Counts}}})
		summary = r.Summary
	}
	return counts, summary
}

// The layout checks on a cluster in a test: units whose puts were
// acknowledged but not stored (drive/put-lose-block), blocks whose
// headers name another file, and usage updates skipped
// (meta/create-no-usage) are found exactly by a dry run, which changes
// nothing; a repair fixes them all (units rebuilt, the counters
// corrected); a second run finds none, and every file reads back. A unit
// on a drive that is down is skipped, not a finding.
func TestFsckLayout(t *testing.T) {
	const lost, badHeaders, noUsage = 3, 2, 4
	de, f := newDataEnv(t)
	e := fsckDataEnv{de, &memData{m: map[string][]byte{}}}
	ty := fsckOnFixture(t, f)
	c := f.Client(clienttest.Unit)
	want := map[meta.LIN][]byte{}
	var files []meta.LIN // in write order: the first lost have a unit lost
	for i := range 6 {
		data := clienttest.RandBytes(2*4*clienttest.Unit+100*i, uint64(i+1))
		if i < lost { // one unit of the file acknowledged, not stored
			if err := failpoint.Enable("drive/put-lose-block", "1*error"); err != nil {
				t.Fatal(err)
			}
		}
		lin := f.WriteClosed(c, fmt.Sprintf("f%d", i), "ec:4+2", data)
		want[lin] = data
		files = append(files, lin)
		if failpoint.Fired("drive/put-lose-block") != 0 || len(failpoint.Names()) != 0 {
			t.Fatalf("a put did not fire the failpoint: %v", failpoint.Names())
		}
	}
	// Blocks of other files' headers (in files without a lost unit: a
	// repair rebuilds every unit of its stripe that does not read, so a
	// stripe with both would have one finding repaired and the other
	// changed meanwhile): rewritten under the same id with another owner.
	for _, lin := range files[lost : lost+badHeaders] {
		u := f.Stripes(lin)[1].Units[0]
		d := f.Drive(u.Drive)
		b, hdr, err := d.Get(bg, drive.BlockID(u.Block), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Delete(drive.BlockID(u.Block)); err != nil {
			t.Fatal(err)
		}
		hdr = drive.BlockHeader{ID: hdr.ID, Owner: hdr.Owner + 1000, Stripe: hdr.Stripe, Unit: hdr.Unit, Generation: hdr.Generation}
		if err := d.Put(bg, hdr, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if err := failpoint.Enable("meta/create-no-usage", fmt.Sprintf("%d*error", noUsage)); err != nil {
		t.Fatal(err)
	}
	for i := range noUsage {
		f.Create(fmt.Sprintf("empty%d", i), "")
	}
	failpoint.Disable("meta/create-no-usage")

	wantFound := map[meta.FsckKind]int64{meta.FsckMissingUnit: lost, meta.FsckBadHeader: badHeaders, meta.FsckUsageCounter: 1}
	counts, sum := runFsckType(t, e, ty, 1, map[string]string{"dry-run": "true"})
	for _, k := range append(meta.FsckKinds(), meta.FsckLayoutKinds()...) {
		if counts[string(k)+".found"] != wantFound[k] || counts[string(k)+".repaired"] != 0 {
			t.Errorf("dry run: %s found %d repaired %d, want %d and 0", k, counts[string(k)+".found"], counts[string(k)+".repaired"], wantFound[k])
		}
	}
	if counts["skipped"] != 0 || counts["checked"] == 0 {
		t.Errorf("dry run counts %v", counts)
	}
	for _, w := range []string{"missing-unit", "bad-header", "usage-counter", `(pool "p0")`, "dry run", "/f"} {
		if !strings.Contains(sum, w) {
			t.Errorf("dry run report lacks %q:\n%s", w, sum)
		}
	}
	t.Logf("dry run's report:\n%s", sum)
	if again, _ := runFsckType(t, e, ty, 2, map[string]string{"dry-run": "true", "only": "layout"}); again[string(meta.FsckMissingUnit)+".found"] != lost {
		t.Fatalf("the dry run changed something: %v", again)
	}

	counts, sum = runFsckType(t, e, ty, 3, map[string]string{})
	for k, n := range wantFound {
		if counts[string(k)+".found"] != n || counts[string(k)+".repaired"] != n {
			t.Errorf("repair run: %s: %v\n%s", k, counts, sum)
		}
	}
	counts, sum = runFsckType(t, e, ty, 4, map[string]string{"dry-run": "true"})
	for _, k := range append(meta.FsckKinds(), meta.FsckLayoutKinds()...) {
		if counts[string(k)+".found"] != 0 {
			t.Errorf("after the repair: %s found %d\n%s", k, counts[string(k)+".found"], sum)
		}
	}
	if !strings.Contains(sum, "no findings") {
		t.Errorf("after the repair:\n%s", sum)
	}
	for lin, data := range want {
		clienttest.MustEqual(t, fmt.Sprintf("LIN %d", lin), f.ReadBack(lin), data)
	}

	// A drive down: its units are skipped, and a block missing there is
	// not fsck's to find.
	u := f.Stripes(files[0])[0].Units[2]
	if err := f.Drive(u.Drive).Delete(drive.BlockID(u.Block)); err != nil {
		t.Fatal(err)
	}
	f.SetDriveDown(u.Drive, true)
	counts, _ = runFsckType(t, e, ty, 5, map[string]string{"dry-run": "true", "only": "layout"})
	if counts["missing-unit.found"] != 0 || counts["skipped"] == 0 || counts["entries.found"] != 0 {
		t.Errorf("with drive %d down: %v", u.Drive, counts)
	}
	f.SetDriveDown(u.Drive, false)
	counts, _ = runFsckType(t, e, ty, 6, map[string]string{"only": "layout"})
	if counts["missing-unit.found"] != 1 || counts["missing-unit.repaired"] != 1 || counts["skipped"] != 0 {
		t.Errorf("with the drive back: %v", counts)
	}
}

// A stripe with more units missing than its parity is not rebuilt: the
// finding counts as failed, and the stripe goes to the lost-data list.
func TestFsckLayoutLost(t *testing.T) {
	de, f := newDataEnv(t)
	e := fsckDataEnv{de, &memData{m: map[string][]byte{}}}
	ty := fsckOnFixture(t, f)
	lin := f.WriteClosed(f.Client(clienttest.Unit), "f", "ec:4+2", clienttest.RandBytes(4*clienttest.Unit, 1))
	s := f.Stripes(lin)[0]
	for _, i := range []int{0, 1, 5} {
		if err := f.Drive(s.Units[i].Drive).Delete(drive.BlockID(s.Units[i].Block)); err != nil {
			t.Fatal(err)
		}
	}
	counts, sum := runFsckType(t, e, ty, 1, map[string]string{"only": "layout"})
	if counts["missing-unit.found"] != 3 || counts["missing-unit.failed"] != 3 || counts["missing-unit.repaired"] != 0 || counts[countLost] == 0 {
		t.Fatalf("counts %v\n%s", counts, sum)
	}
	if l, err := f.Meta.ListLost(bg, 0, 10); err != nil || len(l) != 1 || l[0].LIN != lin {
		t.Fatalf("lost list %+v, %v", l, err)
	}
}

// only is checked: namespace, layout, or absent (both); anything else is
// refused naming the value and the choices. Each half runs alone.
func TestFsckOnly(t *testing.T) {
	ty := newFsck()
	err := ty.CheckParams(map[string]string{"only": "bogus"})
	if !errors.Is(err, job.ErrInvalid) || !strings.Contains(err.Error(), `only="bogus"`) || !strings.Contains(err.Error(), "namespace or layout") {
		t.Fatalf("only=bogus: %v", err)
	}
	m := newMeta(t)
	e := fsckTestEnv{metaEnv{m}, &memData{m: map[string][]byte{}}}
	mustFile(t, m, meta.RootLIN, "f")
	c, sum := runFsck(t, e, 1, map[string]string{"only": "namespace"})
	if c["checked"] == 0 || strings.Contains(sum, "pools' usage") {
		t.Fatalf("only=namespace: %v\n%s", c, sum)
	}
	c, sum = runFsck(t, e, 2, map[string]string{"only": "layout"})
	if c["checked"] != 1 || strings.Contains(sum, "back-pointers") || !strings.Contains(sum, "1 pools' usage") {
		t.Fatalf("only=layout: %v\n%s", c, sum)
	}
}

// A unit check that reads a stripe map a writer then replaced (its old
// blocks deleted) is no finding: the map is read again and the new one
// checked — whether the generation moved (an overwrite) or started over
// (a truncate to 0 and a new write).
func TestFsckLayoutMapMoved(t *testing.T) {
	de, f := newDataEnv(t)
	e := fsckDataEnv{de, &memData{m: map[string][]byte{}}}
	ty := fsckOnFixture(t, f)
	c := f.Client(clienttest.Unit)
	data := clienttest.RandBytes(4*clienttest.Unit, 1)
	lin := f.WriteClosed(c, "f", "ec:4+2", data)
	p := &fsckStripes{ty}
	for _, truncate := range []bool{true, false} { // the truncate first: from generation 1 to 1
		old := f.Stripes(lin)[0]
		fh, err := c.Open(bg, lin, true)
		if err != nil {
			t.Fatal(err)
		}
		if truncate {
			if err := fh.Truncate(bg, 0); err != nil {
				t.Fatal(err)
			}
		}
		clienttest.WriteAll(t, fh, clienttest.RandBytes(len(data), 2), 50*clienttest.KiB)
		if err := fh.Close(bg); err != nil {
			t.Fatal(err)
		}
		f.DrainDeletes()
		now := f.Stripes(lin)[0]
		if slices.Equal(now.Units, old.Units) || (truncate && now.Gen != old.Gen) {
			t.Fatalf("truncate %v: the stripe went from %+v to %+v", truncate, old, now)
		}
		res := job.ItemResult{Counts: map[string]int64{}}
		fs, err := p.checkStripe(bg, e, lin, old, &res)
		if err != nil || len(fs) != 0 || res.Counts["checked"] != int64(len(now.Units)) {
			t.Fatalf("truncate %v: findings %v, counts %v, %v", truncate, fs, res.Counts, err)
		}
		if fs, _, _, err := p.checkUnits(bg, e, lin, old); err != nil || len(fs) != len(old.Units) {
			t.Fatalf("truncate %v: the old map's units: %v, %v", truncate, fs, err)
		}
	}
}
