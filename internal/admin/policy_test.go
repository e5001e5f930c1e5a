package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/policy"
)

// treeNS is a PolicyNamespace of a fixed tree: directories /a (LIN 16)
// and files under it and the root.
type treeNS struct {
	inodes []meta.Inode
}

func newTreeNS(files int) *treeNS {
	ns := &treeNS{}
	ns.inodes = append(ns.inodes, meta.Inode{Attr: meta.Attr{LIN: 16, Type: meta.TypeDir, Pool: "fast"}, Links: []meta.Link{{Parent: meta.RootLIN, Name: "a"}}})
	for i := range files {
		name := fmt.Sprintf("f%d.dat", i)
		if i%4 == 0 {
			name = fmt.Sprintf("f%d.tar", i)
		}
		parent := meta.LIN(16)
		if i%2 == 1 {
			parent = meta.RootLIN
		}
		ns.inodes = append(ns.inodes, meta.Inode{Attr: meta.Attr{LIN: meta.LIN(17 + i), Type: meta.TypeFile, Mode: 0o644, Pool: "fast",
			Size: 1 << 20, Allocated: 2 << 20, Mtime: time.Unix(1e9, 0)}, Links: []meta.Link{{Parent: parent, Name: name}}})
	}
	return ns
}

func (t *treeNS) ScanInodes(_ context.Context, from, to meta.LIN, limit int) ([]meta.Inode, meta.LIN, error) {
	var out []meta.Inode
	for _, in := range t.inodes {
		if in.LIN >= from && (to == 0 || in.LIN < to) {
			if len(out) == limit {
				return out, in.LIN, nil
			}
			out = append(out, in)
		}
	}
	return out, 0, nil
}

func (t *treeNS) Path(_ context.Context, lin meta.LIN) (string, error) {
	switch lin {
	case meta.RootLIN:
		return "/", nil
	case 16:
		return "/a", nil
	}
	return "", meta.ErrNotFound
}

func (t *treeNS) GetInode(_ context.Context, lin meta.LIN) (meta.Inode, error) {
	for _, in := range t.inodes {
		if in.LIN == lin {
			return in, nil
		}
	}
	return meta.Inode{}, meta.ErrNotFound
}

func (t *treeNS) Lookup(_ context.Context, parent meta.LIN, name string) (meta.Attr, error) {
	if parent == meta.RootLIN && name == "a" {
		return t.inodes[0].Attr, nil
	}
	return meta.Attr{}, fmt.Errorf("%w: %q", meta.ErrNotFound, name)
}

func (t *treeNS) GetXattr(context.Context, meta.LIN, string) ([]byte, error) {
	return nil, meta.ErrNotFound
}

// The namespace the handler is given must also be a Namespace.
type treeAPI struct {
	*treeNS
	*fakeNS
}

func (t treeAPI) Path(ctx context.Context, lin meta.LIN) (string, error) {
	return t.treeNS.Path(ctx, lin)
}

