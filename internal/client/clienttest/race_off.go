//go:build !race

package clienttest

// RaceEnabled: see race_on.go.
const RaceEnabled = false
