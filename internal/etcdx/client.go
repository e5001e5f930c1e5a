package etcdx

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DialTimeout bounds how long NewClient waits for the first connection.
const DialTimeout = 5 * time.Second

// How a client notices a member it cannot reach, and how soon it tries a
// member again (see docs/architecture.md, "Partitions"):
//
//   - KeepAliveTime, KeepAliveTimeout: a connection on which a ping is not
//     answered within KeepAliveTime+KeepAliveTimeout (2 s) is closed, and
//     its requests fail over to another member. At 5 s + 3 s, as before,
//     requests sat on a cut-off member for 8 s, longer than a node's 5 s
//     lease: a healthy node whose keep-alive stream was on that member
//     lost its lease. Embedded members accept pings this often
//     (MemberKeepAliveMinTime); an external etcd needs
//     --grpc-keepalive-min-time=1s or less, or it answers the pings with
//     GOAWAY and gRPC doubles the interval.
//   - ReconnectBackoff: a member that could not be reached is tried
//     again after at most this long (gRPC's default grows to 120 s), so a
//     member that returns serves the client within about a second.
//   - ReadAttemptTimeout: one attempt of a read (a range, or a read-only
//     transaction) gets this long; then the client's own retry sends it
//     to the next member. A read on a member that has no leader, or that
//     is catching up after a partition (linearizable reads wait until it
//     has applied the leader's commit index, which for a member receiving
//     a snapshot of a large database takes seconds), otherwise waits for
//     it. Writes get no such timeout: a write that timed out may still
//     commit, so it must not be sent again blindly.
//   - A member that has fallen more than 5000 entries behind in applying
//     what is committed (a member back from a partition, applying its
//     backlog) refuses new requests with "etcdserver: too many requests"
//     before proposing them, so they are sent again, to the next member,
//     up to TooManyRequestsRetries times; clientv3 itself would return
//     the error (the mount answered EIO).
const (
	KeepAliveTime      = time.Second
	KeepAliveTimeout   = time.Second
	ReconnectBackoff   = time.Second
	ReadAttemptTimeout = 3 * time.Second
	// TooManyRequestsRetries is how often a request refused as "too many
	// requests" is sent again, 20 ms apart.
	TooManyRequestsRetries = 10
)

// ClientOption changes how NewClient connects.
type ClientOption func(*clientv3.Config)

// WithTLS connects with cfg (https endpoints): the client's certificate
// authenticates it, and with etcd's authentication on its CommonName is
// the etcd user it acts as.
func WithTLS(cfg *tls.Config) ClientOption {
	return func(c *clientv3.Config) { c.TLS = cfg }
}

// PingKey is the key NewClient reads to prove a quorum answers. It is
// inside weft's prefix, which every weft identity may read when etcd's
// authentication is on (see docs/admin-guide.md, "Who may do what").
const PingKey = "/weft/ping"

// NewClient opens a client to the given etcd endpoints and checks that one of
// them answers. The caller closes it.
func NewClient(ctx context.Context, endpoints []string, opts ...ClientOption) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("etcdx: no etcd endpoints: pass --etcd-endpoints or run an embedded member")
	}
	cc := clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          DialTimeout,
		DialKeepAliveTime:    KeepAliveTime,
		DialKeepAliveTimeout: KeepAliveTimeout,
		MaxCallSendMsgSize:   16 << 20,
		MaxCallRecvMsgSize:   64 << 20,
		DialOptions: []grpc.DialOption{
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: ReconnectBackoff},
				MinConnectTimeout: 2 * time.Second,
			}),
			grpc.WithChainUnaryInterceptor(retryTooManyRequests, readAttemptTimeout),
		},
		Logger:  zap.NewNop(),
		Context: context.Background(),
	}
	for _, o := range opts {
		o(&cc)
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("etcdx: connect to %s: %w", strings.Join(endpoints, ","), err)
	}
	cctx, cancel := context.WithTimeout(ctx, DialTimeout*2)
	defer cancel()
	// A linearizable read proves there is a quorum behind the endpoints.
	if _, err := cli.Get(cctx, PingKey); err != nil {
		cli.Close()
		if denied(err) {
			return nil, fmt.Errorf("%w: etcd at %s refuses this client's certificate user: %w", ErrDenied, strings.Join(endpoints, ","), err)
		}
		return nil, fmt.Errorf("etcdx: etcd at %s does not answer: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

// ErrDenied is returned by NewClient when etcd's authentication refuses
// the client (no etcd user for its certificate, or no permission to read
// PingKey).
var ErrDenied = errors.New("etcdx: access denied")

// denied reports whether err is etcd's authentication refusing a request.
func denied(err error) bool {
	e := rpctypes.Error(err)
	for _, d := range []error{rpctypes.ErrPermissionDenied, rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound, rpctypes.ErrAuthFailed} {
		if errors.Is(e, d) {
			return true
		}
	}
	return false
}

// retryTooManyRequests is a gRPC interceptor that sends a request again
// (through the balancer, so to the next member) when a member refused it
// as "too many requests", or answered it from a stopped gRPC server (see
// stoppedMember): it was refused before being proposed, so sending it
// again never applies it twice.
func retryTooManyRequests(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	for i := 0; i < TooManyRequestsRetries && (tooManyRequests(err) || stoppedMember(err)); i++ {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
		err = invoker(ctx, method, req, reply, cc, opts...)
	}
	return err
}

// stoppedMember reports whether err is the empty answer of a member over
// TLS whose gRPC server has stopped while its HTTP/2 server still serves
// the connection (see Member.Close): the request never reached etcd.
func stoppedMember(err error) bool {
	return status.Code(err) == codes.Unknown && strings.Contains(err.Error(), "malformed header: missing HTTP content-type")
}

// tooManyRequests reports whether err is etcd's refusal of a request by a
// member whose applied index lags its commit index.
func tooManyRequests(err error) bool {
	return err != nil && errors.Is(rpctypes.Error(err), rpctypes.ErrTooManyRequests)
}

// readAttemptTimeout is a gRPC interceptor that bounds one attempt of a
// read to ReadAttemptTimeout. It runs inside clientv3's retry
// interceptor, which retries an attempt that ended on its own deadline
// (the caller's context still live) through the balancer's next member.
// Writes pass unchanged.
func readAttemptTimeout(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !readOnly(req) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	actx, cancel := context.WithTimeout(ctx, ReadAttemptTimeout)
	defer cancel()
	return invoker(actx, method, req, reply, cc, opts...)
}

// readOnly reports whether an etcd request changes nothing: a range, or a
// transaction of ranges (and nested read-only transactions) only.
func readOnly(req any) bool {
	switch r := req.(type) {
	case *pb.RangeRequest:
		return true
	case *pb.TxnRequest:
		for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
			for _, op := range ops {
				switch o := op.Request.(type) {
				case *pb.RequestOp_RequestRange:
				case *pb.RequestOp_RequestTxn:
					if !readOnly(o.RequestTxn) {
						return false
					}
				default:
					return false
				}
			}
		}
		return true
	}
	return false
}
