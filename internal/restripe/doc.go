// Package restripe re-protects, moves and verifies stripes copy-on-write
// for the jobs (repair, drain, rebalance, integrityscan, mediascan): it
// reads what survives of a stripe, rebuilds or copies the units that must
// go elsewhere, places and stores them, and commits the new stripe map on
// the generation it read, so that a concurrent writer always wins.
//
// It is not the file data path: reading and writing files, degraded reads
// and the commit itself are package client's, whose narrow primitives
// (DataPath) it works through; and it decides nothing about which files
// or drives to work on, which is the jobs'.
package restripe
