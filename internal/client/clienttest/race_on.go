//go:build race

package clienttest

// RaceEnabled reports whether the race detector is on: it slows block
// transfers about 6-fold (every memmove is instrumented), so the largest
// tests shrink under it.
const RaceEnabled = true
