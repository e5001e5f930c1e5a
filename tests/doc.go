// Package tests holds weft's cluster tests: real multi-process clusters
// started through package harness.
package tests
