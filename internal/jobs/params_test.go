package jobs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// clusterEnv is a jobs.Env with a control plane and a namespace.
type clusterEnv struct {
	m  *meta.Meta
	cs *cluster.Store
}

var _ Env = clusterEnv{}

func (clusterEnv) Node() string                                                   { return "n1" }
func (clusterEnv) Log() *slog.Logger                                              { return slog.New(slog.DiscardHandler) }
func (e clusterEnv) Meta() *meta.Meta                                             { return e.m }
func (clusterEnv) Restriper() *restripe.Restriper                                 { return nil }
func (e clusterEnv) Cluster() *cluster.Store                                      { return e.cs }
func (clusterEnv) RecordEvent(_ context.Context, ev job.Event) (job.Event, error) { return ev, nil }
func (clusterEnv) Blocks(context.Context, string) (*block.Client, error) {
	return nil, errors.New("test env: no block service")
}

// TestSubmitRefusesBadParams submits jobs through a real engine (never
// started: Submit only validates and queues) and checks that parameters
// naming nothing, malformed ones and unknown ones are refused when they
// are submitted, with the parameter and value in the message, while good
// ones queue.
func TestSubmitRefusesBadParams(t *testing.T) {
	cli := etcdtest.New(t)
	cs, err := cluster.Open(bg, cli)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CreatePool(bg, "default", "ec:4+2", true); err != nil {
		t.Fatal(err)
	}
	for _, id := range []cluster.DriveID{1, 2, 3} {
		if _, err := cs.RegisterDrive(bg, cluster.DriveRecord{ID: id, Node: "n1", Path: "/d/" + id.String(), Class: "ssd", Pool: "default"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.SetDriveStatus(bg, 3, cluster.StatusSuspended); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.SetDriveStatus(bg, 3, cluster.StatusDraining); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.SetDriveStatus(bg, 3, cluster.StatusRemoved); err != nil {
		t.Fatal(err)
	}
	m := newMeta(t)
	dir, err := m.Mkdir(bg, meta.RootLIN, "scratch", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(bg, dir.LIN, "file", meta.NewInode{Type: meta.TypeFile, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	eng, err := job.New(job.Config{Client: cli, Node: "n1", Env: clusterEnv{m: m, cs: cs}})
	if err != nil {
		t.Fatal(err)
	}
	if err := Register(eng); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", job.MaxParamValue+1)
	for _, tc := range []struct {
		typ    string
		params map[string]string
		want   string // "" accepts; otherwise a word the error must contain
	}{
		{"drain", map[string]string{"drives": "d1"}, ""},
		{"drain", map[string]string{"drives": ""}, `drives=""`},
		{"drain", map[string]string{"drives": "d-1,,"}, `drives="d-1,,"`},
		{"drain", map[string]string{"drives": "d1,,d2"}, "element 2 is empty"},
		{"drain", map[string]string{"drives": "d999"}, "no drive d999"},
		{"drain", map[string]string{"drives": "d3"}, "d3 was removed"},
		{"drain", map[string]string{}, "drain needs drives="},
		{"drain", map[string]string{"drive": "d1"}, `no parameter "drive"`},
		{"repair", nil, ""},
		{"repair", map[string]string{"reason": "by hand"}, ""},
		{"repair", map[string]string{"drives": "d1"}, `no parameter "drives"`},
		{"rebalance", map[string]string{"pool": "default"}, ""},
		{"rebalance", map[string]string{"pool": "nosuch"}, `pool="nosuch": no such pool`},
		{"multiscan", map[string]string{"pool": "nosuch"}, `pool="nosuch"`},
		{"mediascan", nil, ""},
		{"mediascan", map[string]string{"drives": "d2"}, ""},
		{"mediascan", map[string]string{"drives": "d999"}, "no drive d999"},
		{"fsck", map[string]string{"dry-run": "true", "speed": "500", "only": "namespace"}, ""},
		{"fsck", map[string]string{"only": "layout"}, ""},
		{"fsck", map[string]string{"only": "blocks"}, `only="blocks": want namespace or layout`},
		{"fsck", map[string]string{"speed": "fast"}, `speed="fast"`},
		{"fsck", map[string]string{"dry-run": "yes"}, `dry-run="yes"`},
		{"treedelete", map[string]string{"path": "/scratch"}, ""},
		{"treedelete", map[string]string{"path": "/does-not-exist"}, `path="/does-not-exist": no such directory`},
		{"treedelete", map[string]string{"path": "/scratch/file"}, "not a directory"},
		{"integrityscan", map[string]string{"dry-run": "true"}, ""},
		{"integrityscan", map[string]string{"dry-run": long}, "bytes long"},
		{"integrityscan", map[string]string{"Dry Run": "true"}, "parameter name"},
		{"collect", map[string]string{"grace": "1h\x00"}, "control characters"},
	} {
		_, err := eng.Submit(bg, tc.typ, job.Options{Params: tc.params})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %v: refused: %v", tc.typ, tc.params, err)
		case tc.want != "" && err == nil:
			t.Errorf("%s %v: accepted, want an error saying %q", tc.typ, tc.params, tc.want)
		case tc.want != "" && !errors.Is(err, job.ErrInvalid):
			t.Errorf("%s %v: error %v is not job.ErrInvalid", tc.typ, tc.params, err)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s %v: error %q does not say %q", tc.typ, tc.params, err, tc.want)
		}
	}
}
