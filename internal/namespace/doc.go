// Package namespace opens the cluster's namespace (package meta) over the
// etcd that hosts the control plane: the etcd-backed store with the right
// transaction limits, the mount's coherent cache (package kvcache), the
// format of a new cluster, and the liveness check of client sessions that
// directory delegations need.
//
// It is wiring, shared by the node (internal/server), the mount
// (internal/mount) and the test harness; it is not the control plane
// (package cluster knows nodes, drives and pools and nothing of the
// namespace) and holds no namespace logic (package meta).
package namespace
