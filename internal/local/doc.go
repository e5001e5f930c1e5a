// Package local runs a whole weft cluster on one machine: N nodes on
// 127.0.0.1 ports (or each on a loopback address of its own, and each in a
// cgroup of its own, for network fault tests), directories as drives,
// embedded etcd members in the first three nodes, supervised until stopped;
// each node and the mount is a process of the weft binary (Exec), or, for
// tests, runs inside the calling process (InProcess).
//
// It is a development and test harness, not a production deployment tool;
// every node it starts is an ordinary `weft server`.
package local
