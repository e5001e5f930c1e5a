package job

import "context"

type jobIDKey struct{}

// WithJobID returns ctx marked as doing the work of job id: a manager's
// workers run every item of a job with such a context, so that the layers
// below can say whose I/O it is (the QoS tag of a block call).
func WithJobID(ctx context.Context, id JobID) context.Context {
	return context.WithValue(ctx, jobIDKey{}, id)
}

// JobIDOf returns the job whose work ctx does, and false outside a job.
func JobIDOf(ctx context.Context) (JobID, bool) {
	id, ok := ctx.Value(jobIDKey{}).(JobID)
	return id, ok
}
