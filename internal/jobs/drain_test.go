package jobs

import (
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/job"
)

// clusterDataEnv is a dataEnv with a control plane on a test etcd.
type clusterDataEnv struct {
	*dataEnv
	cs *cluster.Store
}

func (e *clusterDataEnv) Cluster() *cluster.Store { return e.cs }

// newClusterDataEnv returns a clusterDataEnv whose control plane has the
// pools named, each of protection prot.
func newClusterDataEnv(t *testing.T, prot string, pools ...string) (*clusterDataEnv, *clienttest.Fixture) {
	de, f := newDataEnv(t)
	cs, err := cluster.Open(bg, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pools {
		if _, err := cs.CreatePool(bg, p, prot, true); err != nil {
			t.Fatal(err)
		}
	}
	return &clusterDataEnv{dataEnv: de, cs: cs}, f
}

// A unit written on a drive after the drain passed its file (a client
// whose topology still showed the drive ready) is moved by the remove
// phase, which then removes the drive, rather than leaving it draining.
func TestDrainRemoveSweepsUnitsWrittenBehind(t *testing.T) {
	e, f := newClusterDataEnv(t, "ec:4+2", "p0")
	cs := e.cs
	for _, d := range f.Topo.States() {
		if _, err := cs.RegisterDrive(bg, cluster.DriveRecord{ID: cluster.DriveID(d.ID), Node: d.Node, Path: "/d" + cluster.DriveID(d.ID).String(), Class: "ssd", Pool: "p0"}); err != nil {
			t.Fatal(err)
		}
	}
	c := f.Client(clienttest.Unit)
	data := clienttest.RandBytes(2*4*clienttest.Unit+99, 3)
	lin := f.WriteClosed(c, "behind", "ec:4+2", data)
	victim := f.Stripes(lin)[0].Units[0].Drive

	// The drive is set draining, and the drain phase has passed the file
	// before its units land there: the remove phase is what runs next.
	if _, err := cs.SetDriveStatus(bg, cluster.DriveID(victim), cluster.StatusDraining); err != nil {
		t.Fatal(err)
	}
	f.Topo.Set(func(d *client.DriveState) bool { return d.ID == victim }, func(d *client.DriveState) { d.Usable = false })
	j := &job.Job{ID: 9, Type: "drain", Params: map[string]string{"drives": cluster.DriveID(victim).String()}, Created: time.Now()}
	ph := Drain().Phases()
	res, _ := runPhase(t, e, j, ph[2])
	if res.Errors != 0 || !strings.Contains(res.Note, cluster.DriveID(victim).String()+" removed") {
		t.Fatalf("remove phase: %d errors, note %q", res.Errors, res.Note)
	}
	if n := f.UnitsOn(lin, victim); n != 0 {
		t.Fatalf("%d units still on drive %d", n, victim)
	}
	clienttest.MustEqual(t, "file", f.ReadBack(lin), data)
	rec, err := cs.GetDrive(bg, cluster.DriveID(victim))
	if err != nil || rec.Status != cluster.StatusRemoved {
		t.Fatalf("drive %d after the drain: %+v %v", victim, rec.Status, err)
	}
	a, err := f.Meta.GetAttr(bg, lin)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range a.WDL {
		if d == victim {
			t.Fatalf("WDL %v still names drive %d", a.WDL, victim)
		}
	}
}
