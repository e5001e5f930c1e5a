package etcdkv_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
)

// A fault of one write transaction in transport.
type fault int

const (
	lostBefore     fault = iota + 1 // fails without reaching etcd
	lostAfter                       // applied, then the answer is lost
	lostAfterOther                  // applied, another writer writes, then the answer is lost
)

// faults fails the next write transactions as planned, after the
// client's own retries decided (as for a connection that died).
type faults struct {
	mu    sync.Mutex
	plan  []fault
	other func() // the other writer of lostAfterOther
}

func (f *faults) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r, ok := req.(*pb.TxnRequest)
	if !ok || len(r.Success) == 0 || r.Success[0].GetRequestRange() != nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	f.mu.Lock()
	var next fault
	if len(f.plan) > 0 {
		next, f.plan = f.plan[0], f.plan[1:]
	}
	f.mu.Unlock()
	lost := status.Error(codes.Unavailable, "error reading from server: read tcp: connection timed out")
	switch next {
	case lostBefore:
		return lost
	case lostAfter, lostAfterOther:
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
		if next == lostAfterOther {
			f.other()
		}
		return lost
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// A commit whose answer is lost in transport is settled, not reported as
// unavailable: applied, it is found applied (the transaction is not run
// again, nothing is written twice); not applied, it is sent again, guarded
// so that it applies at most once and never over another writer's change.
func TestCommitLostInTransport(t *testing.T) {
	c := etcdtest.NewCluster(t, 1)
	f := &faults{}
	cli, err := etcdx.NewClient(context.Background(), c.Endpoints, func(cc *clientv3.Config) {
		cc.DialOptions = append(cc.DialOptions, grpc.WithChainUnaryInterceptor(f.intercept))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	other := c.Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		plan      []fault
		blind     bool   // put n without reading it first
		times     bool   // put t too, blind (as a directory's times are)
		otherKey  string // the key the other writer of lostAfterOther writes
		wantRuns  int    // how often the transaction's function ran
		wantValue string // the key's value after
		wantErr   error
	}{
		{"applied, answer lost", []fault{lostAfter}, false, false, "", 1, "1", nil},
		{"not applied", []fault{lostBefore}, false, true, "", 1, "1", nil},
		{"applied blind, answer lost", []fault{lostAfter}, true, false, "", 1, "1", nil},
		// The blind key changed after the first attempt applied: the key
		// read and written still proves it.
		{"applied, blind key written since, answer lost", []fault{lostAfterOther}, false, true, "t", 1, "1", nil},
		// The only key changed after the first attempt applied: that
		// attempt cannot be proven, and the guarded resend must not
		// apply; the transaction runs again on fresh data.
		{"applied blind, another writer, answer lost", []fault{lostAfterOther}, true, false, "n", 2, "1", nil},
		{"lost twice", []fault{lostBefore, lostBefore}, false, false, "", 1, "", kv.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "lost/" + t.Name() + "/"
			s, err := etcdkv.New(etcdkv.Config{Client: cli, Prefix: prefix, Options: kv.Options{Limits: etcdkv.EmbeddedLimits}})
			if err != nil {
				t.Fatal(err)
			}
			f.other = func() {
				if _, err := other.Put(ctx, prefix+tc.otherKey, "other"); err != nil {
					t.Error(err)
				}
			}
			f.plan = tc.plan
			runs := 0
			err = s.Update(ctx, func(tx kv.Tx) error { // a counter: n = n+1
				runs++
				n := 0
				if !tc.blind {
					v, err := tx.Get([]byte("n"))
					if err != nil {
						return err
					}
					if v != nil {
						if n, err = strconv.Atoi(string(v)); err != nil {
							return err
						}
					}
				}
				tx.Put([]byte("n"), []byte(strconv.Itoa(n+1)))
				if tc.times {
					tx.Put([]byte("t"), []byte(strconv.Itoa(runs)))
				}
				return nil
			})
			if !errors.Is(err, tc.wantErr) || (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("Update: %v, want %v", err, tc.wantErr)
			}
			if runs != tc.wantRuns {
				t.Errorf("the transaction ran %d times, want %d", runs, tc.wantRuns)
			}
			resp, err := other.Get(ctx, prefix+"n")
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if len(resp.Kvs) > 0 {
				got = string(resp.Kvs[0].Value)
			}
			if got != tc.wantValue {
				t.Errorf("n = %q after, want %q", got, tc.wantValue)
			}
		})
	}
}
