package etcdx_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// A member that stops answering is taken out of the client's endpoints at
// the next step, and the client's requests go on through the others; with
// a quorum lost (the one member left has no leader) the client is given
// every endpoint again rather than none.
func TestSteerLeavesOutAStoppedMember(t *testing.T) {
	c := etcdtest.NewCluster(t, 3)
	cli := c.Client(t)
	s := etcdx.NewSteerer(cli, nil)
	ctx := context.Background()
	step := func() {
		t.Helper()
		if _, err := s.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if got := cli.Endpoints(); !slices.Equal(got, c.Endpoints) {
		t.Fatalf("all members up: the client uses %v, want %v", got, c.Endpoints)
	}

	c.Members[2].Close()
	step()
	if got, want := cli.Endpoints(), c.Endpoints[:2]; !slices.Equal(got, want) {
		t.Fatalf("m3 stopped: the client uses %v, want %v", got, want)
	}
	for i := range 20 { // round robin over what is left: none of them waits on m3
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := cli.Put(pctx, "k", "v")
		cancel()
		if err != nil {
			t.Fatalf("put %d with m3 stopped: %v", i, err)
		}
	}

	c.Members[1].Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		step()
		if slices.Equal(cli.Endpoints(), c.Endpoints) {
			break // m1 alone has lost its leader: nothing qualifies
		}
		if time.Now().After(deadline) {
			t.Fatalf("quorum lost: the client uses %v, want every endpoint %v", cli.Endpoints(), c.Endpoints)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The probe connections are closed with the client; a step after that
// does nothing and says the worker is done.
func TestSteerStopsWithTheClient(t *testing.T) {
	c := etcdtest.NewCluster(t, 2)
	cli := c.Client(t)
	s := etcdx.NewSteerer(cli, nil)
	if _, err := s.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	st, err := s.Step(context.Background())
	if err != nil || st.String() != "done" {
		t.Fatalf("step after the client closed: %v, %v; want done, nil", st, err)
	}
}
