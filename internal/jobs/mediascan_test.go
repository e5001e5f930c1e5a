package jobs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// flakyBlocks is a node's real block service with faults injected per
// block: verifyFails[id] failed verifications before reads succeed again
// (-1: always), and a header that does not read for badHeader blocks.
type flakyBlocks struct {
	scanBlocks
	mu          sync.Mutex
	verifyFails map[drive.BlockID]int
	badHeader   map[drive.BlockID]bool
	verifies    map[drive.BlockID]int
}

func (f *flakyBlocks) Verify(ctx context.Context, d drive.ID, id drive.BlockID) error {
	f.mu.Lock()
	f.verifies[id]++
	n := f.verifyFails[id]
	if n > 0 {
		f.verifyFails[id] = n - 1
	}
	bad := f.badHeader[id]
	f.mu.Unlock()
	switch {
	case bad:
		return &drive.CorruptError{Drive: d, Block: id, Segment: drive.HeaderSegment, Reason: "injected"}
	case n != 0:
		return &drive.CorruptError{Drive: d, Block: id, Segment: 0, Reason: "injected"}
	}
	return f.scanBlocks.Verify(ctx, d, id)
}

func (f *flakyBlocks) Stat(ctx context.Context, d drive.ID, id drive.BlockID) (drive.BlockHeader, int64, time.Time, error) {
	f.mu.Lock()
	bad := f.badHeader[id]
	f.mu.Unlock()
	if bad {
		return drive.BlockHeader{}, 0, time.Time{}, &drive.CorruptError{Drive: d, Block: id, Segment: drive.HeaderSegment, Reason: "injected"}
	}
	return f.scanBlocks.Stat(ctx, d, id)
}

// repairCall is one RepairDamaged call the fake repairer saw.
type repairCall struct {
	lin   meta.LIN
	index uint64
	d     meta.DriveID
	block meta.BlockID
}

// mediaRun drives the scan phase like the engine and returns its tasks and
// the counters summed per scope.
func mediaRun(t *testing.T, e Env, p job.Phase, j *job.Job) ([]job.TaskSpec, map[string]map[string]int64, int64) {
	t.Helper()
	tasks, err := p.Split(bg, e, j)
	if err != nil {
		t.Fatalf("split: %v", err)
	}
	counts := map[string]map[string]int64{}
	var bytes int64
	for _, tk := range tasks {
		if counts[tk.Scope] == nil {
			counts[tk.Scope] = map[string]int64{}
		}
		for cursor := tk.From; cursor < tk.To; {
			items, err := p.Items(bg, e, tk.Scope, cursor, tk.To, 2)
			if err != nil {
				t.Fatalf("items: %v", err)
			}
			for _, it := range items {
				r, err := p.Process(bg, e, j, tk.Scope, it)
				if err != nil {
					t.Fatalf("process %s/%d: %v", tk.Scope, it, err)
				}
				if r.Items != r.Counts[countScanned] || r.Errors != r.Counts[countBad] {
					t.Fatalf("item result %+v: Items and Errors must be the scanned and bad counts", r)
				}
				for k, v := range r.Counts {
					counts[tk.Scope][k] += v
				}
				bytes += r.Bytes
				cursor = it + 1
			}
			if len(items) < 2 {
				break
			}
		}
	}
	return tasks, counts, bytes
}

