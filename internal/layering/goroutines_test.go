package layering

import (
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// TestGoStatements: go statements are found in functions, methods (of
// pointer and generic receivers), function literals and package-level
// initializers, and X.Go(func…) spawns (sync.WaitGroup.Go, errgroup) but
// not the runner's Go(name, worker, options), each named by its
// declaration; CheckGo reports the unlisted ones and the stale entries.
func TestGoStatements(t *testing.T) {
	const src = `package p

func plain() { go work() }

func (s *Server) Serve() {
	for {
		go func() { go work() }()
	}
}

func (l list[T]) each() { go work() }

var v = func() { go work() }

func fanOut(wg *sync.WaitGroup, run *runner.Runner) {
	wg.Go(func() { work() })
	run.Go("name", w, opts)
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := goStatements(fset, "p/p.go", f)
	want := []GoSite{{"p/p.go", "plain", 3}, {"p/p.go", "Server.Serve", 7}, {"p/p.go", "Server.Serve", 7}, {"p/p.go", "list.each", 11}, {"p/p.go", "package level", 13}, {"p/p.go", "fanOut", 16}}
	if !slices.Equal(got, want) {
		t.Fatalf("found %v, want %v", got, want)
	}
	unlisted, stale := CheckGo(got, []Goroutine{{File: "p/p.go", Func: "Server.Serve"}, {File: "p/p.go", Func: "gone"}})
	if !slices.Equal(unlisted, []GoSite{want[0], want[3], want[4], want[5]}) {
		t.Errorf("unlisted %v", unlisted)
	}
	if len(stale) != 1 || stale[0].Func != "gone" {
		t.Errorf("stale %v", stale)
	}
}
