package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/runner"
)

func TestQoSConfigFollowAndDemand(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if c, rev, err := s.QoS(ctx); err != nil || rev != 0 || c.Enabled || c.Version != 0 {
		t.Fatalf("QoS before any change: %+v %d %v", c, rev, err)
	}
	f := NewQoSFollower(s, discard, nil)
	run := runner.New(runner.Config{Log: discard})
	t.Cleanup(func() { _ = run.Stop(context.Background()) })
	if _, err := run.Go("qos-follow", f, runner.Options{}); err != nil {
		t.Fatal(err)
	}
	set, err := qos.Parse([]string{"pool=*,maintenance=40IOPS"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.UpdateQoS(ctx, "admin:alice", func(c qos.Config) (qos.Config, error) {
		c.Enabled = true
		return c.Merge(set, false), nil
	})
	if err != nil || c.Version != 1 || !c.Enabled || c.By != "admin:alice" {
		t.Fatalf("first change: %+v %v", c, err)
	}
	refuse := errors.New("no")
	if _, err := s.UpdateQoS(ctx, "", func(qos.Config) (qos.Config, error) { return qos.Config{}, refuse }); !errors.Is(err, refuse) {
		t.Fatalf("a refused change: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.Current().Version != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the follower did not see version 1")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := f.Current().Resolve("any", qos.Maintenance); got != (qos.Limit{IOPS: 40}) {
		t.Fatalf("followed limit: %v", got)
	}
	f.apply([]byte(`{"v":99}`)) // a newer record is not applied
	if f.Current().Version != 1 {
		t.Fatalf("after a newer record: %+v", f.Current())
	}

	sess, err := s.Register(ctx, Registration{Record: NodeRecord{Name: "n1"}, TTL: 30 * time.Second, Log: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	d := qos.NodeDemand{Pools: []string{"p0"}, Demand: []qos.KeyDemand{{Pool: "p0", Class: qos.Maintenance, Ops: 12}}}
	if err := sess.PublishQoSDemand(ctx, d); err != nil {
		t.Fatal(err)
	}
	ds, err := s.QoSDemands(ctx)
	if err != nil || len(ds) != 1 || ds[0].Node != "n1" || ds[0].Demand[0].Ops != 12 {
		t.Fatalf("demands: %+v %v", ds, err)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	if ds, err := s.QoSDemands(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("demands after the node left: %+v %v", ds, err)
	}
}
