// Package memkv is an in-memory kv.Store with the same optimistic-transaction
// semantics as the etcd backend (snapshots, read-set validation, limits), for
// unit tests and single-process tools.
//
// It is not durable and not shared between processes: everything is lost on
// Close or exit.
package memkv