// The scan finds a block flipped on disk and has its stripe rebuilt, counts
// a block that fails twice then reads as transient, leaves a bad orphan to
// collect, and reports a bad block whose header does not read as
// unfixable — unless it was never written to the disk (empty), an orphan
// too; the summary's table says so per drive.
func TestMediaScan(t *testing.T) {
	e := newCollectEnv(t)
	ms := newMediaScan(e.lister)
	fb := &flakyBlocks{scanBlocks: e.bc, verifyFails: map[drive.BlockID]int{}, badHeader: map[drive.BlockID]bool{}, verifies: map[drive.BlockID]int{}}
	ms.blocks = func(_ context.Context, _ Env, node string) (scanBlocks, error) {
		if node != "n1" {
			t.Fatalf("scan asked for the block service of %s", node)
		}
		return fb, nil
	}
	var mu sync.Mutex
	var calls []repairCall
	ms.repair = func(_ context.Context, _ Env, lin meta.LIN, index uint64, d meta.DriveID, block meta.BlockID, why string) (restripe.RepairResult, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, repairCall{lin, index, d, block})
		if !strings.Contains(why, "re-reads") {
			t.Errorf("repair reason %q does not say the block was re-read", why)
		}
		return restripe.RepairResult{LIN: lin, Stripe: index, Committed: true, Rebuilt: 1}, nil
	}

	a, err := e.m.Create(bg, meta.RootLIN, "f", meta.NewInode{Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	var d1 []drive.BlockID
	for s := range uint64(3) {
		b1, b2 := e.put(t, 1, uint64(a.LIN), s, 0), e.put(t, 2, uint64(a.LIN), s, 1)
		st := meta.Stripe{Index: s, Protection: meta.Mirror(2), DataLen: 100, Units: []meta.Unit{
			{Drive: 1, Block: meta.BlockID(b1), Length: 100, CRC: 1},
			{Drive: 2, Block: meta.BlockID(b2), Length: 100, CRC: 1},
		}}
		if _, err := e.m.CommitStripe(bg, a.LIN, st, 0, meta.CommitOptions{StripeSize: 100}); err != nil {
			t.Fatal(err)
		}
		d1 = append(d1, b1)
	}
	// Stripe 0's unit on d1: a byte flipped on disk.
	flip(t, e.drives[0], d1[0])
	// Stripe 1's unit on d1: fails twice, then reads.
	fb.verifyFails[d1[1]] = 2
	// A bad orphan on d1 (its owner is gone), and a bad block whose header
	// does not read on d2.
	orphan := e.put(t, 1, 999999, 0, 0)
	flip(t, e.drives[0], orphan)
	noHeader := e.put(t, 2, uint64(a.LIN), 5, 0)
	fb.badHeader[noHeader] = true
	// A block never written to the disk on d2 (empty, as a machine crash
	// leaves an unsynced write): an orphan left to collect.
	torn := e.put(t, 2, uint64(a.LIN), 6, 0)
	ts := torn.String()
	if err := os.Truncate(filepath.Join(e.drives[1].Path(), "blocks", ts[:2], ts), 0); err != nil {
		t.Fatal(err)
	}

	// Many tasks per drive: boundaries fall between blocks of one drive.
	j := &job.Job{Type: "mediascan", Params: map[string]string{}, Parallelism: 64}
	tasks, counts, bytes := mediaRun(t, e, ms.Phases()[0], j)
	for _, tk := range tasks {
		if tk.Node != "n1" {
			t.Fatalf("task %+v not pinned to the drive's node n1", tk)
		}
	}
	want := map[string]map[string]int64{
		"d1": {countScanned: 4, countBad: 2, countFixed: 1, countTransient: 1, countOrphaned: 1},
		"d2": {countScanned: 5, countBad: 2, countUnfixable: 1, countOrphaned: 1},
	}
	for scope, w := range want {
		for _, k := range []string{countScanned, countBad, countFixed, countTransient, countUnfixable, countOrphaned} {
			if counts[scope][k] != w[k] {
				t.Fatalf("%s: counts %v, want %v", scope, counts[scope], w)
			}
		}
	}
	if len(calls) != 1 || calls[0] != (repairCall{a.LIN, 0, 1, meta.BlockID(d1[0])}) {
		t.Fatalf("repairs %+v, want stripe 0 of LIN %d away from d1 block %v", calls, a.LIN, d1[0])
	}
	if n := fb.verifies[d1[0]]; n != 1+mediaRereads {
		t.Fatalf("bad block verified %d times, want 1 + %d re-reads", n, mediaRereads)
	}
	for id, n := range fb.verifies {
		if id != d1[0] && id != d1[1] && id != orphan && id != noHeader && id != torn && n != 1 {
			t.Fatalf("good block %v verified %d times, want once", id, n)
		}
	}
	if bytes < 8*100 {
		t.Fatalf("bytes read %d, want at least every block once", bytes)
	}

	// The summary reads the scan's per-drive report.
	var scopes []job.ScopeReport
	for _, s := range []string{"d2", "d1"} {
		scopes = append(scopes, job.ScopeReport{Scope: s, Nodes: []string{"n1"}, Counts: counts[s], Bytes: 400})
	}
	sj := &job.Job{Type: "mediascan", Phase: 1, Reports: []job.PhaseReport{{Name: "scan", Scopes: scopes}}}
	r, err := ms.Phases()[1].Process(bg, e, sj, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(r.Summary), "\n")
	wantRows := [][]string{
		{"DRIVE", "NODE", "SCANNED", "MIB", "BAD", "FIXED", "TRANSIENT", "UNFIXABLE", "ORPHANED"},
		{"d1", "n1", "4", "0.0", "2", "1", "1", "0", "1"},
		{"d2", "n1", "5", "0.0", "2", "0", "0", "1", "1"},
		{"total", "9", "0.0", "4", "1", "1", "1", "2"},
	}
	if len(lines) != len(wantRows) {
		t.Fatalf("summary:\n%s", r.Summary)
	}
	for i, w := range wantRows {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Fatalf("summary line %d = %q, want %q\n%s", i, got, w, r.Summary)
		}
	}
	if !strings.Contains(r.Note, "4 bad, 1 fixed") {
		t.Fatalf("summary note %q", r.Note)
	}
	if _, err := ms.Phases()[1].Process(bg, e, &job.Job{Phase: 1}, "", 0); err == nil {
		t.Fatal("summary without a scan report succeeded")
	}
}

