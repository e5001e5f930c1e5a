package server

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"
	"testing"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/gateway/nfs"
	"github.com/weftfs/weft/internal/gateway/nfs/nfstest"
)

// TestNFSDRCStore: records go under the versioned prefix with a lease,
// are read back by any store over the same etcd, unknown keys are
// absent, and concurrent puts are committed in fewer transactions.
func TestNFSDRCStore(t *testing.T) {
	cli := etcdtest.New(t)
	ctx := context.Background()
	a, b := newNFSDRC(cli), newNFSDRC(cli)
	k := nfs.DRCKey{Client: netip.MustParseAddr("10.0.0.7"), XID: 0x1234, Prog: 100003, Proc: 8, Sum: 0xdead}
	if err := a.Put(ctx, k, []byte("reply")); err != nil {
		t.Fatal(err)
	}
	if r, ok, err := b.Get(ctx, k); err != nil || !ok || string(r) != "reply" {
		t.Fatalf("Get from another gateway: %q %v %v", r, ok, err)
	}
	resp, err := cli.Get(ctx, "/weft/nfs/drc/v1/10.0.0.7/00001234-000186a3-08-0000dead")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("the record's key and lease: %+v %v", resp, err)
	}
	k2 := k
	k2.Sum++
	if _, ok, err := b.Get(ctx, k2); ok || err != nil {
		t.Fatalf("Get of another request's key: %v %v", ok, err)
	}
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kk := k
			kk.XID = uint32(i)
			if err := a.Put(ctx, kk, []byte{byte(i)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := range n {
		kk := k
		kk.XID = uint32(i)
		if r, ok, err := b.Get(ctx, kk); err != nil || !ok || len(r) != 1 || r[0] != byte(i) {
			t.Fatalf("record %d: %v %v %v", i, r, ok, err)
		}
	}
	t.Logf("%d puts in %d transactions", a.puts.Load(), a.txns.Load())
	if a.puts.Load() != n+1 {
		t.Fatalf("%d puts counted, want %d", a.puts.Load(), n+1)
	}
}

// BenchmarkNFSCreateRemove measures the shared duplicate-request cache's
// cost: CREATE and REMOVE pairs through a gateway with the in-memory cache
// only, and with the etcd store (one record per request, written before
// the reply), in the same run (-benchtime=Nx; compare the ratio). conc
// clients run at once, as a gateway's clients do.
func BenchmarkNFSCreateRemove(b *testing.B) {
	cli := etcdtest.New(b)
	f := nfstest.New(b, 1)
	for _, tc := range []struct {
		name string
		drc  nfs.DRCStore
	}{{"memory", nil}, {"etcd", newNFSDRC(cli)}} {
		for _, conc := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/clients=%d", tc.name, conc), func(b *testing.B) {
				f.DRC = tc.drc
				f.Start(1, nfs.Export{Path: "/", NoRootSquash: true})
				tgs := make([]*nfsc.Target, conc)
				for i := range tgs {
					// go-nfs-client binds a random source port without
					// asking the kernel: try another when it is taken.
					var rc *rpc.Client
					var err error
					for range 10 {
						if rc, err = rpc.DialTCP("tcp", f.Addr, false); !errors.Is(err, syscall.EADDRINUSE) {
							break
						}
					}
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { rc.Close() })
					m := &nfsc.Mount{Client: rc}
					if tgs[i], err = m.Mount("/", rpc.NewAuthUnix("bench", 0, 0).Auth()); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				var wg sync.WaitGroup
				for c, tg := range tgs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := c; i < b.N; i += conc {
							name := fmt.Sprintf("%s-%d-%d", tc.name, conc, i)
							if _, err := tg.Create(name, 0o644); err != nil {
								b.Error(err)
								return
							}
							if err := tg.Remove(name); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			})
		}
	}
}
