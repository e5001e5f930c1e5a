package block

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/weftfs/weft/internal/pki"
)

// Who may use the block service: over mutual TLS (SecureServerOptions),
// a peer whose certificate the cluster's CA signed and that names a node
// (replication, repair, the jobs) or a client (a mount, a gateway). An
// administrator's identity is refused: administration goes through the
// admin API. Every method is checked, before its handler runs; Adopt,
// which takes in a file from the drive directory, checks again in its
// handler (RequireIdentity), so that a server assembled without the
// interceptors still refuses it.

// ErrNotAllowed: the peer's identity may not use the block service.
var ErrNotAllowed = errors.New("block: not allowed")

// SecureServerOptions are ServerOptions for a block service served over
// mutual TLS with src's certificate (reloaded when it is renewed or the
// CA rotated), admitting only the identities Authorize allows.
func SecureServerOptions(src *pki.Source) []grpc.ServerOption {
	return append(ServerOptions(),
		grpc.Creds(credentials.NewTLS(src.ServerTLS())),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := authorize(ctx)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := authorize(ss.Context())
			if err != nil {
				return err
			}
			return h(srv, &identityStream{ServerStream: ss, ctx: ctx})
		}),
	)
}

// Authorize reports whether identity id may use the block service: nodes
// and clients may; anything else is ErrNotAllowed.
func Authorize(id pki.Identity) error {
	switch id.Kind {
	case pki.KindNode, pki.KindClient:
		return nil
	}
	return fmt.Errorf("%w: %s may not use the block service (node and client identities only; administer the cluster through the admin API)", ErrNotAllowed, id)
}

type identityKey struct{}

// authorize checks the peer of a call and returns ctx carrying its
// identity, or a PermissionDenied (Unauthenticated without a verified
// certificate) status.
func authorize(ctx context.Context) (context.Context, error) {
	id, err := peerIdentity(ctx)
	if err != nil {
		return ctx, status.Error(codes.Unauthenticated, err.Error())
	}
	if err := Authorize(id); err != nil {
		return ctx, status.Error(codes.PermissionDenied, err.Error())
	}
	return context.WithValue(ctx, identityKey{}, id), nil
}

// peerIdentity returns the verified identity of the TLS peer of ctx.
func peerIdentity(ctx context.Context) (pki.Identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return pki.Identity{}, fmt.Errorf("%w: block: the call did not come over TLS", pki.ErrNoPeer)
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return pki.Identity{}, fmt.Errorf("%w: block: the call did not come over TLS", pki.ErrNoPeer)
	}
	return pki.PeerIdentity(ti.State)
}

// IdentityOf returns the authorized identity of the caller of a handler
// served with SecureServerOptions, and false on an insecure server.
func IdentityOf(ctx context.Context) (pki.Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(pki.Identity)
	return id, ok
}

// identityStream is a server stream whose context carries the caller's
// identity.
type identityStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *identityStream) Context() context.Context { return s.ctx }
