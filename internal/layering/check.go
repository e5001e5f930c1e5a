package layering

import (
	"fmt"
	"slices"
	"strings"
)

// Graph is a module's import graph, as go list reports it.
type Graph struct {
	// Module is the module's path ("github.com/weftfs/weft").
	Module   string
	Packages []Package
}

// Package is one package of the module.
type Package struct {
	// Path is the full import path.
	Path string
	// Imports are the full import paths its non-test files import.
	Imports []string
	// TestImports are those its test files import (in-package and
	// external tests together).
	TestImports []string
}

// Violation is one import, or one package, the table does not allow.
type Violation struct {
	// Pkg is the package below the module; Import what it imports (full
	// path for another module, below the module for weft's), or "" when
	// the package itself is the problem.
	Pkg, Import string
	// Reason says what is wrong and what to do.
	Reason string
}

// String returns "pkg → import: reason".
func (v Violation) String() string {
	if v.Import == "" {
		return v.Pkg + ": " + v.Reason
	}
	return v.Pkg + " → " + v.Import + ": " + v.Reason
}

// Check returns every violation of t in g, sorted by package: a package
// without a row, an import its row does not allow (non-test files; an
// edge's test files too), an edge's import of a module outside its
// Libraries, and a row naming no package of g. It does not validate t
// itself (Table.Validate does). It is a pure function.
func Check(g Graph, t Table) []Violation {
	var vs []Violation
	present := map[string]bool{}
	pkgs := slices.Clone(g.Packages)
	slices.SortFunc(pkgs, func(a, b Package) int { return strings.Compare(a.Path, b.Path) })
	for _, p := range pkgs {
		rel, ok := below(g.Module, p.Path)
		if !ok {
			continue
		}
		present[rel] = true
		r := t.row(rel)
		if r == nil {
			vs = append(vs, Violation{Pkg: rel, Reason: "has no row in the import table: add one to Weft in internal/layering/rules.go, " +
				"saying what it is and which weft packages it may import, then run go test ./internal/layering -update"})
			continue
		}
		imports := p.Imports
		if r.Kind == Edge {
			imports = append(slices.Clone(p.Imports), p.TestImports...)
		}
		seen := map[string]bool{}
		for _, imp := range imports {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			if to, weft := below(g.Module, imp); weft {
				if to != rel && !t.allows(r, to) {
					vs = append(vs, Violation{Pkg: rel, Import: to, Reason: refusal(t, r, to)})
				}
				continue
			}
			if r.Kind == Edge && !standard(imp) && !inModules(imp, r.Libraries) {
				vs = append(vs, Violation{Pkg: rel, Import: imp, Reason: fmt.Sprintf(
					"an edge may use only its protocol libraries (%s) besides the standard library and %s",
					strings.Join(r.Libraries, ", "), EdgeAPI)})
			}
		}
		// A row says exactly what the package imports: an allowance the
		// code no longer uses is stale, and would let the direction back
		// in unnoticed.
		for _, to := range r.Imports {
			if !seen[g.Module+"/"+to] {
				vs = append(vs, Violation{Pkg: rel, Import: to, Reason: "its row allows this import, but the package no longer makes it: " +
					"remove it from the row in internal/layering/rules.go and run go test ./internal/layering -update"})
			}
		}
	}
	for _, r := range t.Rules {
		if !present[r.Pkg] {
			vs = append(vs, Violation{Pkg: r.Pkg, Reason: "the import table has a row for it, but the module has no such package: remove the row"})
		}
	}
	return vs
}

// refusal says why r's package may not import to, and what to do.
func refusal(t Table, r *Rule, to string) string {
	if f := t.forbidden(r.Pkg, to); f != nil {
		return "forbidden: " + f.Why
	}
	switch r.Kind {
	case Edge:
		return "an edge sees only " + EdgeAPI + ": give vfs what the edge needs"
	case Leaf:
		if tr := t.row(to); tr == nil || tree(to) != tree(r.Pkg) {
			return "a leaf imports no domain package"
		}
	}
	if tr := t.row(to); tr != nil && tr.Kind == Test {
		return "test support is for test files only"
	}
	return "not in its row of the import table: if the direction is right, add it to the row in internal/layering/rules.go " +
		"(go test ./internal/layering checks it against the rules of the kinds) and run go test ./internal/layering -update"
}

// below returns path below module ("internal/meta"), and whether path is
// in module.
func below(module, path string) (string, bool) {
	if path == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// standard reports whether an import path is the standard library's: its
// first element has no dot (as the go command decides; "C" included).
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// inModules reports whether path is one of modules or a package below one.
func inModules(path string, modules []string) bool {
	for _, m := range modules {
		if path == m || strings.HasPrefix(path, m+"/") {
			return true
		}
	}
	return false
}
