package etcdx

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DialTimeout bounds how long NewClient waits for the first connection.
const DialTimeout = 5 * time.Second

// NewClient opens a client to the given etcd endpoints and checks that one of
// them answers. The caller closes it.
func NewClient(ctx context.Context, endpoints []string) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("etcdx: no etcd endpoints: pass --etcd-endpoints or run an embedded member")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          DialTimeout,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		MaxCallSendMsgSize:   16 << 20,
		MaxCallRecvMsgSize:   64 << 20,
		Logger:               zap.NewNop(),
		Context:              context.Background(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdx: connect to %s: %w", strings.Join(endpoints, ","), err)
	}
	cctx, cancel := context.WithTimeout(ctx, DialTimeout*2)
	defer cancel()
	// A linearizable read proves there is a quorum behind the endpoints.
	if _, err := cli.Get(cctx, "weft-ping"); err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcdx: etcd at %s does not answer: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}
