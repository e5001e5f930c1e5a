package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/policy"
	"github.com/weftfs/weft/internal/runner"
)

// policyStore is a store with pools fast (2 drives) and capacity.
func policyStore(t *testing.T) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, pool := range []string{"fast", "fast", "capacity"} {
		id, err := s.AllocDriveID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.RegisterDrive(ctx, DriveRecord{ID: id, Node: "n1", Path: fmt.Sprintf("/d%d", i), Class: "ssd", Pool: pool}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreatePool(ctx, pool, "mirror:2", true); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestPolicyInstallShowHistory(t *testing.T) {
	ctx := context.Background()
	s := policyStore(t)
	if _, err := s.Policy(ctx, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("show before any install: %v", err)
	}
	if h, err := s.PolicyHistory(ctx); err != nil || len(h) != 0 {
		t.Fatalf("history before any install: %v %v", h, err)
	}
	v1text := "-- first\nRULE 'default' SET POOL 'fast'\n"
	v1, err := s.InstallPolicy(ctx, v1text, "admin:alice", "fast by default")
	if err != nil {
		t.Fatal(err)
	}
	if v1.Version != 1 || v1.Rules != 1 || v1.By != "admin:alice" || v1.Checksum != PolicyChecksum(v1text) {
		t.Fatalf("first install: %+v", v1)
	}
	v2text := "RULE 'tars' SET POOL 'capacity' WHERE NAME LIKE '%.tar'\nRULE 'default' SET POOL 'fast'\n"
	v2, err := s.InstallPolicy(ctx, v2text, "", "")
	if err != nil || v2.Version != 2 || v2.Rules != 2 {
		t.Fatalf("second install: %+v %v", v2, err)
	}
	cur, err := s.Policy(ctx, 0)
	if err != nil || cur.Version != 2 || cur.Text != v2text {
		t.Fatalf("current: %+v %v", cur, err)
	}
	old, err := s.Policy(ctx, 1)
	if err != nil || old.Text != v1text || old.Comment != "fast by default" {
		t.Fatalf("version 1: %+v %v", old, err)
	}
	if _, err := s.Policy(ctx, 3); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("version 3: %v", err)
	}
	h, err := s.PolicyHistory(ctx)
	if err != nil || len(h) != 2 || h[0].Version != 1 || h[1].Version != 2 || h[0].Checksum == h[1].Checksum {
		t.Fatalf("history: %+v %v", h, err)
	}
}

func TestPolicyInstallRefusesWithPositions(t *testing.T) {
	ctx := context.Background()
	s := policyStore(t)
	_, err := s.InstallPolicy(ctx, "RULE 'a' SET POOL 'fast'\nRULE 'b' SET POOL 'fsat'\nRULE 'c' SET POOL 'fast' PROTECTION 'ec:8+2'\n", "", "")
	var perr *policy.Errors
	if !errors.As(err, &perr) || !errors.Is(err, policy.ErrInvalid) {
		t.Fatalf("bad pool: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"line 2, column 19: pool 'fsat' does not exist", "line 3, column", "needs 10 drives"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if _, err := s.Policy(ctx, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused policy was installed: %v", err)
	}
}

func TestPolicyFollowerSeesInstalls(t *testing.T) {
	ctx := context.Background()
	s := policyStore(t)
	f := NewPolicyFollower(s.Client(), discard)
	if err := f.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if p, v := f.Current(); p != nil || v != 0 {
		t.Fatalf("before install: %v %d", p, v)
	}
	run := runner.New(runner.Config{Log: discard})
	t.Cleanup(func() { _ = run.Stop(context.Background()) })
	if _, err := run.Go("policy-follow", f, runner.Options{}); err != nil {
		t.Fatal(err)
	}
	for i, text := range []string{"RULE 'default' SET POOL 'fast'", "RULE 'x' SET POOL 'capacity'"} {
		if _, err := s.InstallPolicy(ctx, text, "", ""); err != nil {
			t.Fatal(err)
		}
		want := uint64(i + 1)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, v := f.Current(); v == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the follower did not see version %d", want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	p, _ := f.Current()
	pl, ok := p.Place(policy.File{Known: policy.AttrsAtCreate, Path: "/a"}, time.Now())
	if !ok || pl.Pool != "capacity" {
		t.Fatalf("placement by the followed policy: %+v %v", pl, ok)
	}
	// A record of a newer format is not applied: the last one stays.
	f.apply([]byte(`{"v":99,"text":"x"}`))
	if _, v := f.Current(); v != 2 {
		t.Fatalf("after a newer record: version %d", v)
	}
}
