package block

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/qos"
)

// QoS on the wire: every block call carries its qos.Tag as gRPC metadata
// (the keys below), set by the Client from its dial-time default
// (WithDefaultTag) and the call's context (WithTag). The service reads
// them in one interceptor (ServerOptions): a missing or unknown class is
// qos.Misc, never an error, and a pool the service knows for the drive
// (Service.SetPools) wins over the caller's. Get, Put, Adopt and Verify
// pass the node's qos.Gate before the drive; Delete, Stat, List and the
// usage and counter calls do not (they move no block data).
const (
	mdClass  = "weft-qos-class"
	mdPool   = "weft-qos-pool"
	mdJob    = "weft-qos-job"
	mdClient = "weft-qos-client"
	mdPID    = "weft-qos-pid"
	// mdP99 is qos.Tag.P99 in whole microseconds.
	mdP99 = "weft-qos-p99"
)

type outTagKey struct{}

// WithTag returns ctx whose block calls carry t: its non-empty fields
// override those already in ctx, which override the Client's default.
func WithTag(ctx context.Context, t qos.Tag) context.Context {
	if old, ok := ctx.Value(outTagKey{}).(qos.Tag); ok {
		t = t.Or(old)
	}
	return context.WithValue(ctx, outTagKey{}, t)
}

// OutgoingTag returns the tag WithTag put in ctx (the zero Tag if none).
func OutgoingTag(ctx context.Context) qos.Tag {
	t, _ := ctx.Value(outTagKey{}).(qos.Tag)
	return t
}

// WithDefaultTag makes every call of the Client carry t where its context
// does not say otherwise (WithTag): a mount's client dials with class
// qos.Other, a node's jobs with qos.Maintenance.
func WithDefaultTag(t qos.Tag) DialOption {
	return func(c *dialConfig) { c.tag = t }
}

// WithContextTag makes every call of the Client carry the tag f returns
// for its context where WithTag does not say otherwise (and before the
// WithDefaultTag default): a node's jobs name the job of the context.
func WithContextTag(f func(context.Context) qos.Tag) DialOption {
	return func(c *dialConfig) { c.tagOf = f }
}

// tagMetadata appends the tag of a call to ctx's outgoing metadata.
func tagMetadata(ctx context.Context, def qos.Tag, of func(context.Context) qos.Tag) context.Context {
	t := OutgoingTag(ctx)
	if of != nil {
		t = t.Or(of(ctx))
	}
	t = t.Or(def)
	kv := make([]string, 0, 10)
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, k, v)
		}
	}
	add(mdClass, string(t.Class))
	add(mdPool, t.Pool)
	add(mdJob, t.Job)
	add(mdClient, t.Client)
	if t.PID != 0 {
		add(mdPID, strconv.Itoa(t.PID))
	}
	if us := t.P99.Microseconds(); us > 0 {
		add(mdP99, strconv.FormatInt(us, 10))
	}
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// tagInterceptors are the client interceptors that send the tags.
func tagInterceptors(def qos.Tag, of func(context.Context) qos.Tag) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(tagMetadata(ctx, def, of), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(tagMetadata(ctx, def, of), desc, cc, method, opts...)
		}),
	}
}

type inTagKey struct{}

// TagOf returns the tag of the call a handler serves: what the caller
// sent, its class qos.Misc if it sent none or one this node does not know.
func TagOf(ctx context.Context) qos.Tag {
	if t, ok := ctx.Value(inTagKey{}).(qos.Tag); ok {
		return t
	}
	return readTag(ctx)
}

// readTag reads a call's tag from its incoming metadata.
func readTag(ctx context.Context) qos.Tag {
	md, _ := metadata.FromIncomingContext(ctx)
	get := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	t := qos.Tag{Class: qos.ParseClass(get(mdClass)), Pool: get(mdPool), Job: get(mdJob), Client: get(mdClient)}
	t.PID, _ = strconv.Atoi(get(mdPID))
	if us, err := strconv.ParseInt(get(mdP99), 10, 64); err == nil && us > 0 && us < int64(time.Hour/time.Microsecond) {
		t.P99 = time.Duration(us) * time.Microsecond
	}
	return t
}

// tagServerOptions are the server interceptors that read the tags.
func tagServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(context.WithValue(ctx, inTagKey{}, readTag(ctx)), req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx := ss.Context()
			return h(srv, &identityStream{ServerStream: ss, ctx: context.WithValue(ctx, inTagKey{}, readTag(ctx))})
		}),
	}
}

// SetGate makes the service pass every block data I/O through g (nil:
// none). It is safe to call while serving.
func (s *Service) SetGate(g *qos.Gate) { s.gate.Store(g) }

// SetPools gives the service the pool of each of its drives (pool of a
// drive it does not know: ""), which the limits and statistics use in
// preference to the pool a caller names. It is safe to call while
// serving.
func (s *Service) SetPools(pools map[drive.ID]string) {
	s.mu.Lock()
	s.pools = pools
	s.mu.Unlock()
}

// admit passes one I/O of n bytes on drive d through the gate; the Done
// it returns must be called once the drive has answered, saying whether
// the I/O moved a whole block. Without a gate it admits at once.
func (s *Service) admit(ctx context.Context, d drive.ID, dir qos.Dir, n int64) (qos.Done, error) {
	gate := s.gate.Load()
	if gate == nil {
		return func(bool) {}, nil
	}
	t := TagOf(ctx)
	s.mu.RLock()
	if p := s.pools[d]; p != "" {
		t.Pool = p
	}
	s.mu.RUnlock()
	done, err := gate.Admit(ctx, t, dir, max(n, 0))
	if err != nil {
		return nil, err
	}
	return done, nil
}
