package layering

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the import table's and the goroutine list's copies in docs/architecture.md from rules.go and goroutines.go")

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

// TestDocument checks that docs/architecture.md prints the import table
// and the goroutine list as they are; with -update it rewrites the copies
// there.
func TestDocument(t *testing.T) {
	path := filepath.Join(moduleRoot(t), "docs", "architecture.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	changed := false
	for _, sec := range []struct{ name, body, source string }{
		{"layering", Weft().Markdown(), "internal/layering/rules.go"},
		{"goroutines", GoroutinesMarkdown(WeftGoroutines()), "internal/layering/goroutines.go"},
	} {
		out, old, err := Splice(doc, sec.name, sec.body)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if old == sec.body {
			continue
		}
		if !*update {
			t.Errorf("the %s section of %s differs from %s: "+
				"regenerate it with go test ./internal/layering -update (edit the Go file, not the document)", sec.name, path, sec.source)
			continue
		}
		doc, changed = out, true
	}
	if changed {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the generated sections of %s", path)
	}
}

// TestGoroutines checks every go statement of the module's code (test
// files excepted) against WeftGoroutines.
func TestGoroutines(t *testing.T) {
	found, err := FindGo(moduleRoot(t), "cmd", "internal", "tests")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatal("no go statement found: is the module root right?")
	}
	unlisted, stale := CheckGo(found, WeftGoroutines())
	for _, s := range unlisted {
		t.Errorf("go statement at %s: long-lived work is a worker of the process's runner (internal/runner) or a job; "+
			"a goroutine that belongs to one call and ends with it is listed, with why, in WeftGoroutines (internal/layering/goroutines.go)", s)
	}
	for _, g := range stale {
		t.Errorf("WeftGoroutines lists %s in %s, which has no go statement: remove the entry", g.Func, g.File)
	}
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
