package layering

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// GoSite is a go statement in the module's code (test files excluded):
// its file below the module, the function it is in ("Type.Method",
// "Func", or "Func.func" for a function literal's) and its line.
type GoSite struct {
	File string
	Func string
	Line int
}

func (s GoSite) String() string { return fmt.Sprintf("%s:%d (in %s)", s.File, s.Line, s.Func) }

// Goroutine is the place where go statements are allowed: a file and a
// function in it (every go statement of the function is allowed), and why
// what it starts is not a worker of the runner or a job.
type Goroutine struct {
	File string
	Func string
	Why  string
}

// FindGo returns the go statements of the Go files below root's dirs,
// test files (_test.go) and testdata directories excepted, in file and
// line order.
func FindGo(root string, dirs ...string) ([]GoSite, error) {
	var out []GoSite
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, goStatements(fset, filepath.ToSlash(rel), f)...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("layering: %w", err)
		}
	}
	return out, nil
}

// goStatements returns f's go statements, each with the function it is in.
func goStatements(fset *token.FileSet, file string, f *ast.File) []GoSite {
	var out []GoSite
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			name = recvType(fd.Recv.List[0].Type) + "." + name
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok {
				out = append(out, GoSite{File: file, Func: name, Line: fset.Position(g.Pos()).Line})
			}
			return true
		})
	}
	return out
}

// recvType is a receiver's type name without pointer or type parameters.
func recvType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return "?"
		}
	}
}

// CheckGo returns the go statements found that no entry of allowed
// covers, and the entries that cover none (stale: remove them).
func CheckGo(found []GoSite, allowed []Goroutine) (unlisted []GoSite, stale []Goroutine) {
	used := make([]bool, len(allowed))
	for _, s := range found {
		i := slices.IndexFunc(allowed, func(g Goroutine) bool { return g.File == s.File && g.Func == s.Func })
		if i < 0 {
			unlisted = append(unlisted, s)
			continue
		}
		used[i] = true
	}
	for i, g := range allowed {
		if !used[i] {
			stale = append(stale, g)
		}
	}
	return unlisted, stale
}
