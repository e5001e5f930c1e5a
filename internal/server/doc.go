// Package server wires the roles of one weft node — embedded etcd member,
// control-plane registration, drives, block service, admin API — and runs
// them until stopped. cmd/weft and the tests use it.
//
// It holds no storage logic of its own; each role lives in its package.
package server
