// Package bench holds the measurements behind `weft bench`: metadata
// operation rates in a directory, a FUSE loopback mount with kernel
// passthrough refused, which is the ceiling of FUSE itself on a machine,
// and the test namespace of weft bench populate, written straight into
// the metadata store.
//
// It measures and makes test data; it asserts nothing. Results are
// JSON-friendly structs.
package bench
