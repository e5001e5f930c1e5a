package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// memData is job data in memory, as job.Engine keeps it in etcd.
type memData struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (d *memData) key(id job.JobID, k string) string { return fmt.Sprintf("%d/%s", id, k) }

func (d *memData) PutData(_ context.Context, id job.JobID, k string, v []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m[d.key(id, k)] = slices.Clone(v)
	return nil
}

func (d *memData) GetData(_ context.Context, id job.JobID, k string) ([]byte, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.m[d.key(id, k)]
	return v, ok, nil
}

func (d *memData) DeleteData(_ context.Context, id job.JobID, k string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, d.key(id, k))
	return nil
}

func (d *memData) ListData(_ context.Context, id job.JobID, prefix, after string, limit int) ([]job.DataEntry, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var keys []string
	base := d.key(id, "")
	for k := range d.m {
		if rest, ok := strings.CutPrefix(k, base); ok && strings.HasPrefix(rest, prefix) && rest > after {
			keys = append(keys, rest)
		}
	}
	slices.Sort(keys)
	var out []job.DataEntry
	for _, k := range keys[:min(limit, len(keys))] {
		out = append(out, job.DataEntry{Key: k, Value: d.m[base+k]})
	}
	return out, nil
}

// tierEnv is a TierEnv over a clienttest fixture (namespace, data path,
// files) and a control plane on a test etcd (pools, the policy).
type tierEnv struct {
	*clusterDataEnv
	data  *memData
	files *client.Client
}

var _ TierEnv = (*tierEnv)(nil)

func (e *tierEnv) JobData() TierData     { return e.data }
func (e *tierEnv) Files() *client.Client { return e.files }

// The tier job's phases on one node: the scan keeps the candidates and
// list entries per page, the plan takes nothing toward a pool without
// space and both .tmp files to delete, the act deletes the one that
// still matches and keeps the one renamed since the scan, the report
// writes the list file and the per-rule table; a plan made twice is the
// same plan.
func TestTierPhases(t *testing.T) {
	ce, f := newClusterDataEnv(t, "mirror:2", "p0", "cold")
	cs := ce.cs
	c := f.Client(clienttest.Unit)
	e := &tierEnv{clusterDataEnv: ce, data: &memData{m: map[string][]byte{}}, files: c}
	if _, err := cs.InstallPolicy(bg, `RULE 'tmp' DELETE WHERE NAME LIKE '%.tmp'
RULE 'cold' MIGRATE FROM POOL 'p0' WEIGHT(FILE_SIZE) TO POOL 'cold'
RULE 'all' LIST 'all'
`, "test", ""); err != nil {
		t.Fatal(err)
	}
	lins := map[string]meta.LIN{}
	for i, name := range []string{"a.tmp", "b.dat", "c.dat", "d.tmp"} {
		lins[name] = f.WriteClosed(c, name, "mirror:2", clienttest.RandBytes(1000*(i+1), uint64(i)))
	}
	ty := newTier()
	j := &job.Job{ID: 5, Type: "tier", Params: map[string]string{}, Parallelism: 2, Created: time.Now()}
	if err := ty.ValidateParams(bg, e, j.Params); err != nil {
		t.Fatal(err)
	}
	ph := ty.Phases()
	var reports []job.PhaseReport
	run := func(i int) job.ItemResult {
		t.Helper()
		j.Phase, j.Reports = i, slices.Clone(reports)
		res, _ := runPhase(t, e, j, ph[i])
		reports = append(reports[:i], job.PhaseReport{Name: ph[i].Name(), Scopes: []job.ScopeReport{{Counts: res.Counts}}})
		return res
	}

	scan := run(0)
	if scan.Counts["files"] != 4 || scan.Counts[ruleCount(0, "matched")] != 2 || scan.Counts[ruleCount(1, "matched")] != 4 || scan.Counts[ruleCount(2, "matched")] != 4 {
		t.Fatalf("scan counts: %v", scan.Counts)
	}
	plan := run(1)
	if plan.Counts[ruleCount(0, "selected")] != 2 || plan.Counts[ruleCount(1, "selected")] != 0 ||
		!strings.Contains(plan.Summary, "out of candidates") {
		t.Fatalf("plan: %v\n%s", plan.Counts, plan.Summary)
	}
	before := slices.Clone(e.data.keysUnder("5/t/"))
	if again := run(1); again.Summary != plan.Summary || !slices.Equal(e.data.keysUnder("5/t/"), before) {
		t.Fatalf("the plan made again differs:\n%s\n%s", again.Summary, plan.Summary)
	}

	// d.tmp is renamed after the scan: its rule no longer matches it.
	if err := f.Meta.Rename(bg, meta.RootLIN, "d.tmp", meta.RootLIN, "d.keep", 0); err != nil {
		t.Fatal(err)
	}
	act := run(2)
	if act.Counts[ruleCount(0, "files")] != 1 || act.Counts[ruleCount(0, "changed")] != 1 {
		t.Fatalf("act: %v", act.Counts)
	}
	for name, gone := range map[string]bool{"a.tmp": true, "b.dat": false, "c.dat": false, "d.keep": false} {
		_, err := f.Meta.Lookup(bg, meta.RootLIN, name)
		if gone != (err != nil) {
			t.Errorf("%s after the act: %v", name, err)
		}
	}

	rep := run(3)
	if !strings.Contains(rep.Summary, "all: /.weft/lists/all.5") {
		t.Fatalf("report:\n%s", rep.Summary)
	}
	lists, err := f.Meta.Lookup(bg, meta.RootLIN, ".weft")
	if err != nil {
		t.Fatal(err)
	}
	if lists, err = f.Meta.Lookup(bg, lists.LIN, "lists"); err != nil {
		t.Fatal(err)
	}
	a, err := f.Meta.Lookup(bg, lists.LIN, "all.5")
	if err != nil {
		t.Fatal(err)
	}
	fh, err := c.Open(bg, a.LIN, false)
	if err != nil {
		t.Fatal(err)
	}
	got := clienttest.ReadAll(t, fh, 4096)
	fh.Close(bg)
	if want := "/a.tmp\n/b.dat\n/c.dat\n/d.tmp\n"; string(got) != want {
		t.Fatalf("list file: %q, want %q", got, want)
	}
	t.Logf("plan:\n%s\nreport:\n%s", plan.Summary, rep.Summary)
}

// keysUnder returns the keys with prefix, sorted.
func (d *memData) keysUnder(prefix string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for k := range d.m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
