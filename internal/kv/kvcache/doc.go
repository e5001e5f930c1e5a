// Package kvcache is a kv.Store that keeps a bounded local copy of the keys
// of a kv.Follower, kept coherent by following the store's changes, so
// that reads are served locally and read-write transactions commit without
// reading first. It is not a store of its own: every write goes to the
// underlying store, and every commit is validated there.
package kvcache
