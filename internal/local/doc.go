// Package local runs a whole weft cluster on one machine: N node processes
// on 127.0.0.1 ports, directories as drives, embedded etcd members in the
// first three nodes, supervised until stopped.
//
// It is a development and test harness, not a production deployment tool;
// every node it starts is an ordinary `weft server` process.
package local
