package cluster

import "errors"

// Sentinel errors. Callers test them with errors.Is; messages wrap them
// with the input that was wrong.
var (
	ErrNotFound      = errors.New("cluster: not found")
	ErrExists        = errors.New("cluster: already exists")
	ErrNewerSchema   = errors.New("cluster: newer schema")
	ErrCorruptRecord = errors.New("cluster: corrupt record")
	ErrBadTransition = errors.New("cluster: bad drive status transition")
	ErrNodeInUse     = errors.New("cluster: node name in use")
	ErrInvalid       = errors.New("cluster: invalid argument")
	// ErrInUse: something still uses what was to be deleted (a pool's
	// drives); the message names it and what to do.
	ErrInUse = errors.New("cluster: in use")
	// ErrConflict: a compare-and-swap write lost to another writer; read
	// again and retry.
	ErrConflict = errors.New("cluster: concurrent update")
	// ErrAccess: etcd's authentication refused the request (the caller's
	// identity has no etcd user, or its role does not allow it).
	ErrAccess = errors.New("cluster: access refused")
	// ErrBadToken: a bearer token that is malformed, unknown, revoked or
	// expired.
	ErrBadToken = errors.New("cluster: bad token")
)
