// Package kvtest is the conformance suite every kv.Store backend must pass:
// reads and writes, read-your-writes, snapshots, paged scans, conflict
// detection (keys, absent keys, scanned ranges, deletes), bounded retries,
// concurrent conflicting transactions, and per-transaction limits.
//
// It is not a benchmark and holds no backend: each backend's own test calls
// Run with a factory.
package kvtest
