package etcdkv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/kvtest"
)

// factory returns stores on cli, each under its own prefix, with limits.
func factory(cli *clientv3.Client, limits kv.Limits, session ...bool) kvtest.Factory {
	return func(tb testing.TB, o kv.Options) kv.Store {
		if o.Limits == (kv.Limits{}) {
			o.Limits = limits
		}
		s, err := etcdkv.New(etcdkv.Config{Client: cli, Prefix: "kvtest/" + tb.Name() + "/", Options: o, SessionReads: len(session) > 0 && session[0]})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	}
}

// TestConformance runs the suite against one embedded member as package
// etcdx starts it (1024 ops, 8 MiB per transaction).
func TestConformance(t *testing.T) {
	kvtest.Run(t, factory(etcdtest.New(t), etcdkv.EmbeddedLimits))
}

// TestConformanceThreeMembers runs the suite against a 3-member cluster, with
// the client spread over all members (reads may hit a lagging follower).
func TestConformanceThreeMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	kvtest.Run(t, factory(etcdtest.NewCluster(t, 3).Client(t), etcdkv.EmbeddedLimits))
}

// TestConformanceSessionReads runs the suite with session reads on a
// 3-member cluster: views read from any member, never older than what the
// store itself committed or read.
func TestConformanceSessionReads(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	kvtest.Run(t, factory(etcdtest.NewCluster(t, 3).Client(t), etcdkv.EmbeddedLimits, true))
}

// TestSessionReadsSeeOwnWrites commits through one store and reads back at
// once with a view, many times, over a client spread across 3 members.
func TestSessionReadsSeeOwnWrites(t *testing.T) {
	cli := etcdtest.NewCluster(t, 3).Client(t)
	s, err := etcdkv.New(etcdkv.Config{Client: cli, Prefix: "ryw/", Options: kv.Options{Limits: etcdkv.EmbeddedLimits}, SessionReads: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		k, v := []byte(fmt.Sprintf("k%03d", i%7)), []byte(fmt.Sprint(i))
		if err := s.Update(ctx, func(tx kv.Tx) error { tx.Put(k, v); return nil }); err != nil {
			t.Fatal(err)
		}
		var got []byte
		if err := s.View(ctx, func(tx kv.Tx) error { var err error; got, err = tx.Get(k); return err }); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(v) {
			t.Fatalf("write %d: a view right after the commit read %q, want %q", i, got, v)
		}
	}
}

// TestConformanceEtcdDefaults runs the suite against a member with etcd's own
// defaults (128 ops, 1.5 MiB), as an external cluster most likely has.
func TestConformanceEtcdDefaults(t *testing.T) {
	kvtest.Run(t, factory(defaultMember(t), etcdkv.DefaultLimits))
}

// TestLimitsAboveCluster configures the store with larger limits than the
// cluster has: etcd refuses the commit, and that must surface as
// kv.ErrTooLarge, never as a raw etcd error.
func TestLimitsAboveCluster(t *testing.T) {
	s := factory(defaultMember(t), etcdkv.EmbeddedLimits)(t, kv.Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		fn   func(tx kv.Tx) error
	}{
		{"ops", func(tx kv.Tx) error {
			for i := 0; i < 200; i++ {
				tx.Put([]byte(fmt.Sprintf("k%03d", i)), []byte("v"))
			}
			return nil
		}},
		{"bytes", func(tx kv.Tx) error {
			tx.Put([]byte("big"), bytes.Repeat([]byte("v"), 2<<20))
			return nil
		}},
	} {
		err := s.Update(ctx, tc.fn)
		if !errors.Is(err, kv.ErrTooLarge) {
			t.Fatalf("%s: %v, want kv.ErrTooLarge", tc.name, err)
		}
		t.Logf("%s: %v", tc.name, err)
	}
}

// defaultMember starts one embedded member with etcd's default limits and
// returns a client to it; both stop at cleanup.
func defaultMember(t *testing.T) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "default"
	cfg.Dir = t.TempDir()
	curl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)))
	purl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)))
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*curl}, []url.URL{*curl}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*purl}, []url.URL{*purl}
	cfg.InitialCluster = cfg.Name + "=" + purl.String()
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	if cfg.MaxTxnOps != 128 || cfg.MaxRequestBytes != 1536*1024 {
		t.Fatalf("etcd defaults changed: %d ops, %d bytes", cfg.MaxTxnOps, cfg.MaxRequestBytes)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("etcd member not ready")
	}
	cli, err := etcdx.NewClient(context.Background(), []string{strings.TrimSpace(curl.String())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
