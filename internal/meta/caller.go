package meta

import "context"

// Caller is who performs an operation. Meta uses it for the owner of new
// inodes; permission checks belong to vfs, which has the same Caller.
type Caller struct {
	UID, GID uint32
	// Groups are supplementary group ids.
	Groups []uint32
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller in ctx, or root (uid 0, gid 0) if none.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}
