package layering

import (
	"fmt"
	"strings"
)

// Markers delimit the table's copy in a document.
const (
	BeginMarker = "<!-- layering:begin -->"
	EndMarker   = "<!-- layering:end -->"
)

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

// Splice returns doc with the text between BeginMarker and EndMarker
// (each on its own line) replaced by body, and the text that was there.
func Splice(doc, body string) (out, old string, err error) {
	i := strings.Index(doc, BeginMarker+"\n")
	j := strings.Index(doc, "\n"+EndMarker)
	if i < 0 || j < 0 || j < i {
		return "", "", fmt.Errorf("layering: the document has no %s … %s section, each marker on its own line", BeginMarker, EndMarker)
	}
	start := i + len(BeginMarker) + 1
	return doc[:start] + body + doc[j+1:], doc[start : j+1], nil
}
