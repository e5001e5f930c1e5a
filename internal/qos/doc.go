// Package qos is weft's quality of service for block I/O: the I/O classes
// (other, maintenance, misc), the administrator's limits per pool and class
// and their parsing, the token buckets that hold a node's share of them,
// the sharing of a cluster-wide limit among nodes by demand, and the
// per-second statistics, with the clients' latency per pool that the job
// throttle reads and the fine view by job, client, pid and size class.
//
// It is not the wiring: it neither reads etcd nor serves gRPC; package
// cluster stores the configuration, package block calls Gate before the
// drive, and package server runs the sharing once a second.
package qos
