package kv

import "context"

// Change is one change of a key, as a Follower reports it.
type Change struct {
	Key []byte
	// Value is the new value; nil for a delete.
	Value  []byte
	Delete bool
	// Rev is the store revision of the change (the key's new ModRev).
	Rev int64
}

// Changes is one delivery of a Follower: the changes of whole revisions,
// in revision order, and the revision Rev up to which every change has now
// been delivered (Rev >= the last change's). A delivery without changes is
// a progress report.
type Changes struct {
	Changes []Change
	Rev     int64
}

// Follower is a Store whose changes can be followed, and whose snapshot
// and commit machinery can be reused: what a caching store (package
// kvcache) builds on. etcdkv and memkv implement it.
type Follower interface {
	Store
	// Backend returns the store's snapshots and commits. readOnly selects
	// the snapshots View uses (for etcdkv: session reads if configured),
	// which a caller may use for reads that a later commit validates.
	Backend(readOnly bool) Backend
	// Follow calls fn, from one goroutine, with every change committed
	// after revision after, in revision order, and with progress reports;
	// it returns when ctx is done (ctx.Err()) or the stream breaks (an
	// error wrapping ErrUnavailable, or ErrCompacted when changes after
	// after are no longer kept). fn must not call the store.
	Follow(ctx context.Context, after int64, fn func(Changes)) error
	// Progress asks running Follow calls to report, soon, the revision up
	// to which they delivered changes (a Changes without changes). It does
	// not wait for the report.
	Progress(ctx context.Context) error
}

// ErrCompacted means the store no longer keeps the changes a Follow asked
// for: start over from a fresh snapshot.
var ErrCompacted = errCompacted{}

type errCompacted struct{}

func (errCompacted) Error() string { return "kv: revision compacted" }
