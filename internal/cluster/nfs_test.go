package cluster

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/runner"
)

// TestNFSExportsStoreAndFollow: the exports are stored sorted as
// versions, refused when invalid (nothing stored), followed by a
// follower that calls back with each version, and a record of a newer
// format is not applied.
func TestNFSExportsStoreAndFollow(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	x, rev, err := s.NFSExports(ctx)
	if err != nil || rev != 0 || x.Version != 0 || len(x.Exports) != 0 || len(x.Effective()) != 1 || x.Effective()[0].Path != "/" {
		t.Fatalf("never configured: %+v %d %v", x, rev, err)
	}
	var calls atomic.Int64
	var last atomic.Uint64
	f := NewNFSExportsFollower(s, discard, func(x NFSExports) { calls.Add(1); last.Store(x.Version) })
	if err := f.Load(ctx); err != nil || calls.Load() != 1 {
		t.Fatalf("load: %v, %d calls", err, calls.Load())
	}
	run := runner.New(runner.Config{Log: discard})
	t.Cleanup(func() { _ = run.Stop(context.Background()) })
	if _, err := run.Go("nfs-exports", f, runner.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		e    []NFSExport
		want string
	}{
		{[]NFSExport{{Path: "/a"}, {Path: "/a", ReadOnly: true}}, "listed twice"},
		{[]NFSExport{{Path: "/a/"}}, "want it clean"},
		{[]NFSExport{{Path: "/a", Clients: []string{"10.0.0.0/24", "x"}}}, `clients: "x"`},
	} {
		_, err := s.UpdateNFSExports(ctx, "admin:a", func(NFSExports) ([]NFSExport, error) { return bad.e, nil })
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v; want ErrInvalid saying %q", bad.e, err, bad.want)
		}
	}
	x, err = s.UpdateNFSExports(ctx, "admin:alice", func(cur NFSExports) ([]NFSExport, error) {
		return append(cur.Exports, NFSExport{Path: "/z", Clients: []string{"10.0.0.0/24"}}, NFSExport{Path: "/b", ReadOnly: true}), nil
	})
	if err != nil || x.Version != 1 || x.By != "admin:alice" || x.Exports[0].Path != "/b" || x.Exports[1].Path != "/z" {
		t.Fatalf("first change: %+v %v", x, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.Current().Version != 1 || last.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the follower did not see version 1")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := f.Current().Exports; len(got) != 2 || got[1].Clients[0] != "10.0.0.0/24" || !got[0].ReadOnly {
		t.Errorf("followed: %+v", got)
	}
	f.apply([]byte(`{"v":99,"version":7,"exports":[]}`)) // a newer record is not applied
	if f.Current().Version != 1 {
		t.Fatalf("after a newer record: %+v", f.Current())
	}
	f.apply([]byte(`{"v":1,"version":8,"exports":[{"path":"rel"}]}`)) // nor an invalid one
	if f.Current().Version != 1 {
		t.Fatalf("after an invalid record: %+v", f.Current())
	}
	if x, err = s.UpdateNFSExports(ctx, "admin:bob", func(NFSExports) ([]NFSExport, error) { return nil, nil }); err != nil || x.Version != 2 || x.Exports == nil {
		t.Fatalf("remove all: %+v %v", x, err)
	}
	for f.Current().Version != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the follower did not see version 2")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if e := f.Current().Effective(); len(e) != 1 || e[0].Path != "/" {
		t.Errorf("with none left the gateways serve %+v; want the default export", e)
	}
}
