package vfs

import (
	"context"

	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/qos"
)

// Caller is who performs an operation: the owner of what it creates, and
// whom permission checks (Config.CheckPermissions, Allowed) are about;
// and, for the QoS statistics, the process it is done for.
type Caller struct {
	UID, GID uint32
	// Groups are supplementary group ids.
	Groups []uint32
	// PID is the process the request is done for as the kernel named it
	// (a FUSE request's header: the calling thread's id, the process's
	// own for a single-threaded one); 0 when the gateway does not know
	// it. It reaches the QoS tag of the block calls the request makes
	// itself: a read served from the mount's cache or readahead, or a
	// write-out started by the client's flusher for several writers, has
	// no pid (0, "unknown").
	PID uint32
}

// WithCaller returns ctx carrying c; a gateway calls it once per request.
// A context without a caller is root's (uid 0, gid 0), with no pid.
//
// The caller travels as the namespace's own (meta.WithCaller), converted
// here, so that passing it down costs nothing per call; the pid travels
// as the QoS statistics' (qos.WithPID), which the data path reads.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return qos.WithPID(meta.WithCaller(ctx, callerToMeta(c)), int(c.PID))
}

// CallerFrom returns the Caller in ctx, or root (uid 0, gid 0) if none.
func CallerFrom(ctx context.Context) Caller {
	c := callerFromMeta(meta.CallerFrom(ctx))
	c.PID = uint32(qos.PIDOf(ctx))
	return c
}
