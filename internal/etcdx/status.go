package etcdx

import (
	"context"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// MemberStatus is one etcd member's answer to a status request, or why
// there was none.
type MemberStatus struct {
	Endpoint string
	Resp     *pb.StatusResponse // nil if Err
	Err      error
}

// AskStatus asks every endpoint for its status at once through ask (the
// Status call of some connection to it), each within timeout, so that a
// member that does not answer does not hold up the others; it returns the
// answers in the order of endpoints. `weft status` (cluster) and the
// etcd-steer worker (Steerer) use it.
func AskStatus(ctx context.Context, endpoints []string, timeout time.Duration,
	ask func(ctx context.Context, endpoint string) (*pb.StatusResponse, error)) []MemberStatus {
	out := make([]MemberStatus, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		out[i].Endpoint = ep
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i].Resp, out[i].Err = ask(actx, ep)
			if out[i].Err != nil {
				out[i].Resp = nil
			}
		})
	}
	wg.Wait()
	return out
}
