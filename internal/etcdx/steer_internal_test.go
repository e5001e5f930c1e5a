package etcdx

import (
	"errors"
	"slices"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Which members qualify: answered, have a leader, and have applied all but
// maxLag of the highest commit index any member with a leader reported.
func TestChoose(t *testing.T) {
	all := []string{"a", "b", "c"}
	ok := func(ep string, commit, applied uint64) MemberStatus {
		return MemberStatus{Endpoint: ep, Resp: &pb.StatusResponse{Leader: 7, RaftIndex: commit, RaftAppliedIndex: applied}}
	}
	leaderless := func(ep string, commit uint64) MemberStatus {
		return MemberStatus{Endpoint: ep, Resp: &pb.StatusResponse{RaftIndex: commit, RaftAppliedIndex: commit}}
	}
	failed := func(ep, why string) MemberStatus { return MemberStatus{Endpoint: ep, Err: errors.New(why)} }
	for _, tc := range []struct {
		name   string
		probes []MemberStatus
		want   []string
	}{
		{"all in step", []MemberStatus{ok("a", 100, 99), ok("b", 100, 100), ok("c", 98, 97)}, all},
		{"one unreachable", []MemberStatus{ok("a", 100, 100), failed("b", "deadline exceeded"), ok("c", 100, 100)}, []string{"a", "c"}},
		{"one without a leader", []MemberStatus{ok("a", 100, 100), ok("b", 100, 100), leaderless("c", 100)}, []string{"a", "b"}},
		{"one back from a partition", []MemberStatus{ok("a", 50000, 50000), ok("b", 50000, 49990), ok("c", 3000, 3000)}, []string{"a", "b"}},
		{"one applying a snapshot", []MemberStatus{ok("a", 50000, 50000), ok("b", 50000, 49990), ok("c", 50000, 3000)}, []string{"a", "b"}},
		{"just inside the lag", []MemberStatus{ok("a", 5000, 5000), ok("b", 4000, 4000)}, []string{"a", "b"}},
		{"just outside the lag", []MemberStatus{ok("a", 5001, 5001), ok("b", 4000, 4000)}, []string{"a"}},
		// A leaderless member's own commit index does not count: a
		// cut-off member cannot make the others look behind.
		{"a leaderless member ahead", []MemberStatus{ok("a", 100, 100), ok("b", 100, 100), leaderless("c", 90000)}, []string{"a", "b"}},
		{"none qualifies", []MemberStatus{failed("a", "refused"), failed("b", "refused"), leaderless("c", 10)}, nil},
		{"one not probed", []MemberStatus{ok("a", 100, 100), ok("c", 100, 100)}, []string{"a", "c"}},
	} {
		fit, out := choose(all, tc.probes, 1000)
		if !slices.Equal(fit, tc.want) {
			t.Errorf("%s: fit %v, want %v (out: %v)", tc.name, fit, tc.want, out)
		}
		if len(fit)+len(out) != len(all) {
			t.Errorf("%s: %d fit and %d out of %d endpoints", tc.name, len(fit), len(out), len(all))
		}
		for _, ep := range fit {
			if _, isOut := out[ep]; isOut {
				t.Errorf("%s: %s both fit and out", tc.name, ep)
			}
		}
	}
}
