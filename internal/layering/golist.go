package layering

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ParseGoList reads the output of `go list -json ./...` run at a module's
// root into its import graph. Every package must belong to one module.
func ParseGoList(r io.Reader) (Graph, error) {
	var g Graph
	d := json.NewDecoder(r)
	for {
		var p struct {
			ImportPath   string
			Module       *struct{ Path string }
			Imports      []string
			TestImports  []string
			XTestImports []string
		}
		if err := d.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return Graph{}, fmt.Errorf("layering: reading go list output: %w", err)
		}
		if p.Module == nil {
			return Graph{}, fmt.Errorf("layering: go list reports package %s outside any module: run it at the module's root", p.ImportPath)
		}
		if g.Module == "" {
			g.Module = p.Module.Path
		} else if g.Module != p.Module.Path {
			return Graph{}, fmt.Errorf("layering: go list reports packages of modules %s and %s: want one", g.Module, p.Module.Path)
		}
		g.Packages = append(g.Packages, Package{Path: p.ImportPath, Imports: p.Imports,
			TestImports: append(p.TestImports, p.XTestImports...)})
	}
	if len(g.Packages) == 0 {
		return Graph{}, errors.New("layering: go list reported no package")
	}
	return g, nil
}
