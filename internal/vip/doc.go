// Package vip holds floating service addresses through etcd leases: every
// node is a candidate for every address, the one holding an address's key
// under its lease serves it, fences itself (stops serving) before its
// lease can expire when it cannot renew it, and gives the address up when
// its public link fails; the others take over when the key goes.
//
// It is not a protocol server: it calls back to start and stop serving
// (Config.OnAcquire, Config.OnRelease) and moves the address on the
// machine through a hook command; the gateway that serves is wired by
// package server.
package vip
