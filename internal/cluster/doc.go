// Package cluster is weft's control plane in etcd: the cluster identity,
// nodes and their liveness, drives with their availability and status, and
// pools.
//
// It is not the namespace (package meta) and does no block I/O; it only
// reads and writes the control-plane keys described in schema.go.
package cluster
