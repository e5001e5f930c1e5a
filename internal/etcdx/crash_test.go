package etcdx_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// TestMemberCrash: a crashed member's accepted connections end when Crash
// returns, the others keep a quorum, and the member starts again in the
// same process from its data directory and catches up; Close after Crash
// does nothing.
func TestMemberCrash(t *testing.T) {
	// Every call below is bounded: a member that cannot serve fails the
	// test instead of hanging it (a read is retried until its context ends).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfgs := make([]etcdx.MemberConfig, 3)
	var initial, endpoints []string
	for i := range cfgs {
		cfgs[i] = etcdx.MemberConfig{
			Name:         fmt.Sprintf("m%d", i+1),
			Dir:          t.TempDir(),
			ClientURL:    fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
			PeerURL:      fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
			ClusterToken: "crash",
		}
		initial = append(initial, cfgs[i].Name+"="+cfgs[i].PeerURL)
		endpoints = append(endpoints, cfgs[i].ClientURL)
	}
	members := make([]*etcdx.Member, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(initial, ",")
		wg.Add(1)
		go func() { defer wg.Done(); members[i], errs[i] = etcdx.Start(ctx, cfgs[i], nil) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(members[i].Close)
	}
	cli, err := etcdx.NewClient(ctx, endpoints)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	// A connection to the member's client port, open when it crashes.
	u, _ := url.Parse(cfgs[0].ClientURL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	members[0].Crash()
	members[0].Close() // a no-op now
	// The deadline guards against a hang; the read must end at once.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := conn.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a connection to the crashed member: read %v, want the connection ended", err)
	}
	// A put in flight to a crashed leader times out, as after a kill:
	// retry until the two others have elected a leader.
	for deadline := time.Now().Add(time.Minute); ; {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cli.Put(pctx, "k", "written while m1 was down")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("put with one member of three crashed: %v", err)
		}
	}

	again, err := etcdx.Start(ctx, cfgs[0], nil)
	if err != nil {
		t.Fatalf("restart of the crashed member in the same process: %v", err)
	}
	defer again.Close()
	one, err := etcdx.NewClient(ctx, []string{cfgs[0].ClientURL})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	r, err := one.Get(ctx, "k")
	if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "written while m1 was down" {
		t.Fatalf("the restarted member reads %v, %v", r, err)
	}
}
