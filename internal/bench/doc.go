// Package bench holds the measurements behind `weft bench`: metadata
// operation rates in a directory, and a FUSE loopback mount with kernel
// passthrough refused, which is the ceiling of FUSE itself on a machine.
//
// It measures; it asserts nothing. Results are JSON-friendly structs.
package bench
