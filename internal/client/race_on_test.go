//go:build race

package client

// raceEnabled: the race detector slows block transfers about 6-fold
// (every memmove is instrumented), so the largest tests shrink under it.
const raceEnabled = true
