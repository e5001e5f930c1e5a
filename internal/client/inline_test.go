package client_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/placement"
)

// inlineMax is the InlineMax of the inline tests' clients.
const inlineMax = 4 * kib

func inlineClient(f *clienttest.Fixture) *client.Client {
	return f.Client(0, func(c *client.Config) { c.InlineMax = inlineMax })
}

// onlyStripe returns lin's one stripe map, failing unless it has one.
func onlyStripe(t *testing.T, f *clienttest.Fixture, lin meta.LIN) meta.Stripe {
	t.Helper()
	ss := f.Stripes(lin)
	if len(ss) != 1 {
		t.Fatalf("LIN %d has %d stripes, want 1: %+v", lin, len(ss), ss)
	}
	return ss[0]
}

// TestInlineFiles writes files at and around InlineMax: those that fit
// are committed inline (no block written, none read back), the others go
// to blocks as before; both read back through another client.
func TestInlineFiles(t *testing.T) {
	f := clienttest.New(t)
	w := inlineClient(f)
	for _, size := range []int{1, 100, inlineMax - 1, inlineMax, inlineMax + 1, 64 * kib} {
		data := clienttest.RandBytes(size, uint64(size))
		before := w.Stats()
		lin := f.WriteClosed(w, fmt.Sprintf("f%d", size), "", data)
		after := w.Stats()
		s := onlyStripe(t, f, lin)
		wantInline := size <= inlineMax
		if s.IsInline() != wantInline || (after.InlineWritten-before.InlineWritten == 1) != wantInline {
			t.Fatalf("%d bytes: inline %v (%d inline commits), want %v", size, s.IsInline(), after.InlineWritten-before.InlineWritten, wantInline)
		}
		if wantInline && (after.UnitBytesWritten != before.UnitBytesWritten || len(s.Units) != 0 || !bytes.Equal(s.Inline, data)) {
			t.Fatalf("%d bytes inline: %d unit bytes written, %d units", size, after.UnitBytesWritten-before.UnitBytesWritten, len(s.Units))
		}
		r := inlineClient(f)
		fh, err := r.Open(bg, lin, false)
		if err != nil {
			t.Fatal(err)
		}
		clienttest.MustEqual(t, "read back", clienttest.ReadAll(t, fh, 1000), data)
		fh.Close(bg)
		if wantInline && r.Stats().UnitBytesRead != 0 {
			t.Fatalf("%d bytes inline: %d unit bytes read", size, r.Stats().UnitBytesRead)
		}
		// The layout shows it.
		l, err := r.Layout(bg, lin)
		if err != nil || len(l.Stripes) != 1 || l.Stripes[0].Inline != wantInline || l.BelowTarget != 0 {
			t.Fatalf("layout %+v, %v", l, err)
		}
		// An inline stripe claims no tolerance of placed units.
		if (l.Achieved == nil) != wantInline || (wantInline && l.Stripes[0].Tolerance != (placement.Tolerance{})) {
			t.Fatalf("%d bytes: achieved %v, stripe tolerance %v", size, l.Achieved, l.Stripes[0].Tolerance)
		}
	}
	// With InlineMax negative every file goes to blocks.
	lin := f.WriteClosed(f.Client(0), "blocks", "", []byte("tiny"))
	if s := onlyStripe(t, f, lin); s.IsInline() || len(s.Units) == 0 {
		t.Fatalf("InlineMax -1: %+v", s)
	}
}

// TestInlineFileChanges overwrites, grows past InlineMax, shrinks and
// re-opens an inline file, checking its bytes against a model each time.
func TestInlineFileChanges(t *testing.T) {
	f := clienttest.New(t)
	c := inlineClient(f)
	model := []byte("hello, inline world")
	lin := f.WriteClosed(c, "f", "", model)
	write := func(off int, p []byte) {
		t.Helper()
		fh, err := c.Open(bg, lin, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteAt(bg, p, int64(off)); err != nil {
			t.Fatal(err)
		}
		if err := fh.Close(bg); err != nil {
			t.Fatal(err)
		}
		if end := off + len(p); end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], p)
	}
	expect := func(what string, inline bool) {
		t.Helper()
		clienttest.MustEqual(t, what, f.ReadBack(lin), model)
		if s := onlyStripe(t, f, lin); s.IsInline() != inline {
			t.Fatalf("%s: inline %v, want %v", what, s.IsInline(), inline)
		}
	}
	write(7, []byte("INLINE")) // a partial overwrite merges with the stored bytes
	expect("overwritten", true)
	write(100, []byte("past the end")) // a gap of zeros
	expect("extended", true)
	write(inlineMax-5, clienttest.RandBytes(20, 1)) // past InlineMax: to blocks
	expect("grown past InlineMax", false)
	truncate := func(n int) {
		t.Helper()
		fh, err := c.Open(bg, lin, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := fh.Truncate(bg, int64(n)); err != nil {
			t.Fatal(err)
		}
		if err := fh.Close(bg); err != nil {
			t.Fatal(err)
		}
		model = model[:n]
	}
	// Shrunk below InlineMax, it stays in blocks until written again.
	truncate(50)
	expect("truncated", false)
	write(0, []byte("again"))
	expect("rewritten small", true)
	f.DrainDeletes()
	// An inline file truncated keeps its head.
	truncate(3)
	expect("inline truncated", true)
}

// TestInlineConcurrentWriters: two clients write different bytes of one
// inline file; the second commit loses the compare-and-swap, re-reads the
// stripe and re-applies only its own bytes, as for stripes in blocks.
func TestInlineConcurrentWriters(t *testing.T) {
	f := clienttest.New(t)
	a, b := inlineClient(f), inlineClient(f)
	lin := f.WriteClosed(a, "f", "", bytes.Repeat([]byte("."), 64))
	fa, err := a.Open(bg, lin, true)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := b.Open(bg, lin, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fa.WriteAt(bg, []byte("AAAA"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fb.WriteAt(bg, []byte("BBBB"), 60); err != nil {
		t.Fatal(err)
	}
	// b read the stripe's map before a committed: its cached map is stale.
	if _, err := fb.ReadAt(bg, make([]byte, 1), 10); err != nil {
		t.Fatal(err)
	}
	if err := fa.Close(bg); err != nil {
		t.Fatal(err)
	}
	if err := fb.Close(bg); err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte("AAAA"), bytes.Repeat([]byte("."), 56)...), "BBBB"...)
	clienttest.MustEqual(t, "both writes", f.ReadBack(lin), want)
	if s := onlyStripe(t, f, lin); !s.IsInline() || s.Gen != 3 {
		t.Fatalf("stripe %+v, want inline at generation 3", s)
	}
}