// Repairs that cannot rebuild the unit count as unfixable, not as an
// error of the job; other repair errors are returned for a retry.
func TestMediaScanUnfixable(t *testing.T) {
	e := newCollectEnv(t)
	ms := newMediaScan(e.lister)
	a, err := e.m.Create(bg, meta.RootLIN, "f", meta.NewInode{Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	b1, b2 := e.put(t, 1, uint64(a.LIN), 0, 0), e.put(t, 2, uint64(a.LIN), 0, 1)
	st := meta.Stripe{Index: 0, Protection: meta.Mirror(2), DataLen: 100, Units: []meta.Unit{
		{Drive: 1, Block: meta.BlockID(b1), Length: 100, CRC: 1}, {Drive: 2, Block: meta.BlockID(b2), Length: 100, CRC: 1}}}
	if _, err := e.m.CommitStripe(bg, a.LIN, st, 0, meta.CommitOptions{StripeSize: 100}); err != nil {
		t.Fatal(err)
	}
	flip(t, e.drives[0], b1)
	repairErr := client.ErrUnavailable
	ms.repair = func(context.Context, Env, meta.LIN, uint64, meta.DriveID, meta.BlockID, string) (restripe.RepairResult, error) {
		return restripe.RepairResult{}, repairErr
	}
	j := &job.Job{Type: "mediascan", Params: map[string]string{"drives": "d1"}, Parallelism: 1}
	_, counts, _ := mediaRun(t, e, ms.Phases()[0], j)
	if counts["d1"][countUnfixable] != 1 || counts["d1"][countFixed] != 0 || len(counts) != 1 {
		t.Fatalf("counts %v, want d1 only with 1 unfixable", counts)
	}
	repairErr = errors.New("namespace unreachable")
	p := ms.Phases()[0]
	tasks, _ := p.Split(bg, e, j)
	items, _ := p.Items(bg, e, tasks[0].Scope, tasks[0].From, tasks[0].To, 100)
	var failed bool
	for _, it := range items {
		if _, err := p.Process(bg, e, j, tasks[0].Scope, it); err != nil {
			failed = strings.Contains(err.Error(), "namespace unreachable")
		}
	}
	if !failed {
		t.Fatal("a repair error that is not a finding was not returned")
	}
}

func TestMediaScanParams(t *testing.T) {
	e := newCollectEnv(t)
	ms := newMediaScan(e.lister)
	for _, ok := range []map[string]string{{}, {"drives": "d1"}, {"drives": "d3,d7"}} {
		if err := ms.CheckParams(ok); err != nil {
			t.Errorf("CheckParams(%v): %v", ok, err)
		}
	}
	for _, bad := range []map[string]string{{"drives": ""}, {"drives": "x"}, {"drives": "d0"}} {
		if err := ms.CheckParams(bad); !errors.Is(err, job.ErrInvalid) || !strings.Contains(err.Error(), "drives=") {
			t.Errorf("CheckParams(%v) = %v, want ErrInvalid naming the parameter", bad, err)
		}
	}
	// A drive that is not in service fails the split, naming it.
	_, err := ms.Phases()[0].Split(bg, e, &job.Job{Params: map[string]string{"drives": "d1,d9"}, Parallelism: 2})
	if !errors.Is(err, job.ErrInvalid) || !strings.Contains(err.Error(), "d9") {
		t.Fatalf("split with an unknown drive: %v", err)
	}
	tasks, err := ms.Phases()[0].Split(bg, e, &job.Job{Params: map[string]string{"drives": "d2"}, Parallelism: 3})
	if err != nil || len(tasks) != 3 {
		t.Fatalf("split of d2: %+v %v", tasks, err)
	}
	for _, tk := range tasks {
		if tk.Scope != "d2" || tk.Node != "n1" {
			t.Fatalf("task %+v: want d2 pinned to n1", tk)
		}
	}
}

// flip flips a data byte of block id's file on drive d.
func flip(t *testing.T, d *drive.Drive, id drive.BlockID) {
	t.Helper()
	s := id.String()
	p := filepath.Join(d.Path(), "blocks", s[:2], s)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-7] ^= 0x20
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestQueuedForDeletion(t *testing.T) {
	m := newMeta(t)
	ids := []meta.BlockID{{0x10, 0x00}, {0x10, 0x01}, {0x20}}
	for _, id := range ids[:2] {
		if err := m.EnqueueDeletes(bg, []meta.DeleteEntry{{Drive: 3, Block: id, Length: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []bool{true, true, false} {
		got, err := queuedForDeletion(bg, m, 3, ids[i])
		if err != nil || got != want {
			t.Errorf("queuedForDeletion(%x) = %v, %v; want %v", ids[i], got, err, want)
		}
	}
	if got, _ := queuedForDeletion(bg, m, 4, ids[0]); got {
		t.Error("queued on another drive")
	}
}
