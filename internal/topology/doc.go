// Package topology is the client's view of a running cluster: which
// drives exist and whether they are up and usable, where each node's block
// service listens, and each pool's default protection, read from the
// control plane (package cluster) and cached — the client.Topology the
// server and the mount wire into their clients.
//
// It is not the control plane, which owns and changes those records, and
// it runs nothing in the background: a stale snapshot is refreshed by the
// first call that finds it stale.
package topology
