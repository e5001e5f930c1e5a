package layering

import (
	"fmt"
	"strings"
)

// Markers returns the lines that delimit a generated section's copy in a
// document: "<!-- section:begin -->" and "<!-- section:end -->". The
// import table is section "layering", the goroutine list "goroutines".
func Markers(section string) (begin, end string) {
	return "<!-- " + section + ":begin -->", "<!-- " + section + ":end -->"
}

// Markdown renders t for docs/architecture.md: the rows in their order, the
// kinds' rules and the forbidden directions. The text between the markers
// there is exactly this.
func (t Table) Markdown() string {
	var b strings.Builder
	b.WriteString("<!-- Generated from internal/layering/rules.go by `go test ./internal/layering -update`; do not edit by hand. -->\n\n")
	b.WriteString("| package | kind | may import |\n| --- | --- | --- |\n")
	for _, r := range t.Rules {
		imports := "—"
		if len(r.Imports) > 0 {
			imports = code(r.Imports)
		}
		if len(r.Libraries) > 0 {
			imports += "; modules: " + code(r.Libraries)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.Pkg, r.Kind, imports)
	}
	b.WriteString("\nKinds (each brings its rule on top of its rows):\n\n")
	for _, k := range []Kind{Wiring, Edge, Part, Leaf, Shared, Test} {
		fmt.Fprintf(&b, "- **%s**: %s.\n", k, k.rule())
	}
	if len(t.Forbidden) > 0 {
		b.WriteString("\nNever, whatever a row says:\n\n")
		for _, f := range t.Forbidden {
			fmt.Fprintf(&b, "- `%s` → `%s`: %s.\n", f.From, f.To, f.Why)
		}
	}
	return b.String()
}

func code(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + s + "`"
	}
	return strings.Join(out, ", ")
}

// Splice returns doc with the text between section's markers (each on
// its own line) replaced by body, and the text that was there.
func Splice(doc, section, body string) (out, old string, err error) {
	begin, end := Markers(section)
	i := strings.Index(doc, begin+"\n")
	j := strings.Index(doc, "\n"+end)
	if i < 0 || j < 0 || j < i {
		return "", "", fmt.Errorf("layering: the document has no %s … %s section, each marker on its own line", begin, end)
	}
	start := i + len(begin) + 1
	return doc[:start] + body + doc[j+1:], doc[start : j+1], nil
}
