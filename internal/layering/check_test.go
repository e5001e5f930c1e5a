package layering

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/weftfs/weft"

// graphOf returns a graph in which every package of t imports exactly what
// its row allows (plus the standard library and its libraries).
func graphOf(t Table) Graph {
	g := Graph{Module: mod}
	for _, r := range t.Rules {
		p := Package{Path: mod + "/" + r.Pkg, Imports: []string{"context", "fmt"}}
		for _, i := range r.Imports {
			p.Imports = append(p.Imports, mod+"/"+i)
		}
		for _, l := range r.Libraries {
			p.Imports = append(p.Imports, l+"/sub")
		}
		g.Packages = append(g.Packages, p)
	}
	return g
}

// edit changes the package at path (below the module) in g.
func edit(g Graph, path string, fn func(p *Package)) Graph {
	g.Packages = slices.Clone(g.Packages)
	for i := range g.Packages {
		if g.Packages[i].Path == mod+"/"+path {
			p := g.Packages[i]
			p.Imports, p.TestImports = slices.Clone(p.Imports), slices.Clone(p.TestImports)
			fn(&p)
			g.Packages[i] = p
			return g
		}
	}
	panic("no package " + path)
}

func weft(paths ...string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = mod + "/" + p
	}
	return out
}

func TestCheck(t *testing.T) {
	table := Weft()
	clean := graphOf(table)
	for _, tc := range []struct {
		name string
		g    Graph
		// want are the violations as "pkg → import" (or "pkg"), each with
		// a word its reason must hold.
		want map[string]string
	}{
		{"the table's own graph", clean, nil},
		{"the FUSE gateway as it was: meta, kv and client", edit(clean, "internal/gateway/fuse", func(p *Package) {
			p.Imports = append(p.Imports, weft("internal/meta", "internal/kv", "internal/client")...)
		}), map[string]string{
			"internal/gateway/fuse → internal/meta":   "only internal/vfs",
			"internal/gateway/fuse → internal/kv":     "only internal/vfs",
			"internal/gateway/fuse → internal/client": "only internal/vfs",
		}},
		{"a gateway's test files are checked", edit(clean, "internal/gateway/fuse", func(p *Package) {
			p.TestImports = append(p.TestImports, weft("internal/meta", "internal/gateway/fuse", "internal/vfs")...)
			p.TestImports = append(p.TestImports, "testing", "github.com/hanwen/go-fuse/v2/fs")
		}), map[string]string{"internal/gateway/fuse → internal/meta": "only internal/vfs"}},
		{"a gateway uses another module", edit(clean, "internal/gateway/fuse", func(p *Package) {
			p.Imports = append(p.Imports, "github.com/other/nfs", "golang.org/x/sys/unix")
		}), map[string]string{
			"internal/gateway/fuse → github.com/other/nfs":  "protocol libraries",
			"internal/gateway/fuse → golang.org/x/sys/unix": "protocol libraries",
		}},
		{"a gateway may not use shared packages", edit(clean, "internal/gateway/fuse", func(p *Package) {
			p.Imports = append(p.Imports, weft("internal/failpoint")...)
		}), map[string]string{"internal/gateway/fuse → internal/failpoint": "only internal/vfs"}},
		{"anyone else may use shared packages unlisted", edit(clean, "internal/meta", func(p *Package) {
			p.Imports = append(p.Imports, weft("internal/failpoint")...)
		}), nil},
		{"a package absent from the table", Graph{Module: mod, Packages: append(slices.Clone(clean.Packages),
			Package{Path: mod + "/internal/nosuchpart", Imports: weft("internal/meta")})},
			map[string]string{"internal/nosuchpart": "add one"}},
		{"a row without a package", Graph{Module: mod, Packages: slices.DeleteFunc(slices.Clone(clean.Packages),
			func(p Package) bool { return p.Path == mod+"/internal/bench" })},
			map[string]string{"internal/bench": "remove the row"}},
		{"meta imports client", edit(clean, "internal/meta", func(p *Package) {
			p.Imports = append(p.Imports, weft("internal/client")...)
		}), map[string]string{"internal/meta → internal/client": "forbidden"}},
		{"meta imports cluster", edit(clean, "internal/meta", func(p *Package) {
			p.Imports = append(p.Imports, weft("internal/cluster")...)
		}), map[string]string{"internal/meta → internal/cluster": "forbidden"}},
		{"a leaf imports a domain package", edit(clean, "internal/kv", func(p *Package) {
			p.Imports = append(p.Imports, weft("internal/meta")...)
		}), map[string]string{"internal/kv → internal/meta": "leaf"}},
		{"vfs imports more than meta and client", edit(clean, "internal/vfs", func(p *Package) {
			p.Imports = append(p.Imports, weft("internal/kv")...)
		}), map[string]string{"internal/vfs → internal/kv": "add it to the row"}},
		{"a row allows an import the package no longer makes", edit(clean, "internal/vfs", func(p *Package) {
			p.Imports = slices.DeleteFunc(p.Imports, func(s string) bool { return s == mod+"/internal/client" })
		}), map[string]string{"internal/vfs → internal/client": "no longer makes it"}},
		{"non-test code imports test support", edit(clean, "internal/client", func(p *Package) {
			p.Imports = append(p.Imports, weft("internal/kv/kvtest")...)
		}), map[string]string{"internal/client → internal/kv/kvtest": "test files only"}},
		{"other packages' test files are not checked", edit(clean, "internal/meta", func(p *Package) {
			p.TestImports = append(p.TestImports, weft("internal/kv/memkv", "internal/etcdx/etcdtest")...)
		}), nil},
		{"packages of other modules are ignored", Graph{Module: mod, Packages: append(slices.Clone(clean.Packages),
			Package{Path: "example.com/else", Imports: weft("internal/meta")})}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for _, v := range Check(tc.g, table) {
				key := v.Pkg
				if v.Import != "" {
					key += " → " + v.Import
				}
				got[key] = v.Reason
			}
			for k, word := range tc.want {
				if reason, ok := got[k]; !ok {
					t.Errorf("no violation %s", k)
				} else if !strings.Contains(reason, word) {
					t.Errorf("%s: reason %q does not say %q", k, reason, word)
				}
			}
			for k, reason := range got {
				if _, ok := tc.want[k]; !ok {
					t.Errorf("unexpected violation %s: %s", k, reason)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(t *Table)
		want string // a word of the one error; "" for none
	}{
		{"weft's table", func(*Table) {}, ""},
		{"an edge allowed meta", func(t *Table) { t.row("internal/gateway/fuse").Imports = []string{EdgeAPI, "internal/meta"} },
			"an edge may import only internal/vfs"},
		{"a leaf allowed a domain package", func(t *Table) { t.row("internal/kv").Imports = []string{"internal/meta"} },
			"a leaf may import only its own tree"},
		{"a leaf allowed its own tree and shared", func(t *Table) {
			t.row("internal/kv/memkv").Imports = []string{"internal/kv", "internal/failpoint"}
		}, ""},
		{"meta allowed client", func(t *Table) { add(t, "internal/meta", "internal/client") }, "forbidden"},
		{"meta allowed cluster", func(t *Table) { add(t, "internal/meta", "internal/cluster") }, "forbidden"},
		{"a part allowed test support", func(t *Table) { add(t, "internal/client", "internal/kv/kvtest") }, "test support"},
		{"a part allowed wiring", func(t *Table) { add(t, "internal/admin", "internal/server") }, "wiring"},
		{"test support allowed wiring", func(t *Table) { add(t, "tests/harness", "internal/mount") }, ""},
		{"an import without a row", func(t *Table) { add(t, "internal/client", "internal/nosuchpart") }, "has no row"},
		{"a shared package allowed a part", func(t *Table) { add(t, "internal/failpoint", "internal/meta") }, "shared package"},
		{"two rows", func(t *Table) { t.Rules = append(t.Rules, Rule{Pkg: "internal/meta", Kind: Part}) }, "two rows"},
		{"a row without a kind", func(t *Table) { t.row("internal/bench").Kind = 0 }, "no kind"},
		{"libraries for a part", func(t *Table) { t.row("internal/vfs").Libraries = []string{"example.com/x"} }, "only an edge"},
		{"a row allowing itself", func(t *Table) { add(t, "internal/meta", "internal/meta") }, "itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := Weft()
			tc.edit(&table)
			errs := table.Validate()
			if tc.want == "" {
				for _, err := range errs {
					t.Error(err)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("errors %v, want one saying %q", errs, tc.want)
			}
		})
	}
}

// add lets the row of from import to.
func add(t *Table, from, to string) {
	r := t.row(from)
	r.Imports = append(slices.Clone(r.Imports), to)
}

func TestParseGoList(t *testing.T) {
	out := `{"ImportPath": "github.com/weftfs/weft/internal/vfs", "Module": {"Path": "github.com/weftfs/weft"},
	  "Imports": ["context", "github.com/weftfs/weft/internal/meta"], "TestImports": ["testing"]}
	{"ImportPath": "github.com/weftfs/weft/tests", "Module": {"Path": "github.com/weftfs/weft"},
	  "XTestImports": ["github.com/weftfs/weft/tests/harness"]}`
	g, err := ParseGoList(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", g)
	want := "{Module:github.com/weftfs/weft Packages:[" +
		"{Path:github.com/weftfs/weft/internal/vfs Imports:[context github.com/weftfs/weft/internal/meta] TestImports:[testing]} " +
		"{Path:github.com/weftfs/weft/tests Imports:[] TestImports:[github.com/weftfs/weft/tests/harness]}]}"
	if got != want {
		t.Errorf("ParseGoList:\n got %s\nwant %s", got, want)
	}
	for _, bad := range []string{
		``,
		`{"ImportPath": "fmt"}`,
		`{"ImportPath": "a/x", "Module": {"Path": "a"}} {"ImportPath": "b/y", "Module": {"Path": "b"}}`,
		`{"ImportPath": `,
	} {
		if _, err := ParseGoList(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseGoList(%q) succeeded", bad)
		}
	}
}

func TestSplice(t *testing.T) {
	begin, end := Markers("layering")
	doc := "intro\n" + begin + "\nold\ntable\n" + end + "\nafter\n"
	out, old, err := Splice(doc, "layering", "new\n")
	if err != nil {
		t.Fatal(err)
	}
	if old != "old\ntable\n" {
		t.Errorf("old = %q", old)
	}
	if want := "intro\n" + begin + "\nnew\n" + end + "\nafter\n"; out != want {
		t.Errorf("out = %q, want %q", out, want)
	}
	for _, bad := range []string{"no markers", end + "\n" + begin + "\n", begin + " x" + end} {
		if _, _, err := Splice(bad, "layering", "x"); err == nil {
			t.Errorf("Splice(%q) succeeded", bad)
		}
	}
}
