package jobs

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// dataEnv is a jobs.Env over a clienttest fixture: its namespace and a
// restriper over its data path, recording events.
type dataEnv struct {
	metaEnv
	rs *restripe.Restriper
	mu sync.Mutex
	ev []job.Event
}

func (e *dataEnv) Restriper() *restripe.Restriper { return e.rs }

func (e *dataEnv) RecordEvent(_ context.Context, ev job.Event) (job.Event, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, ev)
	return ev, nil
}

func (e *dataEnv) events() []job.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]job.Event(nil), e.ev...)
}

var _ Env = (*dataEnv)(nil)

func newDataEnv(t *testing.T) (*dataEnv, *clienttest.Fixture) {
	f := clienttest.New(t)
	rs, err := restripe.New(restripe.Config{Meta: f.Meta, Client: f.Client(clienttest.Unit)})
	if err != nil {
		t.Fatal(err)
	}
	return &dataEnv{metaEnv: metaEnv{f.Meta}, rs: rs}, f
}

// repairNoDraining is the repair job type with no draining drives (the
// real one asks the control plane).
func repairNoDraining() *restripeJob {
	return &restripeJob{name: "repair", bad: func(context.Context, Env, string) (map[meta.DriveID]bool, error) {
		return map[meta.DriveID]bool{}, nil
	}}
}

// A repair takes its work from the protection index as well as from down
// drives: a file written while n3 was down is all on n1 and n2 (every
// unit placed, so its WDL shows no bad drive), and the repair visits it
// and spreads it once n3 is back. While n3 is down, the repair visits it
// and counts its stripes as findings (below their pool's protection), and
// the index keeps them (with the stripes of a healthy file it rebuilt off
// n3 meanwhile); once every stripe is spread, a repair visits nothing.
func TestRepairTakesWorkFromTheProtectionIndex(t *testing.T) {
	e, f := newDataEnv(t)
	c := f.Client(clienttest.Unit)
	healthy := f.WriteClosed(c, "healthy", "ec:4+2", clienttest.RandBytes(2*4*clienttest.Unit, 1))
	f.SetNodeDown("n3", true)
	data := clienttest.RandBytes(3*4*clienttest.Unit+77, 2)
	below := f.WriteClosed(c, "below", "ec:4+2", data)
	f.SetNodeDown("n3", false)
	if us, err := f.Meta.UnderProtectedStripes(bg, below); err != nil || len(us) != 4 {
		t.Fatalf("index of the file written with n3 down: %+v, %v", us, err)
	}

	r := repairNoDraining()
	j := &job.Job{ID: 7, Type: "repair", Parallelism: 2, Created: time.Now()}
	f.SetNodeDown("n3", true)
	res, done := runPhase(t, e, j, r.Phases()[0])
	// healthy has units on n3 (down): repaired onto n1 and n2, below its
	// target too (2 stripes), besides the 4 of below.
	if len(done) != 2 || res.Errors != 6 {
		t.Fatalf("repair with n3 down: %+v, processed %v", res, done)
	}
	f.SetNodeDown("n3", false)
	// healthy was repaired off n3 while it was down: spread it back too.
	res, done = runPhase(t, e, j, r.Phases()[0])
	if len(done) != 2 || res.Errors != 0 {
		t.Fatalf("repair with n3 up: %+v, processed %v", res, done)
	}
	if st, err := f.Meta.ProtectionStats(bg, 0); err != nil || st.UnderStripes != 0 {
		t.Fatalf("index after the repair: %+v, %v", st, err)
	}
	res, done = runPhase(t, e, j, r.Phases()[1]) // verify
	if len(done) != 0 || res.Errors != 0 {
		t.Fatalf("verify: %+v, processed %v", res, done)
	}
	res, done = runPhase(t, e, j, r.Phases()[0])
	if len(done) != 0 {
		t.Fatalf("a second repair visited %v", done)
	}
	clienttest.MustEqual(t, "below", f.ReadBack(below), data)
	if l, err := c.Layout(bg, healthy); err != nil || l.BelowTarget != 0 {
		t.Fatalf("healthy after the repairs: %+v, %v", l, err)
	}
}

// integrityscan goes through every file whatever it finds: a stripe with
// three of its six units gone is lost — listed (once, with a data-lost
// event for the file), counted, reported — while a file with one damaged
// unit is repaired, and the job's last phase lists the lost file.
func TestIntegrityScanListsLostData(t *testing.T) {
	e, f := newDataEnv(t)
	c := f.Client(clienttest.Unit)
	lostData := clienttest.RandBytes(2*4*clienttest.Unit, 3)
	lost := f.WriteClosed(c, "lost", "ec:4+2", lostData)
	okData := clienttest.RandBytes(2*4*clienttest.Unit, 4)
	fine := f.WriteClosed(c, "fine", "ec:4+2", okData)
	s := f.Stripes(lost)[1]
	for _, i := range []int{1, 3, 4} {
		if err := f.Drive(s.Units[i].Drive).Delete(drive.BlockID(s.Units[i].Block)); err != nil {
			t.Fatal(err)
		}
	}
	clienttest.FlipByte(t, f.BlockFile(f.Stripes(fine)[0].Units[2]), 3)

	ty := IntegrityScan()
	j := &job.Job{ID: 9, Type: "integrityscan", Parallelism: 2, Created: time.Now().Add(-time.Second)}
	res, done := runPhase(t, e, j, ty.Phases()[0])
	if len(done) != 2 || res.Counts[countLost] != 1 || res.Errors < 4 {
		t.Fatalf("scan: %+v, processed %v", res, done)
	}
	clienttest.MustEqual(t, "repaired file", f.ReadBack(fine), okData)
	files, err := f.Meta.ListLost(bg, 0, 10)
	if err != nil || len(files) != 1 || files[0].LIN != lost || len(files[0].Stripes) != 1 || files[0].Stripes[0].Index != 1 {
		t.Fatalf("lost list: %+v, %v", files, err)
	}
	if r := files[0].Ranges(); len(r) != 1 || r[0].Offset != s.DataLen || r[0].Length != s.DataLen {
		t.Fatalf("lost ranges %v", r)
	}
	evs := e.events()
	if len(evs) != 1 || evs[0].Kind != job.EventDataLost || evs[0].Subject != "/lost" || evs[0].Job != 9 {
		t.Fatalf("events %+v", evs)
	}
	rep, _ := runPhase(t, e, j, ty.Phases()[1])
	if !strings.Contains(rep.Summary, "/lost") || !strings.Contains(rep.Note, "1 files with lost data (1 found by this job)") {
		t.Fatalf("report: %+v", rep)
	}
	t.Logf("report:\n%s%s", rep.Summary, rep.Note)

	// Scanning again finds it again: counted, not listed twice, no new
	// event.
	res, _ = runPhase(t, e, j, ty.Phases()[0])
	if res.Counts[countLost] != 1 || len(e.events()) != 1 {
		t.Fatalf("second scan: %+v, events %+v", res, e.events())
	}
	// Deleting the file takes it off the list.
	if err := f.Meta.Unlink(bg, meta.RootLIN, "lost"); err != nil {
		t.Fatal(err)
	}
	if st, err := f.Meta.ProtectionStats(bg, 0); err != nil || st.LostFiles != 0 {
		t.Fatalf("after deleting the file: %+v, %v", st, err)
	}
}
