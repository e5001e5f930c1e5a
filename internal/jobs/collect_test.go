package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// collectEnv is an in-process node: a memkv namespace and one real block
// service on loopback serving two drives.
type collectEnv struct {
	m      *meta.Meta
	drives []*drive.Drive
	bc     *block.Client
}

func (*collectEnv) Node() string                   { return "n1" }
func (*collectEnv) Log() *slog.Logger              { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (e *collectEnv) Meta() *meta.Meta             { return e.m }
func (*collectEnv) Restriper() *restripe.Restriper { return nil }
func (*collectEnv) Cluster() *cluster.Store        { return nil }
func (e *collectEnv) Blocks(_ context.Context, node string) (*block.Client, error) {
	if node != "n1" {
		return nil, fmt.Errorf("no node %q", node)
	}
	return e.bc, nil
}

func (*collectEnv) RecordEvent(_ context.Context, ev job.Event) (job.Event, error) { return ev, nil }

var _ Env = (*collectEnv)(nil)

func newCollectEnv(t *testing.T) *collectEnv {
	t.Helper()
	e := &collectEnv{m: newMeta(t)}
	root := t.TempDir()
	for id := drive.ID(1); id <= 2; id++ {
		d, err := drive.Open(filepath.Join(root, id.String()), drive.Options{
			ClusterID: "c-test", Node: "n1", Class: drive.ClassSSD, Sync: drive.SyncNever,
			AllocID: func() (drive.ID, error) { return id, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		e.drives = append(e.drives, d)
	}
	svc, err := block.NewService(nil, e.drives...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(block.ServerOptions()...)
	svc.Register(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	if e.bc, err = block.Dial(lis.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.bc.Close() })
	return e
}

func (e *collectEnv) lister(context.Context, Env) ([]serviceDrive, error) {
	return []serviceDrive{{ID: 1, Node: "n1", Up: true}, {ID: 2, Node: "n1", Up: true}}, nil
}

// put writes a 100-byte block on drive d (1 or 2) with the given owner.
func (e *collectEnv) put(t *testing.T, d drive.ID, owner, stripe uint64, unit uint32) drive.BlockID {
	t.Helper()
	id := drive.NewBlockID()
	data := bytes.Repeat([]byte{byte(unit)}, 100)
	hdr := drive.BlockHeader{ID: id, Owner: owner, Stripe: stripe, Unit: unit, Generation: 1}
	if err := e.drives[d-1].Put(bg, hdr, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	return id
}

// touch sets the modification time of block b's file, which the sweep
// reads as the block's age.
func (e *collectEnv) touch(t *testing.T, b placed, when time.Time) {
	t.Helper()
	s := b.id.String()
	if err := os.Chtimes(filepath.Join(e.drives[b.d-1].Path(), "blocks", s[:2], s), when, when); err != nil {
		t.Fatal(err)
	}
}

func (e *collectEnv) exists(t *testing.T, d drive.ID, id drive.BlockID) bool {
	t.Helper()
	_, _, _, err := e.drives[d-1].Stat(id)
	if errors.Is(err, drive.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// collectRun drives one phase like the engine: Split, then Items and
// Process over each task, with a small batch so paging is exercised.
func collectRun(t *testing.T, env Env, p job.Phase, j *job.Job) job.ItemResult {
	t.Helper()
	tasks, err := p.Split(bg, env, j)
	if err != nil {
		t.Fatalf("%s: split: %v", p.Name(), err)
	}
	var sum job.ItemResult
	const batch = 2
	for _, tk := range tasks {
		for cursor := tk.From; cursor < tk.To; {
			items, err := p.Items(bg, env, tk.Scope, cursor, tk.To, batch)
			if err != nil {
				t.Fatalf("%s: items: %v", p.Name(), err)
			}
			for _, it := range items {
				if it < cursor || it >= tk.To {
					t.Fatalf("%s: item %d outside [%d, %d)", p.Name(), it, cursor, tk.To)
				}
				r, err := p.Process(bg, env, j, tk.Scope, it)
				if err != nil {
					t.Fatalf("%s: process %s/%d: %v", p.Name(), tk.Scope, it, err)
				}
				sum.Items += r.Items
				sum.Bytes += r.Bytes
				sum.Errors += r.Errors
				if r.Note != "" {
					sum.Note = r.Note
				}
				cursor = it + 1
			}
			if len(items) < batch {
				break
			}
		}
	}
	return sum
}

type placed struct {
	d  drive.ID
	id drive.BlockID
}

// collectFixture writes referenced blocks, old orphans of every kind and
// young orphans, and returns them with the collect type whose clock puts
// the grace cutoff (1h) between the old and the young blocks.
func collectFixture(t *testing.T) (e *collectEnv, c *collect, refd, oldOrphans, young []placed) {
	e = newCollectEnv(t)
	c = newCollect(e.lister)
	var lins []meta.LIN
	for i := range 3 {
		a, err := e.m.Create(bg, meta.RootLIN, fmt.Sprintf("f%d", i), meta.NewInode{Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		lins = append(lins, a.LIN)
	}
	// Referenced: two stripes of each file, mirror:2 on d1 and d2.
	for _, lin := range lins {
		for s := range uint64(2) {
			b1, b2 := e.put(t, 1, uint64(lin), s, 0), e.put(t, 2, uint64(lin), s, 1)
			st := meta.Stripe{Index: s, Protection: meta.Mirror(2), DataLen: 100, Units: []meta.Unit{
				{Drive: 1, Block: meta.BlockID(b1), Length: 100, CRC: 1},
				{Drive: 2, Block: meta.BlockID(b2), Length: 100, CRC: 1},
			}}
			if _, err := e.m.CommitStripe(bg, lin, st, 0, meta.CommitOptions{StripeSize: 100}); err != nil {
				t.Fatal(err)
			}
			refd = append(refd, placed{1, b1}, placed{2, b2})
		}
	}
	// Old orphans: owner gone, stripe absent, stripe present but not
	// naming the block (a superseded unit), and the right block id named
	// on the other drive.
	oldOrphans = append(oldOrphans,
		placed{1, e.put(t, 1, 999999, 0, 0)},
		placed{2, e.put(t, 2, uint64(lins[0]), 7, 0)},
		placed{1, e.put(t, 1, uint64(lins[1]), 1, 0)},
		placed{2, e.put(t, 2, uint64(lins[2]), 0, 0)},
	)
	young = append(young,
		placed{1, e.put(t, 1, 999999, 0, 0)},
		placed{2, e.put(t, 2, uint64(lins[0]), 9, 0)},
	)
	// File times order the two groups: the old ones a minute before mid,
	// the young ones a minute after; the collector's clock stands an hour
	// after mid, so the 1h grace period falls between them.
	mid := time.Now()
	for _, b := range append(append([]placed{}, refd...), oldOrphans...) {
		e.touch(t, b, mid.Add(-time.Minute))
	}
	for _, b := range young {
		e.touch(t, b, mid.Add(time.Minute))
	}
	c.now = func() time.Time { return mid.Add(time.Hour) }
	return e, c, refd, oldOrphans, young
}

func TestCollectSweep(t *testing.T) {
	e, c, refd, old, young := collectFixture(t)
	sweep := c.Phases()[0]

	// Dry run: reports the old orphans, deletes nothing.
	j := &job.Job{Type: "collect", Params: map[string]string{"dry-run": "true"}, Parallelism: 3}
	r := collectRun(t, e, sweep, j)
	total := int64(len(refd) + len(old) + len(young))
	if r.Items != total || r.Bytes < int64(len(old))*100 || r.Errors != 0 {
		t.Fatalf("dry run: %+v, want %d blocks examined and >= %d bytes", r, total, len(old)*100)
	}
	for _, b := range append(append(append([]placed{}, refd...), old...), young...) {
		if !e.exists(t, b.d, b.id) {
			t.Fatalf("dry run deleted %v/%v", b.d, b.id)
		}
	}

	// Real run: old orphans go, everything else stays.
	j.Params = map[string]string{}
	r = collectRun(t, e, sweep, j)
	if r.Items != total || r.Errors != 0 || r.Bytes < int64(len(old))*100 {
		t.Fatalf("sweep: %+v", r)
	}
	for _, b := range refd {
		if !e.exists(t, b.d, b.id) {
			t.Fatalf("referenced block %v/%v deleted", b.d, b.id)
		}
	}
	for _, b := range young {
		if !e.exists(t, b.d, b.id) {
			t.Fatalf("young orphan %v/%v deleted inside the grace period", b.d, b.id)
		}
	}
	for _, b := range old {
		if e.exists(t, b.d, b.id) {
			t.Fatalf("old orphan %v/%v kept", b.d, b.id)
		}
	}
	// Idempotent: a second sweep finds nothing more to free.
	if r = collectRun(t, e, sweep, j); r.Bytes != 0 || r.Items != total-int64(len(old)) {
		t.Fatalf("second sweep: %+v", r)
	}
	// Once the young ones age past the grace period, they go too.
	c.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	collectRun(t, e, sweep, j)
	for _, b := range young {
		if e.exists(t, b.d, b.id) {
			t.Fatalf("aged orphan %v/%v kept", b.d, b.id)
		}
	}
	for _, b := range refd {
		if !e.exists(t, b.d, b.id) {
			t.Fatalf("referenced block %v/%v deleted", b.d, b.id)
		}
	}
}

// TestCollectSweepKeepsOnMapErrors: when the stripe map cannot be read,
// nothing is deleted and the blocks are counted as errors.
func TestCollectSweepKeepsOnMapErrors(t *testing.T) {
	e, c, _, old, _ := collectFixture(t)
	c.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	ctx, cancel := context.WithCancel(bg)
	cancel()
	var errs int64
	for _, b := range old {
		info := drive.BlockInfo{ID: b.id, ModTime: time.Now().Add(-3 * time.Hour)}
		hdrOnly := statOnly{e.bc}
		if _, v := (&sweepPhase{c}).sweepBlock(ctx, e, hdrOnly, b.d, info, time.Hour, false); v == keptOnError {
			errs++
		}
	}
	if errs != int64(len(old)) {
		t.Fatalf("%d of %d kept on errors", errs, len(old))
	}
	for _, b := range old {
		if !e.exists(t, b.d, b.id) {
			t.Fatalf("block %v/%v deleted although the map could not be read", b.d, b.id)
		}
	}
}

// statOnly stats with a live context (so the header is read) but leaves
// the caller's cancelled context for the map read and the delete.
type statOnly struct{ bc *block.Client }

func (s statOnly) Stat(_ context.Context, d drive.ID, id drive.BlockID) (drive.BlockHeader, int64, time.Time, error) {
	return s.bc.Stat(bg, d, id)
}

func (s statOnly) Delete(ctx context.Context, d drive.ID, id drive.BlockID) error {
	return s.bc.Delete(ctx, d, id)
}

// drainOnce frees one batch of the first drive's queue that is not empty,
// as its node's drainer does (package server): the phase, waiting on the
// drives in order, sees each queue drained while it waits on it.
func (e *collectEnv) drainOnce(t *testing.T, batch int) {
	t.Helper()
	for i, d := range e.drives {
		q, err := e.m.ListDeletes(bg, meta.DriveID(i+1), meta.BlockID{}, batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(q) == 0 {
			continue
		}
		for _, x := range q {
			if err := d.Delete(drive.BlockID(x.Block)); err != nil && !errors.Is(err, drive.ErrNotFound) {
				t.Fatal(err)
			}
		}
		if err := e.m.AckDeletes(bg, q); err != nil {
			t.Fatal(err)
		}
		return
	}
}

// TestCollectQueue: the queue phase leaves the deleting to the nodes'
// drainers and waits for them; it stops waiting on a queue that does not
// move, and what is left stays queued.
func TestCollectQueue(t *testing.T) {
	e := newCollectEnv(t)
	c := newCollect(e.lister)
	enqueue := func() []placed {
		var entries []meta.DeleteEntry
		var ids []placed
		for i := range 10 {
			d := drive.ID(1 + i%2)
			id := e.put(t, d, 5, uint64(i), 0)
			ids = append(ids, placed{d, id})
			entries = append(entries, meta.DeleteEntry{Drive: meta.DriveID(d), Block: meta.BlockID(id), Length: 100})
		}
		// A queued block already gone counts too.
		entries = append(entries, meta.DeleteEntry{Drive: 1, Block: meta.BlockID(drive.NewBlockID()), Length: 100})
		if err := e.m.EnqueueDeletes(bg, entries); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	ids := enqueue()
	queue := c.Phases()[1]
	// The phase's waits are the test's turns: a drainer frees two entries
	// per drive at each.
	var now time.Time
	c.now = func() time.Time { return now }
	waits := 0
	c.wait = func(context.Context, time.Duration) error {
		waits++
		e.drainOnce(t, 2)
		return nil
	}
	j := &job.Job{Type: "collect", Params: map[string]string{"dry-run": "true"}}
	if r := collectRun(t, e, queue, j); r.Items != 11 || r.Bytes != 1100 || waits != 0 {
		t.Fatalf("dry run: %+v after %d waits", r, waits)
	}
	for _, b := range ids {
		if !e.exists(t, b.d, b.id) {
			t.Fatal("dry run deleted a queued block")
		}
	}
	j.Params = nil
	if r := collectRun(t, e, queue, j); r.Items != 11 || r.Errors != 0 || r.Bytes != 1100 || waits == 0 {
		t.Fatalf("queue: %+v after %d waits", r, waits)
	}
	for _, b := range ids {
		if e.exists(t, b.d, b.id) {
			t.Fatalf("queued block %v/%v not deleted", b.d, b.id)
		}
	}
	for d := meta.DriveID(1); d <= 2; d++ {
		if q, err := e.m.ListDeletes(bg, d, meta.BlockID{}, 100); err != nil || len(q) != 0 {
			t.Fatalf("drive %d: %d entries left, %v", d, len(q), err)
		}
	}

	// No drainer: the phase gives up once the queue has not moved for
	// queueStall, and leaves every entry queued.
	ids = enqueue()
	c.wait = func(context.Context, time.Duration) error {
		now = now.Add(queuePoll)
		return nil
	}
	if r := collectRun(t, e, queue, j); r.Items != 11 || r.Errors != 11 {
		t.Fatalf("queue with no drainer: %+v", r)
	}
	for _, b := range ids {
		if !e.exists(t, b.d, b.id) {
			t.Fatal("the queue phase deleted a queued block itself")
		}
	}
}

func TestCollectOrphans(t *testing.T) {
	e := newCollectEnv(t)
	c := newCollect(e.lister)
	mk := func(name string) meta.LIN {
		a, err := e.m.Create(bg, meta.RootLIN, name, meta.NewInode{Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		return a.LIN
	}
	open, gone := mk("open"), mk("gone")
	const live, dead = meta.SessionID(1), meta.SessionID(2)
	for _, x := range []struct {
		s   meta.SessionID
		lin meta.LIN
		n   string
	}{{live, open, "open"}, {dead, gone, "gone"}} {
		if err := e.m.Open(bg, x.s, x.lin); err != nil {
			t.Fatal(err)
		}
		if err := e.m.Unlink(bg, meta.RootLIN, x.n); err != nil {
			t.Fatal(err)
		}
	}
	orphans := c.Phases()[2]
	j := &job.Job{Type: "collect", Params: map[string]string{}}
	if r := collectRun(t, e, orphans, j); r.Items != 2 {
		t.Fatalf("orphans while both open: %+v", r)
	}
	// The dead session's opens are dropped without its last close purging
	// (as after a crash mid-cleanup): simulate by closing the session,
	// then the job purges what is left.
	if err := e.m.CloseSession(bg, dead); err != nil {
		t.Fatal(err)
	}
	r := collectRun(t, e, orphans, j)
	if _, err := e.m.GetStripes(bg, gone, 0, 1); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("gone inode still there: %v (%+v)", err, r)
	}
	if _, err := e.m.GetStripes(bg, open, 0, 1); err != nil {
		t.Fatalf("open inode purged: %v", err)
	}
	left, err := e.m.ListOrphans(bg, 0, 10)
	if err != nil || len(left) != 1 || left[0].LIN != open {
		t.Fatalf("orphans left: %v, %v", left, err)
	}
}

func TestCollectParams(t *testing.T) {
	c := Collect().(job.ParamChecker)
	for _, p := range []map[string]string{nil, {"grace": "90m"}, {"grace": "1h", "dry-run": "true"}} {
		if err := c.CheckParams(p); err != nil {
			t.Errorf("CheckParams(%v): %v", p, err)
		}
	}
	for _, p := range []map[string]string{{"grace": "soon"}, {"grace": "-1h"}, {"grace": "0s"}, {"dry-run": "yes"}} {
		if err := c.CheckParams(p); !errors.Is(err, job.ErrInvalid) {
			t.Errorf("CheckParams(%v) = %v, want ErrInvalid", p, err)
		}
	}
	ty := Collect()
	if ty.Name() != "collect" || ty.Set() != job.SetMark || !ty.(job.SpaceSaver).FreesSpace() {
		t.Fatal("collect: wrong name, set or space saving")
	}
	if pr, pol := ty.(job.Defaulter).Defaults(); pr != 7 || pol != "low" {
		t.Fatalf("defaults %d %q", pr, pol)
	}
	var names []string
	for _, p := range ty.Phases() {
		names = append(names, p.Name())
	}
	if fmt.Sprint(names) != "[sweep queue orphans]" {
		t.Fatalf("phases %v", names)
	}
	// A bad grace fails the job at Split, before any block is touched.
	e := newCollectEnv(t)
	if _, err := newCollect(e.lister).Phases()[0].Split(bg, e, &job.Job{Params: map[string]string{"grace": "x"}}); !errors.Is(err, job.ErrInvalid) {
		t.Fatalf("split with bad grace: %v", err)
	}
}

// TestCollectSweepsTornBlocks: a block never written to the disk — an
// empty file, or zeros where its header goes, what a machine crash leaves
// of an unsynced write — is deleted once older than the grace period
// (counted in a dry run, kept while young); a block damaged otherwise is
// kept and counted as an error.
func TestCollectSweepsTornBlocks(t *testing.T) {
	e, c, refd, _, _ := collectFixture(t)
	path := func(b placed) string {
		s := b.id.String()
		return filepath.Join(e.drives[b.d-1].Path(), "blocks", s[:2], s)
	}
	onDisk := func(b placed) bool {
		_, err := os.Stat(path(b))
		return err == nil
	}
	empty := placed{1, e.put(t, 1, 999999, 0, 0)}
	zeros := placed{2, e.put(t, 2, 999999, 1, 0)}
	damaged := placed{1, e.put(t, 1, 999999, 2, 0)}
	young := placed{2, e.put(t, 2, 999999, 3, 0)}
	for _, b := range []placed{empty, young} {
		if err := os.Truncate(path(b), 0); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(path(zeros))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path(zeros), make([]byte, st.Size()), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path(damaged), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("garbage"), 20)
	f.Close()
	old := time.Now().Add(-2 * time.Hour)
	for _, b := range []placed{empty, zeros, damaged} {
		e.touch(t, b, old)
	}
	e.touch(t, young, time.Now().Add(2*time.Hour))
	sweep := c.Phases()[0]

	j := &job.Job{Type: "collect", Params: map[string]string{"dry-run": "true"}, Parallelism: 3}
	if r := collectRun(t, e, sweep, j); r.Errors != 1 {
		t.Fatalf("dry run: %+v, want the damaged block as the one error", r)
	}
	for _, b := range []placed{empty, zeros, damaged, young} {
		if !onDisk(b) {
			t.Fatalf("dry run deleted %v/%v", b.d, b.id)
		}
	}
	j.Params = map[string]string{}
	if r := collectRun(t, e, sweep, j); r.Errors != 1 {
		t.Fatalf("sweep: %+v, want the damaged block as the one error", r)
	}
	for _, b := range []placed{empty, zeros} {
		if onDisk(b) {
			t.Fatalf("torn block %v/%v kept", b.d, b.id)
		}
	}
	for _, b := range append([]placed{damaged, young}, refd...) {
		if !onDisk(b) {
			t.Fatalf("block %v/%v deleted", b.d, b.id)
		}
	}
}
