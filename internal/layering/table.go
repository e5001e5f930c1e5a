package layering

import (
	"fmt"
	"slices"
	"strings"
)

// Table is weft's import rules: one row per package of the module, and
// directions that must never appear whatever a row says.
type Table struct {
	Rules     []Rule
	Forbidden []Forbid
}

// Rule is one package's row: what it is and what it may import.
type Rule struct {
	// Pkg is the package's path below the module ("internal/meta").
	Pkg  string
	Kind Kind
	// Imports are the weft packages it may import (paths below the
	// module), besides Shared ones, which every package but an edge may
	// import without listing them. Only the package's non-test files are
	// held to them, except an edge's, whose test files are too.
	Imports []string
	// Libraries are, for an edge only, the modules other than weft and
	// the standard library that it may import (module paths: a package
	// below one is allowed).
	Libraries []string
}

// Forbid is a direction that must never appear: From may not import To.
type Forbid struct {
	From, To string
	// Why says what the direction would break.
	Why string
}

// Kind is what a package is; each kind brings rules on top of the rows.
type Kind uint8

// Kinds of packages.
const (
	// Part is a part of the file system; its row alone says what it
	// imports.
	Part Kind = iota + 1
	// Wiring is a process or what wires one; only wiring and test
	// support import it.
	Wiring
	// Edge is a protocol gateway (FUSE, NFS, S3): it imports EdgeAPI and
	// nothing else of weft, and no module but its protocol libraries — in
	// its test files too.
	Edge
	// Leaf is a self-contained part: it imports no domain package, only
	// packages of its own tree (kv's backends import kv) and Shared ones.
	Leaf
	// Shared is infrastructure every package but an edge may import
	// without its row saying so; it imports only other Shared packages.
	Shared
	// Test is test support; only test files and other test support import
	// it.
	Test
)

// String returns the kind's name as the document shows it.
func (k Kind) String() string {
	switch k {
	case Part:
		return "part"
	case Wiring:
		return "wiring"
	case Edge:
		return "edge"
	case Leaf:
		return "leaf"
	case Shared:
		return "shared"
	case Test:
		return "test"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// rule says, for the document, what a kind's rule is.
func (k Kind) rule() string {
	switch k {
	case Part:
		return "a part of the file system; its row says what it imports"
	case Wiring:
		return "a process or what wires one; only wiring and test support import it"
	case Edge:
		return "a protocol gateway: imports `" + EdgeAPI + "` and nothing else of weft, and no module but its protocol libraries, in its test files too"
	case Leaf:
		return "a self-contained part: imports no domain package, only packages of its own tree and shared ones"
	case Shared:
		return "infrastructure every package but an edge may import without its row saying so; imports only shared packages"
	case Test:
		return "test support: only test files and other test support import it"
	}
	return ""
}

// row returns pkg's row, or nil.
func (t Table) row(pkg string) *Rule {
	for i := range t.Rules {
		if t.Rules[i].Pkg == pkg {
			return &t.Rules[i]
		}
	}
	return nil
}

// allows reports whether r's package may import the weft package to (a
// path below the module) by the table.
func (t Table) allows(r *Rule, to string) bool {
	if slices.Contains(r.Imports, to) {
		return true
	}
	if r.Kind == Edge {
		return false
	}
	tr := t.row(to)
	return tr != nil && tr.Kind == Shared
}

// forbidden returns the Forbid for from → to, or nil.
func (t Table) forbidden(from, to string) *Forbid {
	for i := range t.Forbidden {
		if f := &t.Forbidden[i]; f.From == from && f.To == to {
			return f
		}
	}
	return nil
}

// tree is the part of a path that names a package's tree:
// "internal/kv/memkv" → "internal/kv".
func tree(pkg string) string {
	parts := strings.SplitN(pkg, "/", 3)
	if len(parts) < 2 {
		return pkg
	}
	return parts[0] + "/" + parts[1]
}

// Validate checks the table against the rules of its kinds and its
// forbidden directions, so that a row cannot allow what the architecture
// forbids. It returns one error per broken rule, each naming the row.
func (t Table) Validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	seen := map[string]bool{}
	for _, r := range t.Rules {
		if seen[r.Pkg] {
			bad("%s: two rows", r.Pkg)
		}
		seen[r.Pkg] = true
		if r.Kind < Part || r.Kind > Test {
			bad("%s: no kind (want part, wiring, edge, leaf, shared or test)", r.Pkg)
		}
		if r.Kind != Edge && len(r.Libraries) > 0 {
			bad("%s: lists libraries, but only an edge's imports of other modules are restricted", r.Pkg)
		}
		for _, to := range r.Imports {
			tr := t.row(to)
			switch {
			case to == r.Pkg:
				bad("%s: lists itself", r.Pkg)
			case tr == nil:
				bad("%s: may import %s, which has no row", r.Pkg, to)
			case r.Kind == Edge && to != EdgeAPI:
				bad("%s: an edge may import only %s, not %s", r.Pkg, EdgeAPI, to)
			case r.Kind == Leaf && tree(to) != tree(r.Pkg) && tr.Kind != Shared:
				bad("%s: a leaf may import only its own tree (%s) and shared packages, not %s", r.Pkg, tree(r.Pkg), to)
			case r.Kind == Shared && tr.Kind != Shared:
				bad("%s: a shared package may import only shared ones, not %s", r.Pkg, to)
			case tr.Kind == Test && r.Kind != Test:
				bad("%s: may import %s, which is test support: import it from test files only", r.Pkg, to)
			case tr.Kind == Wiring && r.Kind != Wiring && r.Kind != Test:
				bad("%s: may import %s, which is wiring: only wiring imports it", r.Pkg, to)
			}
			if f := t.forbidden(r.Pkg, to); f != nil {
				bad("%s: may import %s, which is forbidden: %s", r.Pkg, to, f.Why)
			}
		}
	}
	for _, f := range t.Forbidden {
		if t.row(f.From) == nil {
			bad("forbidden %s → %s: %s has no row", f.From, f.To, f.From)
		}
	}
	return errs
}
