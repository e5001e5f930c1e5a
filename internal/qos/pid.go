package qos

import "context"

type pidKey struct{}

// WithPID returns ctx carrying pid, the process a request is done for
// as the kernel named it (a FUSE request's header: the id of the calling
// thread, the process's own for a single-threaded one); pid ≤ 0 leaves
// ctx as it is. The data path puts it in the Tag of the request's block
// calls, for the fine statistics.
func WithPID(ctx context.Context, pid int) context.Context {
	if pid <= 0 {
		return ctx
	}
	return context.WithValue(ctx, pidKey{}, pid)
}

// PIDOf returns the pid WithPID put in ctx, 0 (unknown) if none.
func PIDOf(ctx context.Context) int {
	pid, _ := ctx.Value(pidKey{}).(int)
	return pid
}
