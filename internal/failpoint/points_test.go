package failpoint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// pointName is the shape of a point's name: "package/step".
var pointName = regexp.MustCompile(`^[a-z]+/[a-z]+(-[a-z]+)*$`)

// The points in the code are the points in docs/architecture.md's table.
// A point is named "package/step" after the package that evaluates it
// (the step in lower case, words joined by '-'), as a string literal in
// that package's code — passed to Eval, or to the function that does.
func TestPointsAreDocumented(t *testing.T) {
	root := filepath.Join("..", "..")
	code := map[string]string{}    // point → file
	uses := map[string]bool{}      // directory → a file imports failpoint
	found := map[string][]string{} // directory → point-shaped literals, "point file"
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		dir := filepath.Dir(p)
		uses[dir] = uses[dir] || slices.ContainsFunc(f.Imports, func(s *ast.ImportSpec) bool {
			return s.Path.Value == `"github.com/weftfs/weft/internal/failpoint"`
		})
		ast.Inspect(f, func(n ast.Node) bool {
			if _, ok := n.(*ast.ImportSpec); ok {
				return false
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !pointName.MatchString(s) || !strings.HasPrefix(s, f.Name.Name+"/") {
				return true
			}
			found[dir] = append(found[dir], s+" "+p)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, lits := range found {
		for _, l := range lits {
			if point, file, _ := strings.Cut(l, " "); uses[dir] {
				code[point] = file
			}
		}
	}
	docs := documentedPoints(t, filepath.Join(root, "docs", "architecture.md"))
	for p, file := range code {
		if !slices.Contains(docs, p) {
			t.Errorf("point %s (%s) is not in docs/architecture.md's table (\"Fault injection\")", p, file)
		}
	}
	for _, p := range docs {
		if code[p] == "" {
			t.Errorf("docs/architecture.md lists point %s, which no code evaluates", p)
		}
	}
	if len(code) == 0 {
		t.Fatal("no point found in the code")
	}
}

// documentedPoints returns the points of the table in the "Fault
// injection" section of the architecture document, sorted.
func documentedPoints(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Fault injection\n")
	if !ok {
		t.Fatalf("%s has no section \"Fault injection\"", path)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var out []string
	for _, line := range strings.Split(sec, "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if name, _, ok = strings.Cut(name, "`"); ok && pointName.MatchString(name) {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out
}
