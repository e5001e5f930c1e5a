package vfs

import (
	"context"

	"github.com/weftfs/weft/internal/meta"
)

// Caller is who performs an operation: the owner of what it creates, and
// whom permission checks (Config.CheckPermissions, Allowed) are about.
type Caller struct {
	UID, GID uint32
	// Groups are supplementary group ids.
	Groups []uint32
}

// WithCaller returns ctx carrying c; a gateway calls it once per request.
// A context without a caller is root's (uid 0, gid 0).
//
// The caller travels as the namespace's own (meta.WithCaller), converted
// here, so that passing it down costs nothing per call.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return meta.WithCaller(ctx, callerToMeta(c))
}

// CallerFrom returns the Caller in ctx, or root (uid 0, gid 0) if none.
func CallerFrom(ctx context.Context) Caller {
	return callerFromMeta(meta.CallerFrom(ctx))
}
