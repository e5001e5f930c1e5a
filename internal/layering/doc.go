// Package layering holds weft's import rules: one table, in Go, of the weft
// packages each package of the module may import (rules.go), checked over
// the module's import graph by this package's test and printed from the
// same table into docs/architecture.md; and the places where a go
// statement is allowed outside the runner and the job engine
// (goroutines.go), checked over the module's source the same way.
//
// It is not a library: nothing imports it, and it does nothing at run time.
package layering
