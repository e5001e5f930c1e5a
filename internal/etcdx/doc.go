// Package etcdx starts and stops embedded etcd members and opens clients to
// the control-plane etcd, embedded or external.
//
// It is not the control-plane schema (see package cluster) and holds no weft
// state of its own.
package etcdx
