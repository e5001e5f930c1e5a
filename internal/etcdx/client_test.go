package etcdx

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Only requests that change nothing get a per-attempt timeout (and so may
// be sent again to another member).
func TestReadOnly(t *testing.T) {
	rng := &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}
	put := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k")}}}
	del := &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("k")}}}
	nested := func(ops ...*pb.RequestOp) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: ops}}}
	}
	for _, tc := range []struct {
		name string
		req  any
		want bool
	}{
		{"range", &pb.RangeRequest{Key: []byte("k")}, true},
		{"put", &pb.PutRequest{Key: []byte("k")}, false},
		{"delete", &pb.DeleteRangeRequest{Key: []byte("k")}, false},
		{"lease grant", &pb.LeaseGrantRequest{TTL: 5}, false},
		{"empty txn", &pb.TxnRequest{}, true},
		{"txn of ranges", &pb.TxnRequest{Success: []*pb.RequestOp{rng, rng}, Failure: []*pb.RequestOp{rng}}, true},
		{"txn with a put", &pb.TxnRequest{Success: []*pb.RequestOp{rng, put}}, false},
		{"txn with a delete on failure", &pb.TxnRequest{Success: []*pb.RequestOp{rng}, Failure: []*pb.RequestOp{del}}, false},
		{"nested read-only txn", &pb.TxnRequest{Success: []*pb.RequestOp{nested(rng)}}, true},
		{"nested txn with a put", &pb.TxnRequest{Failure: []*pb.RequestOp{nested(rng, put)}}, false},
	} {
		if got := readOnly(tc.req); got != tc.want {
			t.Errorf("%s: readOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A refusal by a lagging member is recognised from its wire form; other
// errors are not.
func TestTooManyRequests(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{rpctypes.ErrGRPCRequestTooManyRequests, true},
		{rpctypes.ErrTooManyRequests, true},
		{rpctypes.ErrGRPCTimeout, false},
		{rpctypes.ErrGRPCNoLeader, false},
		{status.Error(codes.ResourceExhausted, "grpc: received message larger than max"), false},
	} {
		if got := tooManyRequests(tc.err); got != tc.want {
			t.Errorf("%v: tooManyRequests = %v, want %v", tc.err, got, tc.want)
		}
	}
}