func newPolicyAPI(t *testing.T, ns Namespace) *Client {
	t.Helper()
	ctx := context.Background()
	store, err := cluster.Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, pool := range []string{"fast", "fast", "capacity"} {
		id, _ := store.AllocDriveID(ctx)
		if _, err := store.RegisterDrive(ctx, cluster.DriveRecord{ID: id, Node: "n1", Path: fmt.Sprintf("/d%d", i), Class: "ssd", Pool: pool}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.CreatePool(ctx, pool, "mirror:2", true); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(NewHandler(Deps{Store: store, Namespace: ns, Node: NodeInfo{Name: "n1"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	return NewClient(srv.URL)
}

func httpStatus(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func TestPolicyRoutes(t *testing.T) {
	ctx := context.Background()
	c := newPolicyAPI(t, treeAPI{treeNS: newTreeNS(8), fakeNS: &fakeNS{}})
	// Nothing installed: show is a 404, history empty.
	if _, err := c.Policy(ctx, 0); httpStatus(err) != http.StatusNotFound {
		t.Fatalf("show before install: %v", err)
	}
	if h, err := c.PolicyHistory(ctx); err != nil || len(h) != 0 {
		t.Fatalf("history: %v %v", h, err)
	}
	// Mistakes are 400s naming line and column, never 500s.
	for _, tc := range []struct{ text, want string }{
		{"RULE 'a' SET POOL 'nope'", "line 1, column 19: pool 'nope' does not exist"},
		{"RULE 'a' SET POOL 'fast'\nRULE 'b' MIGRATE WHERE", "line 2, column"},
		{"RULE 'a' SET POOL 'fast' WHERE FILE_SIZE > '10G'", "line 1, column"},
		{strings.Repeat("x", policy.MaxSourceBytes+1), "at most"},
	} {
		_, err := c.InstallPolicy(ctx, tc.text, "")
		if httpStatus(err) != http.StatusBadRequest || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("install %.40q: %v (status %d), want 400 with %q", tc.text, err, httpStatus(err), tc.want)
		}
	}
	if _, err := c.Policy(ctx, 0); httpStatus(err) != http.StatusNotFound {
		t.Fatalf("a refused policy was installed: %v", err)
	}
	v, err := c.InstallPolicy(ctx, "RULE 'tars' SET POOL 'capacity' WHERE NAME LIKE '%.tar'\nRULE 'default' SET POOL 'fast'\n", "first")
	if err != nil || v.Version != 1 || v.Rules != 2 {
		t.Fatalf("install: %+v %v", v, err)
	}
	p, err := c.Policy(ctx, 1)
	if err != nil || !strings.Contains(p.Text, "'tars'") || p.Comment != "first" || p.By != "anonymous" {
		t.Fatalf("show --version 1: %+v %v", p, err)
	}
	if _, err := c.Policy(ctx, 9); httpStatus(err) != http.StatusNotFound {
		t.Fatalf("show --version 9: %v", err)
	}
	var e *Error
	if err := c.do(ctx, http.MethodGet, APIVersion+"/policy?version=x", nil, nil); !errors.As(err, &e) || e.Status != http.StatusBadRequest {
		t.Fatalf("?version=x: %v", err)
	}
	// The dry run of the installed policy: of 8 files, 2 are .tar
	// (f0, f4); 4 are under /a.
	rep, err := c.TestPolicy(ctx, PolicyTestRequest{})
	if err != nil || rep.Version != 1 || rep.Files != 8 || !rep.Complete {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	if r := rep.Rules[0]; r.Selected != 2 || r.Elsewhere != 2 || r.SelectedBytes != 4<<20 {
		t.Errorf("rule tars: %+v", r)
	}
	if r := rep.Rules[1]; r.Selected != 6 || r.Elsewhere != 0 || r.Matched != 8 {
		t.Errorf("rule default: %+v", r)
	}
	rep, err = c.TestPolicy(ctx, PolicyTestRequest{Path: "/a", Text: "RULE 'old' DELETE WHERE MODIFICATION_TIME < TIMESTAMP '2002-01-01'\nRULE 'l' LIST 'tars' WHERE NAME LIKE '%.tar'"})
	if err != nil || rep.Files != 4 || rep.Rules[0].Selected != 4 || rep.Rules[1].Selected != 2 || rep.Unplaced != 4 {
		t.Fatalf("dry run under /a: %+v %v", rep, err)
	}
	if !strings.HasPrefix(rep.Rules[1].Samples[0], "/a/f") {
		t.Errorf("samples: %v", rep.Rules[1].Samples)
	}
	if _, err := c.TestPolicy(ctx, PolicyTestRequest{Path: "/nope"}); httpStatus(err) != http.StatusNotFound {
		t.Fatalf("dry run of a missing directory: %v", err)
	}
	if _, err := c.TestPolicy(ctx, PolicyTestRequest{Text: "RULE x"}); httpStatus(err) != http.StatusBadRequest {
		t.Fatalf("dry run of a bad policy: %v", err)
	}
	// A bound makes a partial report, not an error.
	rep, err = c.TestPolicy(ctx, PolicyTestRequest{MaxFiles: 3})
	if err != nil || rep.Complete || rep.Scanned != 3 || rep.NextLIN == 0 {
		t.Fatalf("bounded dry run: %+v %v", rep, err)
	}
	h, err := c.PolicyHistory(ctx)
	if err != nil || len(h) != 1 || h[0].Checksum == "" {
		t.Fatalf("history: %+v %v", h, err)
	}
}

// A node without a namespace answers the dry run with 503.
func TestPolicyTestWithoutNamespace(t *testing.T) {
	c := newPolicyAPI(t, nil)
	if _, err := c.TestPolicy(context.Background(), PolicyTestRequest{Text: "RULE 'a' SET POOL 'fast'"}); httpStatus(err) != http.StatusServiceUnavailable {
		t.Fatalf("dry run without namespace: %v", err)
	}
}

// BenchmarkDryRun measures the dry run's own cost per file (evaluation,
// paths, counting; the namespace is in memory): compare with
// internal/policy's BenchmarkMatching.
func BenchmarkDryRun(b *testing.B) {
	ns := newTreeNS(100_000)
	pol, err := policy.Parse(`RULE 'tars' SET POOL 'capacity' WHERE NAME LIKE '%.tar'
RULE 'default' SET POOL 'fast'
RULE 'cold' MIGRATE FROM POOL 'fast' THRESHOLD(50,20) WEIGHT(KB_ALLOCATED) TO POOL 'capacity'
     WHERE CURRENT_TIMESTAMP - MODIFICATION_TIME > INTERVAL '30' DAYS
RULE 'old' DELETE WHERE PATH_NAME LIKE '/a/%' AND FILE_SIZE > 10G
RULE 'l' LIST 'tars' WHERE NAME LIKE '%.tar'`, nil)
	if err != nil {
		b.Fatal(err)
	}
	pools := []cluster.Pool{{PoolRecord: cluster.PoolRecord{Name: "fast", Protection: "mirror:2"}, TotalBytes: 1 << 40, UsedBytes: 900 << 30},
		{PoolRecord: cluster.PoolRecord{Name: "capacity", Protection: "ec:4+2"}, TotalBytes: 10 << 40}}
	b.ResetTimer()
	for b.Loop() {
		rep, err := DryRun(context.Background(), ns, pol, pools, PolicyTestRequest{}, time.Now())
		if err != nil || rep.Files != 100_000 {
			b.Fatal(rep.Files, err)
		}
	}
	b.ReportMetric(float64(b.N)*100_000/b.Elapsed().Seconds(), "files/s")
}

// slowDirs is a treeNS whose directory reads last until the caller gives
// up.
type slowDirs struct{ *treeNS }

func (s slowDirs) GetInode(ctx context.Context, lin meta.LIN) (meta.Inode, error) {
	<-ctx.Done()
	return meta.Inode{}, fmt.Errorf("reading LIN %d: %w", lin, ctx.Err())
}

// A budget that runs out while a directory is read ends the dry run
// with a partial report, as between pages, not with an error.
func TestDryRunBudgetInADirectoryRead(t *testing.T) {
	pol, err := policy.Parse("RULE 'l' LIST 'all'\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ns := slowDirs{newTreeNS(10)}
	ns.inodes = ns.inodes[1:] // /a (LIN 16) is not in the scan: its files' parent must be read
	rep, err := DryRun(ctx, ns, pol, nil, PolicyTestRequest{}, time.Now())
	if err != nil || rep.Complete || rep.NextLIN != 17 || rep.Scanned != 0 {
		t.Fatalf("dry run out of budget in a directory read: %+v, %v", rep, err)
	}
}
