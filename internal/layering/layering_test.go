package layering

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the import table's copy in docs/architecture.md from rules.go")

// TestImports checks the module's import graph (go list) against the table,
// and the table against the rules of its kinds.
func TestImports(t *testing.T) {
	for _, err := range Weft().Validate() {
		t.Errorf("import table: %v", err)
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json ./... in %s: %v\n%s", cmd.Dir, err, stderr.Bytes())
	}
	g, err := ParseGoList(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if g.Module != "github.com/weftfs/weft" {
		t.Fatalf("go list reports module %q", g.Module)
	}
	for _, v := range Check(g, Weft()) {
		t.Error(v)
	}
}

// TestDocument checks that docs/architecture.md prints the table as it is;
// with -update it rewrites the copy there.
func TestDocument(t *testing.T) {
	path := filepath.Join(moduleRoot(t), "docs", "architecture.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Weft().Markdown()
	out, old, err := Splice(string(doc), want)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if old == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the import table in %s", path)
		return
	}
	t.Errorf("the import table in %s differs from internal/layering/rules.go: "+
		"regenerate it with go test ./internal/layering -update (edit rules.go, not the document)", path)
}

// moduleRoot returns the directory holding go.mod, above the test's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
