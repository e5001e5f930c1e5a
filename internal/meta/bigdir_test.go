package meta

import (
	"flag"
	"fmt"
	"testing"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

var bigDirEntries = flag.Int("bigdir.entries", 1_000_000, "entries of the directory TestBigDirectory lists")

// TestBigDirectory lists a directory of a million entries in pages. The
// entries are loaded straight into the store (a million creates would test
// create speed, not listing).
func TestBigDirectory(t *testing.T) {
	n := *bigDirEntries
	if testing.Short() {
		n = min(n, 20_000)
	}
	store := memkv.New(kv.Options{})
	m := newMeta(t, store)
	d := must(m.Mkdir(bg, RootLIN, "big", 0o755))
	const batch = 50_000
	for i := 0; i < n; i += batch {
		ok(t, store.Update(bg, func(tx kv.Tx) error {
			for j := i; j < min(n, i+batch); j++ {
				lin := LIN(1<<32 + j)
				tx.Put(keyEntry(d.LIN, fmt.Sprintf("f%07d", j)), encodeEntry(TypeFile, lin))
			}
			return nil
		}))
	}
	count, pages := 0, 0
	for after := ""; ; pages++ {
		ents, next, err := m.ReadDir(bg, d.LIN, after, 1000)
		ok(t, err)
		for _, e := range ents {
			if want := fmt.Sprintf("f%07d", count); e.Name != want {
				t.Fatalf("entry %d is %q, want %q", count, e.Name, want)
			}
			count++
		}
		if next == "" {
			break
		}
		after = next
	}
	if count != n {
		t.Fatalf("listed %d entries, want %d", count, n)
	}
	wantErr(t, m.Rmdir(bg, RootLIN, "big"), ErrNotEmpty)
	t.Logf("%d entries in %d pages", count, pages)
}
